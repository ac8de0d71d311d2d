#include "jinja/text_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/pystr.h"
#include "text/utf8.h"

namespace ggufd::jinja::text {

namespace {

using U32 = std::u32string;

U32 to_u32(std::string_view s) {
    std::vector<char32_t> cps = pystr::decode(s);
    return U32(cps.begin(), cps.end());
}

void append_u32(std::string& out, const U32& s) {
    for (char32_t c : s) ggufd::text::append_utf8(out, c);
}

std::string from_u32(const U32& s) {
    std::string out;
    append_u32(out, s);
    return out;
}

bool is_ws_chunk(const U32& chunk) {
    return std::all_of(chunk.begin(), chunk.end(), pystr::is_space);
}

// ---- wordwrap: Python's textwrap.TextWrapper ----

// textwrap's own whitespace: ASCII only, unlike str.isspace.
bool tw_space(char32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
// The classes of TextWrapper.wordsep_re: word_punct [\w!"'&.,?] and letter [^\d\W].
bool word_punct(char32_t c) {
    return pystr::is_word_char(c) || c == '!' || c == '"' || c == '\'' || c == '&' || c == '.' ||
           c == ',' || c == '?';
}
bool letter(char32_t c) {
    return pystr::is_word_char(c) && !pystr::is_digit_char(c);
}

// A run of two or more hyphens starting at `j` and followed by a word character.
bool em_dash_at(const U32& t, std::size_t j) {
    std::size_t k = j;
    while (k < t.size() && t[k] == '-') ++k;
    return k - j >= 2 && k < t.size() && pystr::is_word_char(t[k]);
}

// re.split(wordsep_re) / re.split(wordsep_simple_re) of one line, empty chunks dropped. The
// regex matches at every position, so the chunks are exactly its successive matches.
std::vector<U32> split_chunks(const U32& t, bool on_hyphens) {
    std::vector<U32> chunks;
    const std::size_t n = t.size();
    std::size_t i = 0;
    while (i < n) {
        std::size_t j = i;
        if (tw_space(t[i])) {
            while (j < n && tw_space(t[j])) ++j;
        } else if (!on_hyphens) {
            while (j < n && !tw_space(t[j])) ++j;
        } else if (t[i] == '-' && i > 0 && word_punct(t[i - 1]) && em_dash_at(t, i)) {
            while (j < n && t[j] == '-') ++j;  // an em-dash between words is its own chunk
        } else {
            // A word, ended lazily by the first of: a hyphen inside a hyphenated word (kept
            // with the left part), whitespace or the end, or an em-dash after punctuation.
            j = i + 1;
            while (true) {
                if (j < n && t[j] == '-') {
                    bool before =
                        (j >= 2 && letter(t[j - 2]) && letter(t[j - 1])) ||
                        (j >= 3 && letter(t[j - 3]) && t[j - 2] == '-' && letter(t[j - 1]));
                    bool after = j + 1 < n && letter(t[j + 1]) &&
                                 ((j + 2 < n && letter(t[j + 2])) ||
                                  (j + 3 < n && t[j + 2] == '-' && letter(t[j + 3])));
                    if (before && after) {
                        ++j;
                        break;
                    }
                }
                if (j == n || tw_space(t[j])) break;
                if (word_punct(t[j - 1]) && em_dash_at(t, j)) break;
                ++j;
            }
        }
        chunks.push_back(t.substr(i, j - i));
        i = j;
    }
    return chunks;
}

// TextWrapper._handle_long_word.
void handle_long_word(std::vector<U32>& reversed_chunks, std::vector<U32>& cur_line,
                      std::size_t cur_len, std::size_t width, const WrapOptions& o) {
    std::size_t space_left = width - cur_len;
    if (o.break_long_words) {
        std::size_t end = space_left;
        U32& chunk = reversed_chunks.back();
        if (o.break_on_hyphens && chunk.size() > space_left) {
            // Break after the last hyphen that fits, if something other than hyphens precedes.
            std::size_t hyphen = space_left == 0 ? U32::npos : chunk.rfind('-', space_left - 1);
            if (hyphen != U32::npos && hyphen > 0 &&
                std::any_of(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(hyphen),
                            [](char32_t c) { return c != '-'; })) {
                end = hyphen + 1;
            }
        }
        cur_line.push_back(chunk.substr(0, end));
        chunk = chunk.substr(std::min(end, chunk.size()));
    } else if (cur_line.empty()) {
        cur_line.push_back(std::move(reversed_chunks.back()));
        reversed_chunks.pop_back();
    }
}

// TextWrapper._wrap_chunks without indents or max_lines.
std::vector<U32> wrap_chunks(std::vector<U32> chunks, std::size_t width, const WrapOptions& o) {
    std::vector<U32> lines;
    std::reverse(chunks.begin(), chunks.end());
    while (!chunks.empty()) {
        std::vector<U32> cur_line;
        std::size_t cur_len = 0;
        // A line after the first does not start with whitespace.
        if (!lines.empty() && is_ws_chunk(chunks.back())) chunks.pop_back();
        while (!chunks.empty() && cur_len + chunks.back().size() <= width) {
            cur_len += chunks.back().size();
            cur_line.push_back(std::move(chunks.back()));
            chunks.pop_back();
        }
        // The next chunk fits on no line at all.
        if (!chunks.empty() && chunks.back().size() > width) {
            handle_long_word(chunks, cur_line, cur_len, width, o);
        }
        if (!cur_line.empty() && is_ws_chunk(cur_line.back())) cur_line.pop_back();
        if (!cur_line.empty()) {
            U32 line;
            for (const U32& c : cur_line) line += c;
            lines.push_back(std::move(line));
        }
    }
    return lines;
}

// ---- urlize ----

bool starts_with_ci(const U32& s, std::size_t at, std::string_view prefix) {
    if (s.size() < at + prefix.size()) return false;
    for (std::size_t k = 0; k < prefix.size(); ++k) {
        char32_t c = s[at + k];
        if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
        if (c != static_cast<unsigned char>(prefix[k])) return false;
    }
    return true;
}

bool starts_with(const U32& s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (std::size_t k = 0; k < prefix.size(); ++k) {
        if (s[k] != static_cast<unsigned char>(prefix[k])) return false;
    }
    return true;
}

U32 ascii_u32(std::string_view s) {
    return U32(s.begin(), s.end());
}

std::size_t count_of(const U32& s, const U32& sub) {
    std::size_t n = 0;
    for (std::size_t p = s.find(sub); p != U32::npos; p = s.find(sub, p + sub.size())) ++n;
    return n;
}

bool ascii_alpha(char32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool hex_digit(char32_t c) {
    return pystr::is_digit_char(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool domain_char(char32_t c) {
    return pystr::is_word_char(c) || c == '%' || c == '-';
}

std::size_t run_of(const U32& s, std::size_t from, bool (*cls)(char32_t), std::size_t cap) {
    std::size_t k = from;
    while (k < s.size() && k - from < cap && cls(s[k])) ++k;
    return k - from;
}

// What may follow the host in Jinja2's _http_re: an optional :port of 1-5 digits, then the
// end or a path, query or fragment (the word has no whitespace, so \S* takes the rest).
bool url_rest_ok(const U32& m, std::size_t k) {
    auto path_start = [&](std::size_t p) {
        return p == m.size() || m[p] == '/' || m[p] == '?' || m[p] == '#';
    };
    if (path_start(k)) return true;
    if (m[k] != ':') return false;
    std::size_t digits = run_of(m, k + 1, pystr::is_digit_char, 6);
    return digits >= 1 && digits <= 5 && path_start(k + 1 + digits);
}

// Jinja2's _http_re (re.IGNORECASE), matched over the whole word by trying every way its
// host alternatives can end.
bool http_match(const U32& m) {
    std::size_t scheme = starts_with_ci(m, 0, "https://")  ? 8
                         : starts_with_ci(m, 0, "http://") ? 7
                                                           : 0;
    std::size_t start = scheme ? scheme : (starts_with_ci(m, 0, "www.") ? 4 : 0);
    if (start) {
        // (https?://|www\.) ([\w%-]+\.)* ([a-z]{2,63} | xn--[\w%]{2,59})
        std::size_t p = start;
        while (true) {
            std::size_t letters = run_of(m, p, ascii_alpha, 64);
            for (std::size_t e = 2; e <= std::min<std::size_t>(letters, 63); ++e) {
                if (url_rest_ok(m, p + e)) return true;
            }
            if (starts_with_ci(m, p, "xn--")) {
                std::size_t tail = run_of(
                    m, p + 4, [](char32_t c) { return pystr::is_word_char(c) || c == '%'; }, 60);
                for (std::size_t e = 2; e <= std::min<std::size_t>(tail, 59); ++e) {
                    if (url_rest_ok(m, p + 4 + e)) return true;
                }
            }
            std::size_t label = run_of(m, p, domain_char, U32::npos);
            if (label == 0 || p + label >= m.size() || m[p + label] != '.') break;
            p += label + 1;
        }
    }
    // ([\w%-]{2,63}\.)+ (com|net|int|edu|gov|org|info|mil)
    for (std::size_t p = 0;;) {
        std::size_t label = run_of(m, p, domain_char, U32::npos);
        if (label < 2 || label > 63 || p + label >= m.size() || m[p + label] != '.') break;
        p += label + 1;
        for (std::string_view tld : {"com", "net", "int", "edu", "gov", "org", "info", "mil"}) {
            if (starts_with_ci(m, p, tld) && url_rest_ok(m, p + tld.size())) return true;
        }
    }
    if (!scheme) return false;
    // https?:// then an IPv4 address: four groups of 1-3 digits.
    std::size_t p = scheme;
    for (int group = 0; group < 4; ++group) {
        std::size_t d = run_of(m, p, pystr::is_digit_char, 4);
        if (d < 1 || d > 3) break;
        p += d;
        if (group == 3) {
            if (url_rest_ok(m, p)) return true;
            break;
        }
        if (p >= m.size() || m[p] != '.') break;
        ++p;
    }
    // https?:// then [ ([\da-f]{0,4}:){2} ([\da-f]{0,4}:?){1,6} ]
    p = scheme;
    if (p >= m.size() || m[p] != '[') return false;
    ++p;
    for (int group = 0; group < 2; ++group) {
        std::size_t h = run_of(m, p, hex_digit, 5);
        if (h > 4 || p + h >= m.size() || m[p + h] != ':') return false;
        p += h + 1;
    }
    // The rest up to ']' splits into at most six pieces of up to four hex digits, each
    // optionally ending in one colon.
    std::size_t pieces = 0, hex = 0, q = p;
    for (; q < m.size() && (hex_digit(m[q]) || m[q] == ':'); ++q) {
        if (m[q] == ':') {
            pieces += std::max<std::size_t>(1, (hex + 3) / 4);
            hex = 0;
        } else {
            ++hex;
        }
    }
    pieces += (hex + 3) / 4;
    if (q >= m.size() || m[q] != ']' || pieces > 6) return false;
    return url_rest_ok(m, q + 1);
}

// Jinja2's _email_re: ^\S+@\w[\w.-]*\.\w+$ (the word has no whitespace).
bool email_match(const U32& m) {
    std::size_t at = m.rfind('@');
    if (at == U32::npos || at == 0) return false;
    U32 r = m.substr(at + 1);
    if (r.empty() || !pystr::is_word_char(r[0])) return false;
    for (char32_t c : r) {
        if (!pystr::is_word_char(c) && c != '.' && c != '-') return false;
    }
    std::size_t dot = r.rfind('.');
    if (dot == U32::npos || dot == 0 || dot + 1 == r.size()) return false;
    return std::all_of(r.begin() + static_cast<std::ptrdiff_t>(dot) + 1, r.end(),
                       pystr::is_word_char);
}

// ---- striptags ----

// The virtual string out + s[i:], spliced without copying its tail (markupsafe rescans from the
// start after every removal, so a removal may join pieces into a new comment opener).
class Splicer {
  public:
    explicit Splicer(std::string_view s) : s_(s) {}
    std::size_t size() const { return out_.size() + s_.size() - i_; }
    char at(std::size_t p) const { return p < out_.size() ? out_[p] : s_[i_ + p - out_.size()]; }
    std::size_t find(std::string_view pat, std::size_t from) const {
        for (std::size_t p = from; p + pat.size() <= size(); ++p) {
            std::size_t k = 0;
            while (k < pat.size() && at(p + k) == pat[k]) ++k;
            if (k == pat.size()) return p;
        }
        return std::string_view::npos;
    }
    // Removes [from, to) where `to` lies past the spliced prefix.
    void remove(std::size_t from, std::size_t to) {
        std::size_t old = out_.size();
        if (from <= old) {
            out_.resize(from);
        } else {
            out_.append(s_.substr(i_, from - old));
        }
        i_ += to - old;
    }
    std::string str() const { return out_ + std::string(s_.substr(i_)); }

  private:
    std::string_view s_;
    std::string out_;
    std::size_t i_ = 0;
};

void append_entity(std::string& out, std::string_view name) {
    static const std::pair<std::string_view, char32_t> kNamed[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}, {"nbsp", 0xA0}};
    if (name.size() > 1 && name[0] == '#') {
        bool hex = name[1] == 'x' || name[1] == 'X';
        std::string_view digits = name.substr(hex ? 2 : 1);
        char32_t cp = 0;
        bool ok = !digits.empty() && digits.size() <= 8;
        for (char c : digits) {
            int d = (c >= '0' && c <= '9')          ? c - '0'
                    : hex && (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : hex && (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                    : -1;
            if (d < 0) ok = false;
            cp = cp * (hex ? 16 : 10) + static_cast<char32_t>(std::max(d, 0));
        }
        if (ok) {
            // html.unescape's replacements for NUL, surrogates and out-of-range code points.
            if (cp == 0 || cp > ggufd::text::kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
                cp = ggufd::text::kReplacementChar;
            }
            ggufd::text::append_utf8(out, cp);
            return;
        }
    } else {
        for (const auto& [n, cp] : kNamed) {
            if (n == name) {
                ggufd::text::append_utf8(out, cp);
                return;
            }
        }
    }
    out += '&';
    out += name;
    out += ';';
}

std::string unescape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t semi = s[i] == '&' ? s.find(';', i) : std::string_view::npos;
        if (semi != std::string_view::npos && semi - i <= 12) {
            append_entity(out, s.substr(i + 1, semi - i - 1));
            i = semi + 1;
        } else {
            out += s[i++];
        }
    }
    return out;
}

}  // namespace

std::string wordwrap(std::string_view s, const WrapOptions& o, const SizeCheck& check) {
    std::string out;
    bool first_line = true;
    for (const std::string& line : pystr::splitlines(s, false)) {
        if (o.width <= 0) {
            throw TemplateError("invalid width " + std::to_string(o.width) + " (must be > 0)");
        }
        if (!first_line) out += o.wrapstring;
        first_line = false;
        std::vector<U32> wrapped = wrap_chunks(split_chunks(to_u32(line), o.break_on_hyphens),
                                               static_cast<std::size_t>(o.width), o);
        for (std::size_t k = 0; k < wrapped.size(); ++k) {
            if (k) out += o.wrapstring;
            append_u32(out, wrapped[k]);
            check(out.size());
        }
        check(out.size());
    }
    return out;
}

std::string url_quote(std::string_view s, bool for_query) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        bool safe = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query);
        if (safe) {
            out += static_cast<char>(c);
        } else if (c == ' ' && for_query) {
            out += '+';
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    return out;
}

bool valid_scheme_prefix(std::string_view scheme) {
    U32 s = to_u32(scheme);
    if (s.size() < 2 || !ascii_alpha(s[0]) || s.back() != ':') return false;
    return std::all_of(s.begin() + 1, s.end() - 1, [](char32_t c) {
        return ascii_alpha(c) || pystr::is_digit_char(c) || c == '+' || c == '-' || c == '.';
    });
}

std::string urlize(std::string_view escaped, const UrlizeOptions& o, const SizeCheck& check) {
    std::string rel_attr = o.rel.empty() ? "" : " rel=\"" + html_escape(o.rel) + "\"";
    std::string target_attr = o.target.empty() ? "" : " target=\"" + html_escape(o.target) + "\"";
    auto trim_url = [&](const U32& x) {
        if (!o.trim_url_limit) return from_u32(x);
        auto n = static_cast<std::int64_t>(x.size());
        std::int64_t limit = *o.trim_url_limit;
        if (n <= limit) return from_u32(x);
        std::int64_t keep = limit < 0 ? std::max<std::int64_t>(0, n + limit) : limit;
        return from_u32(x.substr(0, static_cast<std::size_t>(keep))) + "...";
    };
    const U32 text = to_u32(escaped);
    std::string out;
    // re.split(r"(\s+)"): words and the whitespace between them, each processed alike.
    for (std::size_t i = 0; i < text.size();) {
        bool space = pystr::is_space(text[i]);
        std::size_t j = i;
        while (j < text.size() && pystr::is_space(text[j]) == space) ++j;
        U32 middle = text.substr(i, j - i), head, tail;
        i = j;
        // Leading ( < &lt; and trailing ) > . , \n &gt; are not part of a link...
        std::size_t h = 0;
        while (h < middle.size()) {
            if (middle[h] == '(' || middle[h] == '<') {
                ++h;
            } else if (middle.compare(h, 4, ascii_u32("&lt;")) == 0) {
                h += 4;
            } else {
                break;
            }
        }
        head = middle.substr(0, h);
        middle = middle.substr(h);
        std::size_t t = middle.size();
        while (t > 0) {
            char32_t c = middle[t - 1];
            if (c == ')' || c == '>' || c == '.' || c == ',' || c == '\n') {
                --t;
            } else if (t >= 4 && middle.compare(t - 4, 4, ascii_u32("&gt;")) == 0) {
                t -= 4;
            } else {
                break;
            }
        }
        tail = middle.substr(t);
        middle = middle.substr(0, t);
        // ...unless they close brackets the link opened.
        for (auto [open, close] : {std::pair<std::string_view, std::string_view>{"(", ")"},
                                   {"<", ">"},
                                   {"&lt;", "&gt;"}}) {
            U32 o_s = ascii_u32(open), c_s = ascii_u32(close);
            std::size_t opens = count_of(middle, o_s);
            if (opens <= count_of(middle, c_s)) continue;
            std::size_t moves = std::min(opens, count_of(tail, c_s));
            for (std::size_t k = 0; k < moves; ++k) {
                std::size_t end = tail.find(c_s) + c_s.size();
                middle += tail.substr(0, end);
                tail = tail.substr(end);
            }
        }
        std::string m = from_u32(middle);
        if (http_match(middle)) {
            bool has_scheme = starts_with(middle, "https://") || starts_with(middle, "http://");
            m = "<a href=\"" + std::string(has_scheme ? "" : "https://") + m + "\"" + rel_attr +
                target_attr + ">" + trim_url(middle) + "</a>";
        } else if (starts_with(middle, "mailto:") && email_match(middle.substr(7))) {
            m = "<a href=\"" + m + "\">" + from_u32(middle.substr(7)) + "</a>";
        } else if (middle.find('@') != U32::npos && !starts_with(middle, "www.") &&
                   middle.find(':') == U32::npos && email_match(middle)) {
            m = "<a href=\"mailto:" + m + "\">" + m + "</a>";
        } else {
            for (const std::string& scheme : o.extra_schemes) {
                U32 sc = to_u32(scheme);
                if (middle != sc && middle.compare(0, sc.size(), sc) == 0) {
                    m = "<a href=\"" + m + "\"" + rel_attr + target_attr + ">" + m + "</a>";
                    middle = to_u32(m);
                }
            }
        }
        append_u32(out, head);
        out += m;
        append_u32(out, tail);
        check(out.size());
    }
    return out;
}

std::string filesize_format(double bytes, bool binary) {
    static const char* const kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char* const kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    // base ** (i + 2) as Python converts the exact integer to a float.
    static const double kDecimalUnits[] = {1e6, 1e9, 1e12, 1e15, 1e18, 1e21, 1e24, 1e27};
    const double base = binary ? 1024.0 : 1000.0;
    if (bytes == 1) return "1 Byte";
    char buf[400];
    if (bytes < base) {
        if (!std::isfinite(bytes)) throw TemplateError("cannot convert float infinity to integer");
        // int(bytes): the exact integer part, however large.
        std::snprintf(buf, sizeof buf, "%.0f Bytes", std::trunc(bytes) + 0.0);  // no "-0"
        return buf;
    }
    for (int i = 0; i < 8; ++i) {
        double unit = binary ? std::ldexp(1.0, 10 * (i + 2)) : kDecimalUnits[i];
        if (bytes < unit || i == 7) {
            std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit,
                          binary ? kBinary[i] : kDecimal[i]);
            return buf;
        }
    }
    return buf;  // not reached
}

std::string strip_tags(std::string_view s) {
    Splicer v(s);
    for (std::size_t from = 0;;) {
        std::size_t start = v.find("<!--", from);
        if (start == std::string_view::npos) break;
        std::size_t end = v.find("-->", start);
        if (end == std::string_view::npos) break;
        v.remove(start, end + 3);
        from = start >= 3 ? start - 3 : 0;
    }
    std::string no_comments = v.str(), no_tags;
    for (std::size_t i = 0;;) {
        std::size_t start = no_comments.find('<', i);
        std::size_t end = start == std::string::npos ? start : no_comments.find('>', start);
        if (end == std::string::npos) {
            no_tags.append(no_comments, i);
            break;
        }
        no_tags.append(no_comments, i, start - i);
        i = end + 1;
    }
    std::string collapsed;
    for (const std::string& w : pystr::split(no_tags, std::nullopt, -1, false)) {
        if (!collapsed.empty()) collapsed += ' ';
        collapsed += w;
    }
    return unescape(collapsed);
}

}  // namespace ggufd::jinja::text
