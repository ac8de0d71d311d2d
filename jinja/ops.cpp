#include "jinja/ops.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "jinja/builtins.h"
#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/interp.h"
#include "jinja/pystr.h"
#include "text/utf8.h"

namespace ggufd::jinja {

namespace {

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
    if (a.is_undefined()) throw TemplateError(a.undefined_message());
    if (b.is_undefined()) throw TemplateError(b.undefined_message());
    if (a.is_string() && std::string_view(op) == "+") {
        throw TemplateError("can only concatenate str (not \"" + type_name(b) + "\") to str");
    }
    if (a.is_list() && std::string_view(op) == "+") {
        throw TemplateError("can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                            "\") to " + type_name(a));
    }
    throw TemplateError(std::string("unsupported operand type(s) for ") + op + ": '" +
                        type_name(a) + "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
    throw TemplateError("integer result out of range");
}

bool plain_sequence(const Value& v) {
    return v.is_list() && v.list().seq != SeqKind::Iterator;
}

bool is_intlike(const Value& v) {
    return v.is_int() || v.is_bool();
}

Value repeat(Interp& interp, const Value& seq, std::int64_t n) {
    if (n < 0) n = 0;
    if (seq.is_string()) {
        const std::string& s = seq.str();
        interp.check_string_size(s.size() * static_cast<std::size_t>(n));
        TextBuilder out;
        out.text.reserve(s.size() * static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) out.append(seq);
        return out.take(seq.is_markup());
    }
    const ListObj& l = seq.list();
    interp.check_list_size(l.items.size() * static_cast<std::size_t>(n));
    std::vector<Value> out;
    for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), l.items.begin(), l.items.end());
    auto r = std::make_shared<ListObj>();
    r->items = std::move(out);
    r->seq = l.seq;
    return Value(std::move(r));
}

// CPython's float floor division and modulo (the result of % takes the divisor's sign).
void float_divmod(double vx, double wx, double& floordiv, double& mod) {
    mod = std::fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, wx);
    }
    if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, vx / wx);
    }
}

}  // namespace

Value negate(const Value& v) {
    if (v.is_float()) return Value(-v.as_double());
    if (is_intlike(v)) {
        if (v.as_int() == std::numeric_limits<std::int64_t>::min()) overflow();
        return Value(-v.as_int());
    }
    if (v.is_undefined()) throw TemplateError(v.undefined_message());
    throw TemplateError("bad operand type for unary -: '" + type_name(v) + "'");
}

Value binary_op(Interp& interp, BinOp op, const Value& a, const Value& b) {
    const bool nums = a.is_number() && b.is_number();
    const bool ints = nums && !a.is_float() && !b.is_float();
    switch (op) {
        case BinOp::Add:
            if (ints) {
                std::int64_t r;
                if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
                return Value(r);
            }
            if (nums) return Value(a.as_double() + b.as_double());
            if (a.is_string() && b.is_string()) {
                if (a.is_markup() != b.is_markup()) {
                    // Markup + str escapes the plain side and stays Markup.
                    TextBuilder s;
                    // The escaped side is content as a whole when it holds any.
                    auto append_escaped = [&s](const Value& v) {
                        Value escaped(html_escape(v.str()));
                        s.append(v.content_ranges() ? all_content(escaped) : escaped);
                    };
                    if (a.is_markup()) {
                        s.append(a);
                        append_escaped(b);
                    } else {
                        append_escaped(a);
                        s.append(b);
                    }
                    interp.check_string_size(s.text.size());
                    return s.take(true);
                }
                interp.check_string_size(a.str().size() + b.str().size());
                TextBuilder s;
                s.text.reserve(a.str().size() + b.str().size());
                s.append(a);
                s.append(b);
                return s.take(a.is_markup());
            }
            if (plain_sequence(a) && plain_sequence(b) && a.list().seq == b.list().seq) {
                const auto& x = a.list().items;
                const auto& y = b.list().items;
                interp.check_list_size(x.size() + y.size());
                auto r = std::make_shared<ListObj>();
                r->seq = a.list().seq;
                r->items.reserve(x.size() + y.size());
                r->items.insert(r->items.end(), x.begin(), x.end());
                r->items.insert(r->items.end(), y.begin(), y.end());
                return Value(std::move(r));
            }
            unsupported("+", a, b);
        case BinOp::Sub:
            if (ints) {
                std::int64_t r;
                if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
                return Value(r);
            }
            if (nums) return Value(a.as_double() - b.as_double());
            unsupported("-", a, b);
        case BinOp::Mul:
            if (ints) {
                std::int64_t r;
                if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
                return Value(r);
            }
            if (nums) return Value(a.as_double() * b.as_double());
            if ((a.is_string() || plain_sequence(a)) && is_intlike(b)) {
                return repeat(interp, a, b.as_int());
            }
            if ((b.is_string() || plain_sequence(b)) && is_intlike(a)) {
                return repeat(interp, b, a.as_int());
            }
            unsupported("*", a, b);
        case BinOp::Div:
            if (nums) {
                if (b.as_double() == 0.0) throw TemplateError("division by zero");
                return Value(a.as_double() / b.as_double());
            }
            unsupported("/", a, b);
        case BinOp::FloorDiv:
        case BinOp::Mod:
            if (ints) {
                std::int64_t x = a.as_int(), y = b.as_int();
                if (y == 0) throw TemplateError("integer division or modulo by zero");
                if (x == std::numeric_limits<std::int64_t>::min() && y == -1) {
                    if (op == BinOp::Mod) return Value(std::int64_t{0});
                    overflow();
                }
                std::int64_t q = x / y, r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) {
                    r += y;
                    q -= 1;
                }
                return Value(op == BinOp::FloorDiv ? q : r);
            }
            if (nums) {
                if (b.as_double() == 0.0) throw TemplateError("float modulo or division by zero");
                double fd, md;
                float_divmod(a.as_double(), b.as_double(), fd, md);
                return Value(op == BinOp::FloorDiv ? fd : md);
            }
            if (op == BinOp::Mod && a.is_string()) {
                std::string s = percent_format(a.str(), b);
                interp.check_string_size(s.size());
                Value r(std::move(s));
                return holds_content(a) || holds_content(b) ? all_content(r) : r;
            }
            unsupported(op == BinOp::Mod ? "%" : "//", a, b);
        case BinOp::Pow:
            if (ints && b.as_int() >= 0) {
                std::int64_t base = a.as_int(), e = b.as_int(), r = 1;
                while (e > 0) {
                    if (e & 1) {
                        if (__builtin_mul_overflow(r, base, &r)) overflow();
                    }
                    e >>= 1;
                    if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
                }
                return Value(r);
            }
            if (nums) {
                if (a.as_double() == 0.0 && b.as_double() < 0) {
                    throw TemplateError("0.0 cannot be raised to a negative power");
                }
                return Value(std::pow(a.as_double(), b.as_double()));
            }
            unsupported("** or pow()", a, b);
    }
    unsupported("?", a, b);
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Kind::String:
            if (!item.is_string()) {
                if (item.is_undefined()) throw TemplateError(item.undefined_message());
                throw TemplateError("'in <string>' requires string as left operand, not " +
                                    type_name(item));
            }
            return container.str().find(item.str()) != std::string::npos;
        case Kind::List:
            for (const Value& v : container.list().items) {
                if (equals(v, item)) return true;
            }
            return false;
        case Kind::Dict:
            return container.dict().find(item) != nullptr;
        case Kind::Undefined:
            return false;
        default:
            throw TemplateError("argument of type '" + type_name(container) + "' is not iterable");
    }
}

std::optional<std::size_t> normalize_index(std::int64_t i, std::size_t n) {
    auto len = static_cast<std::int64_t>(n);
    if (i < 0) i += len;
    if (i < 0 || i >= len) return std::nullopt;
    return static_cast<std::size_t>(i);
}

std::optional<Value> slice(const Value& obj, const Value& start_v, const Value& stop_v,
                           const Value& step_v) {
    if (obj.is_undefined()) throw TemplateError(obj.undefined_message());
    bool is_str = obj.is_string();
    if (!is_str && !plain_sequence(obj)) return std::nullopt;
    auto as_index = [](const Value& v, bool& given) -> std::int64_t {
        given = !(v.is_none() || v.is_undefined());
        if (!given) return 0;
        if (!is_intlike(v)) {
            throw TemplateError(
                "slice indices must be integers or None or have an __index__ "
                "method");
        }
        return v.as_int();
    };
    bool has_start, has_stop, has_step;
    std::int64_t start = as_index(start_v, has_start);
    std::int64_t stop = as_index(stop_v, has_stop);
    std::int64_t step = as_index(step_v, has_step);
    if (!has_step) step = 1;
    if (step == 0) throw TemplateError("slice step cannot be zero");

    std::vector<std::size_t> offs;
    std::int64_t len;
    if (is_str) {
        if (!pystr::is_ascii(obj.str())) offs = pystr::offsets(obj.str());
        len = offs.empty() ? static_cast<std::int64_t>(obj.str().size())
                           : static_cast<std::int64_t>(offs.size() - 1);
    } else {
        len = static_cast<std::int64_t>(obj.list().items.size());
    }
    auto adjust = [&](std::int64_t v, bool given, bool is_start) {
        if (!given) {
            if (step < 0) return is_start ? len - 1 : std::int64_t{-1};
            return is_start ? std::int64_t{0} : len;
        }
        if (v < 0) {
            v += len;
            if (v < 0) v = step < 0 ? -1 : 0;
        } else if (v >= len) {
            v = step < 0 ? len - 1 : len;
        }
        return v;
    };
    start = adjust(start, has_start, true);
    stop = adjust(stop, has_stop, false);

    std::vector<std::int64_t> picks;
    if (step > 0) {
        for (std::int64_t i = start; i < stop; i += step) picks.push_back(i);
    } else {
        for (std::int64_t i = start; i > stop; i += step) picks.push_back(i);
    }
    if (is_str) {
        if (step == 1 && !picks.empty()) {
            std::size_t b = offs.empty() ? static_cast<std::size_t>(start) : offs[start];
            std::size_t e = offs.empty() ? static_cast<std::size_t>(stop) : offs[stop];
            return substring(obj, b, e);
        }
        TextBuilder picked;
        for (std::int64_t i : picks) {
            auto k = static_cast<std::size_t>(i);
            picked.append(offs.empty() ? substring(obj, k, k + 1)
                                       : substring(obj, offs[k], offs[k + 1]));
        }
        return picked.take();
    }
    auto r = std::make_shared<ListObj>();
    r->seq = obj.list().seq;
    for (std::int64_t i : picks) r->items.push_back(obj.list().items[static_cast<std::size_t>(i)]);
    return Value(std::move(r));
}

// ---- formatting ----

namespace {

std::string pad(std::string s, std::int64_t width, char align, char32_t fill) {
    auto len = static_cast<std::int64_t>(pystr::length(s));
    if (width <= len) return s;
    std::int64_t total = width - len;
    std::string f;
    ggufd::text::append_utf8(f, fill);
    auto rep = [&](std::int64_t n) {
        std::string r;
        for (std::int64_t i = 0; i < n; ++i) r += f;
        return r;
    };
    if (align == '<') return s + rep(total);
    if (align == '^') return rep(total / 2) + s + rep(total - total / 2);
    if (align == '=' && !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) {
        return s.substr(0, 1) + rep(total) + s.substr(1);
    }
    return rep(total) + s;
}

double to_double_arg(const Value& v, char conv) {
    if (v.is_number()) return v.as_double();
    throw TemplateError(std::string("%") + conv + " format: a real number is required, not " +
                        type_name(v));
}

std::int64_t to_int_arg(const Value& v, char conv) {
    if (v.is_float()) return static_cast<std::int64_t>(v.as_double());
    if (v.is_number()) return v.as_int();
    throw TemplateError(std::string("%") + conv + " format: a number is required, not " +
                        type_name(v));
}

std::string c_format(const std::string& spec, double d) {
    char buf[512];
    int n = std::snprintf(buf, sizeof buf, spec.c_str(), d);
    if (n < 0) throw TemplateError("formatting failed");
    if (static_cast<std::size_t>(n) >= sizeof buf) {
        std::string big(static_cast<std::size_t>(n) + 1, '\0');
        std::snprintf(big.data(), big.size(), spec.c_str(), d);
        big.pop_back();
        return big;
    }
    return std::string(buf, static_cast<std::size_t>(n));
}

std::string c_format_int(const std::string& spec, long long v) {
    char buf[128];
    int n = std::snprintf(buf, sizeof buf, spec.c_str(), v);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf)
        throw TemplateError("formatting failed");
    return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
    std::vector<Value> list;
    const DictObj* mapping = nullptr;
    if (args.is_list() && args.list().seq == SeqKind::Tuple) {
        list = args.list().items;
    } else {
        if (args.is_dict()) mapping = &args.dict();
        list.push_back(args);
    }
    std::size_t next = 0;
    bool used_mapping = false;
    std::string out;
    for (std::size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) throw TemplateError("incomplete format");
        const Value* arg = nullptr;
        if (fmt[i] == '(') {
            std::size_t close = fmt.find(')', i);
            if (close == std::string_view::npos) throw TemplateError("incomplete format key");
            if (!mapping) throw TemplateError("format requires a mapping");
            std::string key(fmt.substr(i + 1, close - i - 1));
            arg = mapping->find(key);
            if (!arg) throw TemplateError("KeyError: '" + key + "'");
            used_mapping = true;
            i = close + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
            flags += fmt[i++];
        }
        std::string width, precision;
        while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
            width += fmt[i++];
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            precision = "0";
            while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
                precision += fmt[i++];
            }
        }
        while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
        if (i >= fmt.size()) throw TemplateError("incomplete format");
        char conv = fmt[i];
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (!arg) {
            if (next >= list.size()) throw TemplateError("not enough arguments for format string");
            arg = &list[next++];
        }
        std::int64_t w = width.empty() ? 0 : std::stoll(width);
        bool left = flags.find('-') != std::string::npos;
        std::string piece;
        switch (conv) {
            case 's':
            case 'r':
            case 'a': {
                piece = conv == 's' ? to_str(*arg) : repr(*arg);
                if (!precision.empty()) {
                    auto p = static_cast<std::size_t>(std::stoll(precision));
                    std::vector<std::size_t> offs = pystr::offsets(piece);
                    if (p + 1 < offs.size()) piece = piece.substr(0, offs[p]);
                }
                piece = pad(piece, w, left ? '<' : '>', ' ');
                break;
            }
            case 'd':
            case 'i':
            case 'u':
            case 'x':
            case 'X':
            case 'o': {
                std::string spec = "%" + flags + width +
                                   (precision.empty() ? "" : "." + precision) + "ll" +
                                   (conv == 'u' || conv == 'i' ? 'd' : conv);
                piece = c_format_int(spec, to_int_arg(*arg, conv));
                break;
            }
            case 'c':
                if (arg->is_string()) {
                    piece = arg->str();
                } else {
                    piece.clear();
                    ggufd::text::append_utf8(piece, static_cast<char32_t>(to_int_arg(*arg, conv)));
                }
                piece = pad(piece, w, left ? '<' : '>', ' ');
                break;
            case 'f':
            case 'F':
            case 'e':
            case 'E':
            case 'g':
            case 'G': {
                std::string spec =
                    "%" + flags + width + (precision.empty() ? "" : "." + precision) + conv;
                piece = c_format(spec, to_double_arg(*arg, conv));
                break;
            }
            default:
                throw TemplateError(std::string("unsupported format character '") + conv + "'");
        }
        out += piece;
    }
    if (!used_mapping && !mapping && next < list.size()) {
        throw TemplateError("not all arguments converted during string formatting");
    }
    return out;
}

std::string format_spec(const Value& v, std::string_view spec) {
    if (spec.empty()) return to_str(v);
    // [[fill]align][sign][#][0][width][,_][.precision][type]
    std::size_t i = 0;
    char32_t fill = ' ';
    char align = '\0';
    std::vector<char32_t> cps = pystr::decode(spec);
    auto at = [&](std::size_t k) -> char32_t { return k < cps.size() ? cps[k] : 0; };
    auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (cps.size() >= 2 && is_align(at(1))) {
        fill = at(0);
        align = static_cast<char>(at(1));
        i = 2;
    } else if (is_align(at(0))) {
        align = static_cast<char>(at(0));
        i = 1;
    }
    char sign = '-';
    if (at(i) == '+' || at(i) == '-' || at(i) == ' ') sign = static_cast<char>(at(i++));
    bool alt = false;
    if (at(i) == '#') {
        alt = true;
        ++i;
    }
    if (at(i) == '0') {
        if (!align) {
            fill = '0';
            align = '=';
        }
        ++i;
    }
    std::int64_t width = 0;
    while (at(i) >= '0' && at(i) <= '9') width = width * 10 + (at(i++) - '0');
    char grouping = '\0';
    if (at(i) == ',' || at(i) == '_') grouping = static_cast<char>(at(i++));
    int precision = -1;
    if (at(i) == '.') {
        ++i;
        precision = 0;
        while (at(i) >= '0' && at(i) <= '9')
            precision = precision * 10 + static_cast<int>(at(i++) - '0');
    }
    char type = at(i) ? static_cast<char>(at(i++)) : '\0';
    if (i != cps.size()) throw TemplateError("Invalid format specifier");

    std::string body;
    if (v.is_string()) {
        if (type != '\0' && type != 's') {
            throw TemplateError(std::string("Unknown format code '") + type +
                                "' for object of type 'str'");
        }
        body = v.str();
        if (precision >= 0) {
            std::vector<std::size_t> offs = pystr::offsets(body);
            if (static_cast<std::size_t>(precision) + 1 < offs.size()) {
                body = body.substr(0, offs[static_cast<std::size_t>(precision)]);
            }
        }
        return pad(body, width, align ? align : '<', fill);
    }
    if (!v.is_number()) {
        throw TemplateError("unsupported format string passed to " + type_name(v) + ".__format__");
    }
    bool as_float =
        v.is_float() || std::string_view("eEfFgG%").find(type) != std::string_view::npos;
    if (type == '\0' && v.is_bool() && precision < 0) {
        body = v.as_bool() ? "True" : "False";
        return pad(body, width, align ? align : '<', fill);
    }
    if (!as_float) {
        std::int64_t n = v.as_int();
        bool neg = n < 0;
        std::uint64_t mag = neg ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
        int base = 10;
        std::string prefix;
        switch (type) {
            case 'x':
            case 'X':
                base = 16;
                prefix = alt ? (type == 'x' ? "0x" : "0X") : "";
                break;
            case 'o':
                base = 8;
                prefix = alt ? "0o" : "";
                break;
            case 'b':
                base = 2;
                prefix = alt ? "0b" : "";
                break;
            case 'c': {
                std::string s;
                ggufd::text::append_utf8(s, static_cast<char32_t>(n));
                return pad(s, width, align ? align : '<', fill);
            }
            case '\0':
            case 'd':
            case 'n':
                break;
            default:
                throw TemplateError(std::string("Unknown format code '") + type +
                                    "' for object of type 'int'");
        }
        std::string digits;
        const char* d = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
        do {
            digits.insert(digits.begin(), d[mag % static_cast<unsigned>(base)]);
            mag /= static_cast<unsigned>(base);
        } while (mag);
        if (grouping) {
            std::string g;
            int k = 0;
            int every = base == 10 ? 3 : 4;
            for (auto it = digits.rbegin(); it != digits.rend(); ++it, ++k) {
                if (k && k % every == 0) g.insert(g.begin(), grouping);
                g.insert(g.begin(), *it);
            }
            digits = g;
        }
        std::string sgn = neg ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
        body = sgn + prefix + digits;
        return pad(body, width, align ? align : '>', fill);
    }
    double x = v.as_double();
    std::string cspec = "%";
    if (sign == '+' || sign == ' ') cspec += sign;
    if (alt) cspec += '#';
    char t = type;
    if (t == '\0') {
        if (precision < 0) {
            body = pystr::float_repr(x);
            if (sign == '+' && x >= 0) body = "+" + body;
            return pad(body, width, align ? align : '>', fill);
        }
        t = 'g';
    }
    double shown = x;
    if (t == '%') {
        shown = x * 100;
        t = 'f';
    }
    cspec += "." + std::to_string(precision < 0 ? 6 : precision) + t;
    body = c_format(cspec, shown);
    if (type == '%') body += '%';
    if (grouping) {
        std::size_t start = (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
        std::size_t end = body.find_first_not_of("0123456789", start);
        if (end == std::string::npos) end = body.size();
        std::string ip = body.substr(start, end - start), g;
        int k = 0;
        for (auto it = ip.rbegin(); it != ip.rend(); ++it, ++k) {
            if (k && k % 3 == 0) g.insert(g.begin(), grouping);
            g.insert(g.begin(), *it);
        }
        body = body.substr(0, start) + g + body.substr(end);
    }
    return pad(body, width, align ? align : '>', fill);
}

std::string str_format(std::string_view fmt, const CallArgs& args) {
    std::string out;
    std::size_t auto_index = 0;
    for (std::size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}';
                ++i;
                continue;
            }
            throw TemplateError("Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        std::size_t close = fmt.find('}', i);
        if (close == std::string_view::npos) {
            throw TemplateError("Single '{' encountered in format string");
        }
        std::string_view field = fmt.substr(i + 1, close - i - 1);
        i = close;
        std::string_view spec, conv;
        if (std::size_t colon = field.find(':'); colon != std::string_view::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        if (std::size_t bang = field.find('!'); bang != std::string_view::npos) {
            conv = field.substr(bang + 1);
            field = field.substr(0, bang);
        }
        std::size_t name_end = field.find_first_of(".[");
        std::string_view name = field.substr(0, name_end);
        Value v;
        if (name.empty()) {
            if (auto_index >= args.pos.size()) {
                throw TemplateError("Replacement index " + std::to_string(auto_index) +
                                    " out of range for positional args tuple");
            }
            v = args.pos[auto_index++];
        } else if (std::isdigit(static_cast<unsigned char>(name[0]))) {
            std::size_t k = static_cast<std::size_t>(std::stoull(std::string(name)));
            if (k >= args.pos.size()) {
                throw TemplateError("Replacement index " + std::to_string(k) +
                                    " out of range for positional args tuple");
            }
            v = args.pos[k];
        } else {
            const Value* kv = args.kwarg(name);
            if (!kv) throw TemplateError("KeyError: '" + std::string(name) + "'");
            v = *kv;
        }
        // Attribute/index chains: {0.name} {0[key]}.
        std::string_view rest = name_end == std::string_view::npos ? "" : field.substr(name_end);
        while (!rest.empty()) {
            std::string key;
            if (rest[0] == '.') {
                std::size_t e = rest.find_first_of(".[", 1);
                key = std::string(rest.substr(1, e == std::string_view::npos ? e : e - 1));
                rest = e == std::string_view::npos ? "" : rest.substr(e);
            } else {
                std::size_t e = rest.find(']');
                if (e == std::string_view::npos)
                    throw TemplateError("Missing ']' in format string");
                key = std::string(rest.substr(1, e - 1));
                rest = rest.substr(e + 1);
            }
            if (v.is_dict()) {
                const Value* f = v.dict().find(key);
                if (!f) throw TemplateError("KeyError: '" + key + "'");
                v = *f;
            } else if (v.is_list() && !key.empty() &&
                       std::isdigit(static_cast<unsigned char>(key[0]))) {
                auto idx = normalize_index(std::stoll(key), v.list().items.size());
                if (!idx) throw TemplateError("IndexError: list index out of range");
                v = v.list().items[*idx];
            } else {
                throw TemplateError("cannot look up '" + key + "' in a format field");
            }
        }
        if (conv == "r" || conv == "a") {
            v = Value(repr(v));
        } else if (conv == "s") {
            v = Value(to_str(v));
        }
        out += format_spec(v, spec);
    }
    return out;
}

}  // namespace ggufd::jinja
