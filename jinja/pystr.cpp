#include "jinja/pystr.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "text/json_escape.h"
#include "text/utf8.h"

namespace ggufd::jinja::pystr {

bool is_ascii(std::string_view s) {
    for (unsigned char c : s) {
        if (c >= 0x80) return false;
    }
    return true;
}

namespace {

bool in_set(char32_t c, const std::vector<char32_t>& set) {
    return std::find(set.begin(), set.end(), c) != set.end();
}

std::string icu_map(std::string_view s, int mode) {
    icu::UnicodeString u =
        icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
    if (mode == 0) {
        u.toUpper(icu::Locale::getRoot());
    } else {
        u.toLower(icu::Locale::getRoot());
    }
    std::string out;
    u.toUTF8String(out);
    return out;
}

std::string map_cp(char32_t c, int mode) {
    std::string s;
    ggufd::text::append_utf8(s, c);
    if (c < 0x80) {
        for (char& ch : s) {
            if (mode == 0 || mode == 2) {
                ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            }
            if (mode == 1) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        }
        return s;
    }
    if (mode == 2) {
        std::string t;
        ggufd::text::append_utf8(t, static_cast<char32_t>(u_totitle(static_cast<UChar32>(c))));
        return t;
    }
    return icu_map(s, mode);
}

bool is_cased(char32_t c) {
    if (c < 0x80) return std::isalpha(static_cast<int>(c)) != 0;
    return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}

}  // namespace

std::vector<char32_t> decode(std::string_view s) {
    const std::vector<uint32_t> cps = ggufd::text::decode_lenient(s);
    return {cps.begin(), cps.end()};
}

std::string encode(const std::vector<char32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) ggufd::text::append_utf8(out, c);
    return out;
}

std::size_t length(std::string_view s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size();) {
        ggufd::text::next_lenient(s, i);
        ++n;
    }
    return n;
}

std::vector<std::size_t> offsets(std::string_view s) {
    std::vector<std::size_t> out;
    out.reserve(s.size() + 1);
    for (std::size_t i = 0; i < s.size();) {
        out.push_back(i);
        ggufd::text::next_lenient(s, i);
    }
    out.push_back(s.size());
    return out;
}

bool is_space(char32_t c) {
    switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\v':
        case '\f':
        case '\r':
        case 0x1C:
        case 0x1D:
        case 0x1E:
        case 0x1F:
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

bool is_line_break(char32_t c) {
    switch (c) {
        case '\n':
        case '\r':
        case '\v':
        case '\f':
        case 0x1C:
        case 0x1D:
        case 0x1E:
        case 0x85:
        case 0x2028:
        case 0x2029:
            return true;
        default:
            return false;
    }
}

std::string upper(std::string_view s) {
    if (!is_ascii(s)) return icu_map(s, 0);
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

std::string lower(std::string_view s) {
    if (!is_ascii(s)) return icu_map(s, 1);
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string title(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool prev_cased = false;
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = ggufd::text::next_lenient(s, i);
        bool cased = is_cased(c);
        if (cased) {
            out += map_cp(c, prev_cased ? 1 : 2);
        } else {
            ggufd::text::append_utf8(out, c);
        }
        prev_cased = cased;
    }
    return out;
}

std::string capitalize(std::string_view s) {
    if (s.empty()) return std::string();
    std::size_t i = 0;
    char32_t first = ggufd::text::next_lenient(s, i);
    std::string out = map_cp(first, 2);
    if (first < 0x80) out = map_cp(first, 0);
    return out + lower(s.substr(i));
}

std::string swapcase(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = ggufd::text::next_lenient(s, i);
        bool up = c < 0x80 ? std::isupper(static_cast<int>(c)) != 0
                           : u_isUUppercase(static_cast<UChar32>(c));
        bool lo = c < 0x80 ? std::islower(static_cast<int>(c)) != 0
                           : u_isULowercase(static_cast<UChar32>(c));
        if (up) {
            out += map_cp(c, 1);
        } else if (lo) {
            out += map_cp(c, 0);
        } else {
            ggufd::text::append_utf8(out, c);
        }
    }
    return out;
}

bool is_cased_upper(std::string_view s) {
    bool any = false;
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = ggufd::text::next_lenient(s, i);
        if (u_isULowercase(static_cast<UChar32>(c))) return false;
        if (u_isUUppercase(static_cast<UChar32>(c)) || u_istitle(static_cast<UChar32>(c))) {
            any = true;
        }
    }
    return any;
}

bool is_cased_lower(std::string_view s) {
    bool any = false;
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = ggufd::text::next_lenient(s, i);
        if (u_isUUppercase(static_cast<UChar32>(c)) || u_istitle(static_cast<UChar32>(c))) {
            return false;
        }
        if (u_isULowercase(static_cast<UChar32>(c))) any = true;
    }
    return any;
}

bool is_alpha(std::string_view s) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size();) {
        if (!u_isalpha(static_cast<UChar32>(ggufd::text::next_lenient(s, i)))) return false;
    }
    return true;
}

bool is_alnum(std::string_view s) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size();) {
        if (!u_isalnum(static_cast<UChar32>(ggufd::text::next_lenient(s, i)))) return false;
    }
    return true;
}

bool is_digit(std::string_view s) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size();) {
        if (!u_isdigit(static_cast<UChar32>(ggufd::text::next_lenient(s, i)))) return false;
    }
    return true;
}

bool is_digit_char(char32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return u_isdigit(static_cast<UChar32>(c));
}

bool is_word_char(char32_t c) {
    if (c < 0x80) return std::isalnum(static_cast<int>(c)) != 0 || c == '_';
    return u_isalnum(static_cast<UChar32>(c)) || c == '_';
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
    std::vector<char32_t> set;
    if (chars) set = decode(*chars);
    auto strip_this = [&](char32_t c) { return chars ? in_set(c, set) : is_space(c); };
    // Walk in from both ends one code point at a time; the middle is never decoded.
    std::size_t b = 0, e = s.size();
    if (left) {
        while (b < e) {
            std::size_t next = b;
            if (!strip_this(ggufd::text::next_lenient(s, next))) break;
            b = next;
        }
    }
    if (right) {
        while (e > b) {
            std::size_t start = e - 1;
            while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
            std::size_t probe = start;
            if (!strip_this(ggufd::text::next_lenient(s, probe))) break;
            e = start;
        }
    }
    return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               std::int64_t maxsplit, bool from_right) {
    std::vector<std::string> parts;
    if (sep) {
        if (sep->empty()) return parts;  // the caller reports "empty separator"
        if (!from_right) {
            std::size_t pos = 0;
            while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
                std::size_t hit = s.find(*sep, pos);
                if (hit == std::string_view::npos) break;
                parts.emplace_back(s.substr(pos, hit - pos));
                pos = hit + sep->size();
            }
            parts.emplace_back(s.substr(pos));
        } else {
            std::size_t end = s.size();
            while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
                if (end < sep->size()) break;
                std::size_t hit = s.rfind(*sep, end - sep->size());
                if (hit == std::string_view::npos) break;
                parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
                end = hit;
            }
            parts.emplace_back(s.substr(0, end));
            std::reverse(parts.begin(), parts.end());
        }
        return parts;
    }
    // Whitespace splitting: runs of whitespace separate, leading/trailing ones vanish.
    std::vector<std::size_t> offs = offsets(s);
    std::size_t n = offs.size() - 1;
    auto cp_at = [&](std::size_t k) {
        std::size_t i = offs[k];
        return ggufd::text::next_lenient(s, i);
    };
    if (!from_right) {
        std::size_t k = 0;
        while (true) {
            while (k < n && is_space(cp_at(k))) ++k;
            if (k >= n) break;
            if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
                std::size_t e = n;
                while (e > k && is_space(cp_at(e - 1))) --e;
                parts.emplace_back(s.substr(offs[k], offs[e] - offs[k]));
                break;
            }
            std::size_t start = k;
            while (k < n && !is_space(cp_at(k))) ++k;
            parts.emplace_back(s.substr(offs[start], offs[k] - offs[start]));
        }
    } else {
        std::size_t k = n;
        while (true) {
            while (k > 0 && is_space(cp_at(k - 1))) --k;
            if (k == 0) break;
            if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
                std::size_t b = 0;
                while (b < k && is_space(cp_at(b))) ++b;
                parts.emplace_back(s.substr(offs[b], offs[k] - offs[b]));
                break;
            }
            std::size_t end = k;
            while (k > 0 && !is_space(cp_at(k - 1))) --k;
            parts.emplace_back(s.substr(offs[k], offs[end] - offs[k]));
        }
        std::reverse(parts.begin(), parts.end());
    }
    return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t at = i;
        char32_t c = ggufd::text::next_lenient(s, i);
        if (!is_line_break(c)) continue;
        std::size_t end_of_break = i;
        if (c == '\r' && i < s.size() && s[i] == '\n') end_of_break = ++i;
        lines.emplace_back(s.substr(start, (keepends ? end_of_break : at) - start));
        start = end_of_break;
    }
    if (start < s.size()) lines.emplace_back(s.substr(start));
    return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    std::int64_t count) {
    std::string out;
    if (old.empty()) {
        // Python inserts `with` before every code point and at the end.
        std::vector<std::size_t> offs = offsets(s);
        std::int64_t done = 0;
        for (std::size_t k = 0; k + 1 < offs.size(); ++k) {
            if (count < 0 || done < count) {
                out += with;
                ++done;
            }
            out += s.substr(offs[k], offs[k + 1] - offs[k]);
        }
        if (count < 0 || done < count) out += with;
        return out;
    }
    std::size_t pos = 0;
    std::int64_t done = 0;
    while (count < 0 || done < count) {
        std::size_t hit = s.find(old, pos);
        if (hit == std::string_view::npos) break;
        out += s.substr(pos, hit - pos);
        out += with;
        pos = hit + old.size();
        ++done;
    }
    out += s.substr(pos);
    return out;
}

std::int64_t find(std::string_view s, std::string_view sub, bool from_right) {
    std::size_t hit = from_right ? s.rfind(sub) : s.find(sub);
    if (hit == std::string_view::npos) return -1;
    return static_cast<std::int64_t>(length(s.substr(0, hit)));
}

std::int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) return static_cast<std::int64_t>(length(s)) + 1;
    std::int64_t n = 0;
    for (std::size_t pos = s.find(sub); pos != std::string_view::npos;
         pos = s.find(sub, pos + sub.size())) {
        ++n;
    }
    return n;
}

std::string center(std::string_view s, std::int64_t width, char32_t fill) {
    std::int64_t len = static_cast<std::int64_t>(length(s));
    if (width <= len) return std::string(s);
    std::int64_t marg = width - len;
    // CPython's split of the margin: the extra column goes left when both are odd.
    std::int64_t left = marg / 2 + (marg & width & 1);
    std::string out;
    for (std::int64_t i = 0; i < left; ++i) ggufd::text::append_utf8(out, fill);
    out += s;
    for (std::int64_t i = 0; i < marg - left; ++i) ggufd::text::append_utf8(out, fill);
    return out;
}

namespace {

bool printable(char32_t c) {
    if (c == ' ') return true;
    switch (u_charType(static_cast<UChar32>(c))) {
        case U_CONTROL_CHAR:
        case U_FORMAT_CHAR:
        case U_SURROGATE:
        case U_PRIVATE_USE_CHAR:
        case U_UNASSIGNED:
        case U_LINE_SEPARATOR:
        case U_PARAGRAPH_SEPARATOR:
        case U_SPACE_SEPARATOR:
            return false;
        default:
            return true;
    }
}

void append_hex(std::string& out, std::uint32_t v, int digits) {
    static const char* hex = "0123456789abcdef";
    for (int i = digits - 1; i >= 0; --i) out += hex[(v >> (4 * i)) & 0xF];
}

}  // namespace

std::string repr(std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    std::string out;
    out.reserve(s.size() + 2);
    out += quote;
    for (std::size_t i = 0; i < s.size();) {
        char32_t c = ggufd::text::next_lenient(s, i);
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < ' ' || c == 0x7F) {
            out += "\\x";
            append_hex(out, c, 2);
        } else if (c < 0x7F) {
            out += static_cast<char>(c);
        } else if (printable(c)) {
            ggufd::text::append_utf8(out, c);
        } else if (c <= 0xFF) {
            out += "\\x";
            append_hex(out, c, 2);
        } else if (c <= 0xFFFF) {
            out += "\\u";
            append_hex(out, c, 4);
        } else {
            out += "\\U";
            append_hex(out, c, 8);
        }
    }
    out += quote;
    return out;
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    // Shortest round-trip digits "[-]D[.DDD]e[+-]XX" taken apart, then laid out as Python does:
    // positional for exponents -4..15, scientific otherwise.
    bool neg = sci[0] == '-';
    std::size_t epos = sci.find('e');
    std::string mant = sci.substr(neg ? 1 : 0, epos - (neg ? 1 : 0));
    int exp = std::atoi(sci.c_str() + epos + 1);
    std::string digits;
    for (char c : mant) {
        if (c != '.') digits += c;
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    std::string out = neg ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            std::size_t int_len = static_cast<std::size_t>(exp) + 1;
            if (digits.size() <= int_len) {
                out += digits + std::string(int_len - digits.size(), '0') + ".0";
            } else {
                out += digits.substr(0, int_len) + "." + digits.substr(int_len);
            }
        } else {
            out += "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
        }
    } else {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        out += exp < 0 ? "e-" : "e+";
        int a = exp < 0 ? -exp : exp;
        if (a < 10) out += '0';
        out += std::to_string(a);
    }
    return out;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        unsigned char b = static_cast<unsigned char>(s[i]);
        if (b >= 0x80) {
            std::size_t start = i;
            char32_t c = ggufd::text::next_lenient(s, i);
            if (ensure_ascii) {
                ggufd::text::append_json_unicode_escape(out, c);
            } else {
                out.append(s.substr(start, i - start));
            }
            continue;
        }
        ++i;
        if (ggufd::text::append_json_escape(out, b)) continue;
        // json.dumps also escapes DEL when it keeps the text ASCII.
        if (ensure_ascii && b == 0x7F) {
            ggufd::text::append_json_unicode_escape(out, b);
        } else {
            out += static_cast<char>(b);
        }
    }
    out += '"';
}

std::optional<std::int64_t> parse_int(std::string_view s, int base) {
    std::string t = strip(s, std::nullopt, true, true);
    std::string digits;
    for (char c : t) {
        if (c != '_') digits += c;
    }
    if (digits.empty() || t.front() == '_' || t.back() == '_') return std::nullopt;
    bool neg = false;
    std::size_t i = 0;
    if (digits[0] == '+' || digits[0] == '-') {
        neg = digits[0] == '-';
        i = 1;
    }
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (digits.size() > i + 1 && digits[i] == '0') {
            char p = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[i + 1])));
            int b = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
            if (b != 0 && (base == 0 || base == b)) {
                base = b;
                i += 2;
            }
        }
        if (base == 0) base = 10;
    }
    if (i >= digits.size()) return std::nullopt;
    std::int64_t v = 0;
    auto r = std::from_chars(digits.data() + i, digits.data() + digits.size(), v, base);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
    return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
    std::string t = strip(s, std::nullopt, true, true);
    std::string clean;
    for (char c : t) {
        if (c != '_') clean += c;
    }
    if (clean.empty()) return std::nullopt;
    std::string low = lower(clean);
    std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
    double sign = low[0] == '-' ? -1.0 : 1.0;
    if (body == "inf" || body == "infinity") return sign * INFINITY;
    if (body == "nan") return NAN;
    for (char c : body) {
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' ||
              c == '-')) {
            return std::nullopt;
        }
    }
    double v = 0;
    const char* b = clean.data();
    if (*b == '+') ++b;
    auto r = std::from_chars(b, clean.data() + clean.size(), v);
    if (r.ec != std::errc() || r.ptr != clean.data() + clean.size()) return std::nullopt;
    return v;
}

}  // namespace ggufd::jinja::pystr
