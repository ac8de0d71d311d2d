// Jinja2's builtin filters, tests and globals, Hugging Face's additions (tojson with its
// arguments, raise_exception, strftime_now), and the Python methods templates call on str,
// list and dict values.
#pragma once

#include <string_view>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace ggufd::jinja {

class Interp;
class Scope;

// nullptr when there is no such filter/test (reported when the template reaches it).
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// True when `self` (a str, list or dict) has a Python method `name` templates may call.
bool has_method(const Value& self, std::string_view name);
Value call_method(Interp& interp, const Value& self, std::string_view name, CallArgs& args);
// The method as a value (for `x.items` without a call).
Value bound_method(const Value& self, std::string_view name);

// HTML escaping as markupsafe.escape does it (& < > " ').
std::string html_escape(std::string_view s);

// The global function `name` (range, dict, namespace, cycler, joiner, raise_exception,
// strftime_now), or Undefined.
Value global_function(std::string_view name);

}  // namespace ggufd::jinja
