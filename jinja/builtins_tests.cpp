// The test registry: Jinja2 3.1's builtin tests (`x is defined`, ...).
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <unordered_map>

#include "jinja/builtins_args.h"
#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/interp.h"
#include "jinja/json.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"
#include "jinja/text_filters.h"

namespace ggufd::jinja {

namespace {

using namespace detail;

// ---- tests ----

const Value& test_arg(const CallArgs& a, std::string_view test) {
    if (a.pos.empty()) throw TemplateError("test '" + std::string(test) + "' needs an argument");
    return a.pos[0];
}

bool t_boolean(Interp&, const Value& v, CallArgs&) {
    return v.is_bool();
}
bool t_callable(Interp&, const Value& v, CallArgs&) {
    return v.is_object() && v.object().callable();
}
bool t_defined(Interp&, const Value& v, CallArgs&) {
    return !v.is_undefined();
}
bool t_undefined(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined();
}
bool t_divisibleby(Interp& i, const Value& v, CallArgs& a) {
    return !truthy(binary_op(i, BinOp::Mod, v, test_arg(a, "divisibleby")));
}
bool t_eq(Interp&, const Value& v, CallArgs& a) {
    return equals(v, test_arg(a, "eq"));
}
bool t_ne(Interp&, const Value& v, CallArgs& a) {
    return !equals(v, test_arg(a, "ne"));
}
bool t_lt(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "lt")) < 0;
}
bool t_le(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "le")) <= 0;
}
bool t_gt(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "gt")) > 0;
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
    return compare(v, test_arg(a, "ge")) >= 0;
}
bool t_escaped(Interp&, const Value& v, CallArgs&) {
    return v.is_markup();  // has __html__
}
bool t_even(Interp& i, const Value& v, CallArgs&) {
    return !truthy(binary_op(i, BinOp::Mod, v, Value(2)));
}
bool t_odd(Interp& i, const Value& v, CallArgs&) {
    return truthy(binary_op(i, BinOp::Mod, v, Value(2)));
}
bool t_false(Interp&, const Value& v, CallArgs&) {
    return v.is_bool() && !v.as_bool();
}
bool t_true(Interp&, const Value& v, CallArgs&) {
    return v.is_bool() && v.as_bool();
}
bool t_filter(Interp&, const Value& v, CallArgs&) {
    return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interp&, const Value& v, CallArgs&) {
    return v.is_string() && find_test(v.str()) != nullptr;
}
bool t_float(Interp&, const Value& v, CallArgs&) {
    return v.is_float();
}
bool t_integer(Interp&, const Value& v, CallArgs&) {
    return v.is_int();
}
bool t_in(Interp&, const Value& v, CallArgs& a) {
    return contains(test_arg(a, "in"), v);
}
bool t_iterable(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_lower(Interp&, const Value& v, CallArgs&) {
    return pystr::is_cased_lower(to_str(v));
}
bool t_upper(Interp&, const Value& v, CallArgs&) {
    return pystr::is_cased_upper(to_str(v));
}
bool t_mapping(Interp&, const Value& v, CallArgs&) {
    return v.is_dict();
}
bool t_none(Interp&, const Value& v, CallArgs&) {
    return v.is_none();
}
bool t_number(Interp&, const Value& v, CallArgs&) {
    return v.is_number();
}
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
    const Value& o = test_arg(a, "sameas");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
        case Kind::None:
        case Kind::Undefined:
            return true;
        case Kind::Bool:
            return v.as_bool() == o.as_bool();
        case Kind::Int:
            return v.as_int() == o.as_int();
        case Kind::Float:
            return false;
        default:
            return v.identity() == o.identity();
    }
}
bool t_sequence(Interp&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_dict() ||
           (v.is_list() && v.list().seq != SeqKind::Iterator);
}
bool t_string(Interp&, const Value& v, CallArgs&) {
    return v.is_string();
}

const std::unordered_map<std::string_view, TestFn>& tests() {
    static const std::unordered_map<std::string_view, TestFn> table = {
        {"boolean", t_boolean},
        {"callable", t_callable},
        {"defined", t_defined},
        {"undefined", t_undefined},
        {"divisibleby", t_divisibleby},
        {"eq", t_eq},
        {"equalto", t_eq},
        {"==", t_eq},
        {"ne", t_ne},
        {"!=", t_ne},
        {"lt", t_lt},
        {"lessthan", t_lt},
        {"<", t_lt},
        {"le", t_le},
        {"<=", t_le},
        {"gt", t_gt},
        {"greaterthan", t_gt},
        {">", t_gt},
        {"ge", t_ge},
        {">=", t_ge},
        {"escaped", t_escaped},
        {"even", t_even},
        {"odd", t_odd},
        {"false", t_false},
        {"true", t_true},
        {"filter", t_filter},
        {"test", t_test},
        {"float", t_float},
        {"integer", t_integer},
        {"in", t_in},
        {"iterable", t_iterable},
        {"lower", t_lower},
        {"upper", t_upper},
        {"mapping", t_mapping},
        {"none", t_none},
        {"number", t_number},
        {"sameas", t_sameas},
        {"sequence", t_sequence},
        {"string", t_string},
    };
    return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
    auto it = tests().find(name);
    return it == tests().end() ? nullptr : it->second;
}

}  // namespace ggufd::jinja
