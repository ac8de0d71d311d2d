#include "jinja/lexer.h"

#include <algorithm>
#include <cmath>

#include "jinja/error.h"
#include "jinja/pystr.h"
#include "text/utf8.h"

namespace ggufd::jinja {

namespace {

bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || is_digit(c);
}

class Lexer {
  public:
    Lexer(std::string_view source, const LexOptions& options) : opt_(options) {
        // Jinja2 normalises every newline sequence to \n before lexing.
        src_.reserve(source.size());
        for (std::size_t i = 0; i < source.size(); ++i) {
            if (source[i] == '\r') {
                src_ += '\n';
                if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
            } else {
                src_ += source[i];
            }
        }
        if (!opt_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
        line_starts_.push_back(0);
        for (std::size_t i = 0; i < src_.size(); ++i) {
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
        }
    }

    std::vector<Token> run() {
        std::size_t pos = 0;
        bool line_starting = true;
        const std::size_t n = src_.size();
        while (pos < n) {
            std::size_t p = find_tag(pos);
            if (p == std::string::npos) {
                emit_text(pos, n);
                break;
            }
            char kind = src_[p + 1];
            char sign = p + 2 < n ? src_[p + 2] : '\0';
            if (sign != '-' && sign != '+') sign = '\0';
            std::size_t text_end = p;
            if (sign == '-') {
                while (text_end > pos && is_ws(src_[text_end - 1])) --text_end;
            } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
                text_end = lstrip_end(pos, p, line_starting);
            }
            emit_text(pos, text_end);
            std::size_t after_begin = p + 2 + (sign ? 1 : 0);
            if (kind == '#') {
                pos = lex_comment(p, after_begin);
            } else if (kind == '%' && is_raw_begin(after_begin)) {
                pos = lex_raw(p, after_begin);
            } else {
                pos = lex_tag(p, after_begin, kind == '%');
            }
            line_starting = pos > 0 && src_[pos - 1] == '\n';
        }
        Token end{Tok::End, "", 0, 0, 0, 0};
        locate(n, end);
        tokens_.push_back(end);
        return std::move(tokens_);
    }

  private:
    std::size_t find_tag(std::size_t from) const {
        for (std::size_t i = src_.find('{', from); i != std::string::npos;
             i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size()) {
                char c = src_[i + 1];
                if (c == '{' || c == '%' || c == '#') return i;
            }
        }
        return std::string::npos;
    }

    // lstrip_blocks: where the text before a block tag ends once the tag's own line's leading
    // spaces/tabs are dropped (only when nothing else precedes the tag on that line).
    std::size_t lstrip_end(std::size_t text_begin, std::size_t tag, bool line_starting) const {
        std::size_t l_pos = tag;
        std::size_t nl = tag > text_begin ? src_.rfind('\n', tag - 1) : std::string::npos;
        if (nl != std::string::npos && nl >= text_begin) {
            l_pos = nl + 1;
        } else if (line_starting) {
            l_pos = text_begin;
        } else {
            return tag;
        }
        for (std::size_t i = l_pos; i < tag; ++i) {
            if (src_[i] != ' ' && src_[i] != '\t') return tag;
        }
        return l_pos;
    }

    void emit_text(std::size_t b, std::size_t e) {
        if (e <= b) return;
        Token t{Tok::Text, src_.substr(b, e - b), 0, 0, 0, 0};
        locate(b, t);
        tokens_.push_back(std::move(t));
    }

    void locate(std::size_t pos, Token& t) const {
        auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
        std::size_t line = static_cast<std::size_t>(it - line_starts_.begin());
        t.line = static_cast<int>(line);
        t.column = static_cast<int>(pos - line_starts_[line - 1]) + 1;
    }

    [[noreturn]] void fail(const std::string& msg, std::size_t pos) const {
        Token t{};
        locate(std::min(pos, src_.size()), t);
        throw TemplateError(msg, t.line, t.column);
    }

    // After a block/comment end: trim_blocks eats one newline, '-' eats all whitespace.
    std::size_t after_end(std::size_t pos, char sign, bool block_like) const {
        if (sign == '-') {
            while (pos < src_.size() && is_ws(src_[pos])) ++pos;
        } else if (sign != '+' && block_like && opt_.trim_blocks && pos < src_.size() &&
                   src_[pos] == '\n') {
            ++pos;
        }
        return pos;
    }

    std::size_t lex_comment(std::size_t begin, std::size_t from) {
        std::size_t e = src_.find("#}", from);
        if (e == std::string::npos) fail("Missing end of comment tag", begin);
        char sign = '\0';
        if (e > from && (src_[e - 1] == '-' || src_[e - 1] == '+')) sign = src_[e - 1];
        return after_end(e + 2, sign, true);
    }

    bool is_raw_begin(std::size_t p) const {
        while (p < src_.size() && is_ws(src_[p])) ++p;
        if (src_.compare(p, 3, "raw") != 0) return false;
        p += 3;
        while (p < src_.size() && is_ws(src_[p])) ++p;
        if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
        return src_.compare(p, 2, "%}") == 0;
    }

    std::size_t lex_raw(std::size_t begin, std::size_t p) {
        std::size_t close = src_.find("%}", p);
        char sign = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : '\0';
        std::size_t body = after_end(close + 2, sign, true);
        // Find {% endraw %} with optional whitespace control.
        for (std::size_t q = src_.find("{%", body); q != std::string::npos;
             q = src_.find("{%", q + 2)) {
            std::size_t r = q + 2;
            char lsign = (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ? src_[r] : '\0';
            if (lsign) ++r;
            while (r < src_.size() && is_ws(src_[r])) ++r;
            if (src_.compare(r, 6, "endraw") != 0) continue;
            r += 6;
            while (r < src_.size() && is_ws(src_[r])) ++r;
            char rsign = '\0';
            if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) rsign = src_[r++];
            if (src_.compare(r, 2, "%}") != 0) continue;
            std::size_t text_end = q;
            if (lsign == '-') {
                while (text_end > body && is_ws(src_[text_end - 1])) --text_end;
            } else if (lsign != '+' && opt_.lstrip_blocks) {
                text_end = lstrip_end(body, q, false);
            }
            emit_text(body, text_end);
            return after_end(r + 2, rsign, true);
        }
        fail("Missing end of raw directive", begin);
    }

    std::size_t lex_tag(std::size_t begin, std::size_t p, bool block) {
        Token open{block ? Tok::BlockBegin : Tok::VarBegin, "", 0, 0, 0, 0};
        locate(begin, open);
        tokens_.push_back(open);
        std::vector<char> brackets;
        const std::size_t n = src_.size();
        while (true) {
            while (p < n && is_ws(src_[p])) ++p;
            if (p >= n) {
                fail(block ? "unexpected end of template, expected '%}'"
                           : "unexpected end of template, expected '}}'",
                     begin);
            }
            if (brackets.empty()) {
                char close = block ? '%' : '}';
                char sign = '\0';
                std::size_t q = p;
                if ((src_[q] == '-' || (block && src_[q] == '+')) && q + 2 < n &&
                    src_[q + 1] == close && src_[q + 2] == '}') {
                    sign = src_[q];
                    ++q;
                }
                if (q + 1 < n && src_[q] == close && src_[q + 1] == '}') {
                    Token t{block ? Tok::BlockEnd : Tok::VarEnd, "", 0, 0, 0, 0};
                    locate(p, t);
                    tokens_.push_back(t);
                    return after_end(q + 2, sign, block);
                }
            }
            p = lex_operand(p, brackets);
        }
    }

    std::size_t lex_operand(std::size_t p, std::vector<char>& brackets) {
        const std::size_t n = src_.size();
        char c = src_[p];
        Token t{Tok::Op, "", 0, 0, 0, 0};
        locate(p, t);
        if (c == '\'' || c == '"') {
            t.type = Tok::String;
            std::size_t q = p + 1;
            while (q < n && src_[q] != c) {
                if (src_[q] == '\\') ++q;
                ++q;
            }
            if (q >= n) fail("unexpected end of string", p);
            t.text = unescape(src_.substr(p + 1, q - p - 1));
            tokens_.push_back(std::move(t));
            return q + 1;
        }
        if (is_digit(c)) return lex_number(p, std::move(t));
        if (is_name_start(c)) {
            std::size_t q = p;
            while (q < n && is_name_char(src_[q])) ++q;
            t.type = Tok::Name;
            t.text = src_.substr(p, q - p);
            tokens_.push_back(std::move(t));
            return q;
        }
        static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : two) {
            if (src_.compare(p, 2, op) == 0) {
                t.text = op;
                tokens_.push_back(std::move(t));
                return p + 2;
            }
        }
        static const std::string_view one = "+-/*%~[](){}><=.:|,;";
        if (one.find(c) == std::string_view::npos) {
            fail(std::string("unexpected char '") + c + "'", p);
        }
        if (c == '(' || c == '[' || c == '{') {
            brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        } else if (c == ')' || c == ']' || c == '}') {
            if (brackets.empty()) fail(std::string("unexpected '") + c + "'", p);
            if (brackets.back() != c) {
                fail(std::string("unexpected '") + c + "', expected '" + brackets.back() + "'", p);
            }
            brackets.pop_back();
        }
        t.text = std::string(1, c);
        tokens_.push_back(std::move(t));
        return p + 1;
    }

    std::size_t digits_run(std::size_t q) const {
        // (\d+_)*\d+
        std::size_t n = src_.size();
        if (q >= n || !is_digit(src_[q])) return std::string::npos;
        while (q < n && is_digit(src_[q])) {
            ++q;
            if (q + 1 < n && src_[q] == '_' && is_digit(src_[q + 1])) ++q;
        }
        return q;
    }

    std::size_t lex_number(std::size_t p, Token t) {
        const std::size_t n = src_.size();
        // Hex/octal/binary integers.
        if (src_[p] == '0' && p + 1 < n &&
            (src_[p + 1] == 'x' || src_[p + 1] == 'X' || src_[p + 1] == 'o' || src_[p + 1] == 'O' ||
             src_[p + 1] == 'b' || src_[p + 1] == 'B')) {
            std::size_t q = p + 2;
            while (q < n &&
                   (std::isxdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) {
                ++q;
            }
            auto v = pystr::parse_int(src_.substr(p, q - p), 0);
            if (!v) fail("invalid integer literal", p);
            t.type = Tok::Int;
            t.ival = *v;
            tokens_.push_back(std::move(t));
            return q;
        }
        std::size_t q = digits_run(p);
        bool is_float = false;
        bool after_dot = p > 0 && src_[p - 1] == '.';
        if (!after_dot) {
            std::size_t f = q;
            if (f < n && src_[f] == '.') {
                std::size_t d = digits_run(f + 1);
                if (d != std::string::npos) {
                    f = d;
                    is_float = true;
                }
            }
            if (f < n && (src_[f] == 'e' || src_[f] == 'E')) {
                std::size_t e = f + 1;
                if (e < n && (src_[e] == '+' || src_[e] == '-')) ++e;
                std::size_t d = digits_run(e);
                if (d != std::string::npos) {
                    f = d;
                    is_float = true;
                }
            }
            if (is_float) q = f;
        }
        std::string text;
        for (std::size_t i = p; i < q; ++i) {
            if (src_[i] != '_') text += src_[i];
        }
        if (is_float) {
            t.type = Tok::Float;
            t.fval = std::strtod(text.c_str(), nullptr);
        } else {
            auto v = pystr::parse_int(text, 10);
            if (!v) fail("integer literal too large", p);
            t.type = Tok::Int;
            t.ival = *v;
        }
        tokens_.push_back(std::move(t));
        return q;
    }

    // Python string-literal escapes (Jinja2 decodes literals with "unicode-escape").
    static std::string unescape(std::string_view s) {
        std::string out;
        out.reserve(s.size());
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] != '\\' || i + 1 >= s.size()) {
                out += s[i];
                continue;
            }
            char e = s[++i];
            auto hex = [&](std::size_t digits) {
                if (i + digits >= s.size()) return false;
                std::uint32_t v = 0;
                for (std::size_t k = 1; k <= digits; ++k) {
                    char h = s[i + k];
                    if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
                    v = v * 16 + static_cast<std::uint32_t>(
                                     std::isdigit(static_cast<unsigned char>(h))
                                         ? h - '0'
                                         : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
                }
                ggufd::text::append_utf8(out, v);
                i += digits;
                return true;
            };
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '\n':
                    break;  // line continuation
                case 'x':
                    if (!hex(2)) out += "\\x";
                    break;
                case 'u':
                    if (!hex(4)) out += "\\u";
                    break;
                case 'U':
                    if (!hex(8)) out += "\\U";
                    break;
                default:
                    if (e >= '0' && e <= '7') {
                        std::uint32_t v = 0;
                        std::size_t k = 0;
                        while (k < 3 && i + k < s.size() && s[i + k] >= '0' && s[i + k] <= '7') {
                            v = v * 8 + static_cast<std::uint32_t>(s[i + k] - '0');
                            ++k;
                        }
                        i += k - 1;
                        ggufd::text::append_utf8(out, v);
                    } else {
                        out += '\\';
                        out += e;
                    }
            }
        }
        return out;
    }

    LexOptions opt_;
    std::string src_;
    std::vector<std::size_t> line_starts_;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) {
    return Lexer(source, options).run();
}

}  // namespace ggufd::jinja
