// Python's operators over template values: arithmetic with int/float distinctions, sequence
// concatenation and repetition, `in`, slicing, and str % / str.format formatting.
#pragma once

#include <optional>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace ggufd::jinja {

class Interp;

Value binary_op(Interp& interp, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
// Python `item in container`; throws when the container is not a container.
bool contains(const Value& container, const Value& item);
// Python container[start:stop:step]; nullopt where Jinja2 would give Undefined.
std::optional<Value> slice(const Value& obj, const Value& start, const Value& stop,
                           const Value& step);
// Python's index normalisation for v[i]: nullopt when out of range.
std::optional<std::size_t> normalize_index(std::int64_t i, std::size_t n);
// fmt % args (printf-style).
std::string percent_format(std::string_view fmt, const Value& args);
// fmt.format(*args, **kwargs).
std::string str_format(std::string_view fmt, const CallArgs& args);
// format(value, spec) for the format mini-language.
std::string format_spec(const Value& v, std::string_view spec);

}  // namespace ggufd::jinja
