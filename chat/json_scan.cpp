#include "chat/json_scan.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "text/json_escape.h"
#include "text/utf8.h"

namespace ggufd::chat::detail {

enum class JsonScanner::St : unsigned char {
    value,      // a value must come
    arr_first,  // after '[': a value or ']'
    obj_first,  // after '{': a key or '}'
    obj_key,    // after ',' in an object: a key
    colon,      // after a key
    after,      // after a value inside a container: ',' or the closing bracket
    str,
    str_escape,
    str_hex,
    num_minus,  // '-' read
    num_zero,   // a leading 0 read
    num_int,
    num_dot,  // '.' read, a digit must follow
    num_frac,
    num_e,       // 'e' read
    num_e_sign,  // 'e+' read
    num_exp,
    literal,  // inside true / false / null
};

namespace {

bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool digit(char c) {
    return c >= '0' && c <= '9';
}
bool hex(char c) {
    return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

Scan JsonScanner::feed(std::string_view s) {
    if (status_ != Scan::more) return status_;
    size_t i = 0;
    auto fail = [&] {
        read_ += i;
        return status_ = Scan::bad;
    };
    if (read_ == 0 && !s.empty()) {
        if (s[0] != '{' && s[0] != '[') return fail();
        st_ = St::value;
    }
    // The state lives in the members; locals keep the loop tight.
    St st = st_;
    bool key = key_;
    int hex_left = hex_left_;
    std::string_view rest = literal_;
    std::vector<char>& stack = stack_;
    auto save = [&] {
        st_ = st;
        key_ = key;
        hex_left_ = hex_left;
        literal_ = rest;
    };
    for (; i < s.size(); ++i) {
        const char c = s[i];
        // A number ends at the first byte that cannot continue it; that byte is then read as
        // whatever follows a value.
        const bool whole = st == St::num_zero || st == St::num_int;
        if (whole || st == St::num_frac || st == St::num_exp) {
            if (digit(c) && st != St::num_zero) continue;
            if (c == '.' && whole) {
                st = St::num_dot;
                continue;
            }
            if ((c == 'e' || c == 'E') && st != St::num_exp) {
                st = St::num_e;
                continue;
            }
            st = St::after;
        }
        switch (st) {
            case St::arr_first:
                if (blank(c)) continue;
                if (c == ']') goto close;
                st = St::value;
                [[fallthrough]];
            case St::value:
                if (blank(c)) continue;
                if (c == '{' || c == '[') {
                    if (stack.size() >= kMaxJsonDepth) return fail();
                    stack.push_back(c);
                    st = c == '{' ? St::obj_first : St::arr_first;
                } else if (c == '"') {
                    st = St::str;
                    key = false;
                } else if (c == '-') {
                    st = St::num_minus;
                } else if (c == '0') {
                    st = St::num_zero;
                } else if (digit(c)) {
                    st = St::num_int;
                } else if (c == 't') {
                    st = St::literal;
                    rest = "rue";
                } else if (c == 'f') {
                    st = St::literal;
                    rest = "alse";
                } else if (c == 'n') {
                    st = St::literal;
                    rest = "ull";
                } else {
                    return fail();
                }
                continue;
            case St::obj_first:
                if (blank(c)) continue;
                if (c == '}') goto close;
                [[fallthrough]];
            case St::obj_key:
                if (blank(c)) continue;
                if (c != '"') return fail();
                st = St::str;
                key = true;
                continue;
            case St::colon:
                if (blank(c)) continue;
                if (c != ':') return fail();
                st = St::value;
                continue;
            case St::after:
                if (blank(c)) continue;
                if (c == ',') {
                    st = stack.back() == '{' ? St::obj_key : St::value;
                    continue;
                }
                if ((c == '}' && stack.back() == '{') || (c == ']' && stack.back() == '[')) {
                    goto close;
                }
                return fail();
            case St::str:
                if (c == '"') {
                    st = key ? St::colon : St::after;
                } else if (c == '\\') {
                    st = St::str_escape;
                } else if (static_cast<unsigned char>(c) < 0x20) {
                    return fail();
                }
                continue;
            case St::str_escape:
                if (c == 'u') {
                    st = St::str_hex;
                    hex_left = 4;
                } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                           c == 'r' || c == 't') {
                    st = St::str;
                } else {
                    return fail();
                }
                continue;
            case St::str_hex:
                if (!hex(c)) return fail();
                if (--hex_left == 0) st = St::str;
                continue;
            case St::num_minus:
                if (c == '0') {
                    st = St::num_zero;
                } else if (digit(c)) {
                    st = St::num_int;
                } else {
                    return fail();
                }
                continue;
            case St::num_dot:
                if (!digit(c)) return fail();
                st = St::num_frac;
                continue;
            case St::num_e:
                if (c == '+' || c == '-') {
                    st = St::num_e_sign;
                } else if (digit(c)) {
                    st = St::num_exp;
                } else {
                    return fail();
                }
                continue;
            case St::num_e_sign:
                if (!digit(c)) return fail();
                st = St::num_exp;
                continue;
            case St::literal:
                if (c != rest.front()) return fail();
                rest.remove_prefix(1);
                if (rest.empty()) st = St::after;
                continue;
            default:  // the number states were resolved above
                return fail();
        }
    close:
        stack.pop_back();
        if (stack.empty()) {
            read_ += i + 1;
            return status_ = Scan::ok;
        }
        st = St::after;
    }
    read_ += s.size();
    save();
    return Scan::more;
}

JsonScanners::Entry& JsonScanners::entry(size_t offset) {
    for (Entry& e : entries_) {
        if (e.offset == offset) return e;
    }
    return entries_.emplace_back(Entry{offset, {}, {}});
}

JsonScanner& JsonScanners::at(size_t offset) {
    return entry(offset).scanner;
}

JsonCompactor& JsonScanners::compactor_at(size_t offset) {
    return entry(offset).compactor;
}

void JsonScanners::drop_before(size_t offset) {
    std::erase_if(entries_, [offset](const Entry& e) { return e.offset < offset; });
}

namespace {

int hex_value(char c) {
    if (digit(c)) return c - '0';
    return (c | 0x20) - 'a' + 10;
}

// The code point of the four hex digits at `text[at]` (the scanner checked they are hex).
uint32_t hex4(std::string_view text, size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = v * 16 + static_cast<uint32_t>(hex_value(text[at + k]));
    return v;
}

// A code point inside a string as nlohmann's dump writes it (ensure_ascii off).
void append_string_char(std::string& out, uint32_t cp) {
    if (text::append_json_escape(out, cp)) return;
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = text::kReplacementChar;
    text::append_utf8(out, cp);
}

bool number_char(char c) {
    return digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

}  // namespace

const std::string& JsonCompactor::compact(std::string_view text) {
    std::string& out = out_;
    bool& in_string = in_string_;
    size_t& i = read_;
    const size_t n = text.size();
    while (i < n) {
        const char c = text[i];
        if (!in_string) {
            if (blank(c)) {
                ++i;
            } else if (c == '"') {
                in_string = true;
                out += c;
                ++i;
            } else if (c == '-' || digit(c)) {
                size_t end = i;
                while (end < n && number_char(text[end])) ++end;
                if (end == n) break;  // the number may go on
                const auto v = nlohmann::json::parse(text.substr(i, end - i), nullptr, false);
                out += v.is_discarded() ? std::string(text.substr(i, end - i)) : v.dump();
                i = end;
            } else {
                out += c;  // structure and the letters of true, false and null
                ++i;
            }
            continue;
        }
        if (c == '"') {
            in_string = false;
            out += c;
            ++i;
        } else if (c == '\\') {
            if (i + 1 == n) break;
            const char e = text[i + 1];
            if (e != 'u') {
                const char decoded = e == 'b'   ? '\b'
                                     : e == 'f' ? '\f'
                                     : e == 'n' ? '\n'
                                     : e == 'r' ? '\r'
                                     : e == 't' ? '\t'
                                                : e;  // " \\ /
                append_string_char(out, static_cast<unsigned char>(decoded));
                i += 2;
                continue;
            }
            if (i + 6 > n) break;
            uint32_t cp = hex4(text, i + 2);
            size_t used = 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                // A high surrogate pairs with an escaped low one right after it.
                constexpr std::string_view kLow = "\\u";
                const std::string_view next = text.substr(i + 6, 6);
                const bool may_pair =
                    next.size() < 3 ? kLow.starts_with(next.substr(0, 2))
                                    : next.starts_with(kLow) && (next[2] | 0x20) == 'd' &&
                                          (next.size() < 4 ||
                                           ((next[3] | 0x20) >= 'c' && (next[3] | 0x20) <= 'f'));
                if (may_pair && next.size() < 6) break;
                if (may_pair) {
                    const uint32_t low = hex4(text, i + 8);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    used = 12;
                }
            }
            append_string_char(out, cp);
            i += used;
        } else {
            size_t end = i;
            while (end < n && text[end] != '"' && text[end] != '\\') ++end;
            std::string_view run = text.substr(i, end - i);
            const bool last = end == n;
            if (last) run = run.substr(0, text::complete_prefix_length(run));
            out += text::sanitize_utf8(run);
            i += run.size();
            if (last) break;
        }
    }
    return out;
}

std::string compact_json_prefix(std::string_view text) {
    JsonCompactor c;
    return c.compact(text);
}

JsonExtent scan_json(std::string_view text, bool at_end) {
    JsonScanner scanner;
    Scan status = scanner.feed(text);
    if (status == Scan::more && at_end) status = Scan::bad;
    return {status, status == Scan::ok ? scanner.length() : 0};
}

}  // namespace ggufd::chat::detail
