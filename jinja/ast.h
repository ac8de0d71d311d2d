// The parsed template: statements and expressions as plain node structs. A compiled Program is
// immutable after parsing, so any number of renders may walk it at once.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace ggufd::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

class Interp;
using FilterFn = Value (*)(Interp&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interp&, const Value& input, CallArgs& args);

enum class ExprKind : std::uint8_t {
    Const,    // constant
    Name,     // name_id
    List,     // items
    Tuple,    // items
    Dict,     // items: key, value, key, value, ...
    GetAttr,  // a.name
    GetItem,  // a[b]
    Slice,    // a[b:c:d] (missing parts are null)
    Call,     // a(items, kwargs, star_args, star_kwargs)
    Filter,   // a | name(items, kwargs); `a` null in filter blocks
    Test,     // a is [not] name(items)
    Not,      // not a
    Neg,      // -a
    Pos,      // +a
    Binary,   // a op b (arithmetic)
    And,      // a and b
    Or,       // a or b
    Compare,  // a (cmp_ops[i] items[i])...
    Concat,   // items joined with ~
    Cond,     // b if a else c (c may be null)
};

enum class BinOp : std::uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp : std::uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr {
    ExprKind kind;
    int line = 0;
    int column = 0;
    Value constant;
    int name_id = -1;
    std::string name;  // attribute, filter or test name
    ExprPtr a, b, c, d;
    std::vector<ExprPtr> items;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    ExprPtr star_args, star_kwargs;
    BinOp bin_op = BinOp::Add;
    std::vector<CmpOp> cmp_ops;
    bool negated = false;  // `is not`
    FilterFn filter = nullptr;
    TestFn test = nullptr;
};

// What a set/for assigns to: a name, a tuple of names, or a namespace attribute.
struct Target {
    enum class Kind : std::uint8_t { Name, Tuple, NsAttr } kind = Kind::Name;
    std::vector<int> ids;  // Name: one id; Tuple: one per element; NsAttr: the namespace name
    std::string attr;
};

struct MacroDef {
    std::string name;
    std::vector<std::string> params;
    std::vector<int> param_ids;
    std::vector<ExprPtr> defaults;  // aligned with params; null when the parameter has none
    Body body;
    bool uses_kwargs = false;
    bool uses_varargs = false;
    bool uses_caller = false;
};

enum class StmtKind : std::uint8_t {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches, else_body
    For,          // target in expr [if cond] body else_body
    Set,          // target = expr
    SetBlock,     // target = captured body, then filters
    Macro,        // macro
    CallBlock,    // expr (a Call) with caller = macro
    FilterBlock,  // body through filters
    With,         // assignments (targets[i] = values[i]) in a new scope, then body
    Break,
    Continue,
    Do,           // evaluate expr, discard
    Scope,        // body in a new scope ({% block %} without inheritance)
    Unsupported,  // text holds the message (include/import/extends: no file access)
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    int column = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr cond;
    Target target;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body;
    Body else_body;
    bool recursive = false;
    std::unique_ptr<MacroDef> macro;
    std::vector<ExprPtr> filters;  // Filter exprs with a null operand
    std::vector<Target> targets;
    std::vector<ExprPtr> values;
};

struct Program {
    Body root;
    std::vector<std::string> names;  // interned identifiers, indexed by name_id
    std::unordered_map<std::string, int> name_ids;

    int intern(const std::string& name) {
        auto [it, inserted] = name_ids.emplace(name, static_cast<int>(names.size()));
        if (inserted) names.push_back(name);
        return it->second;
    }
    int find(const std::string& name) const {
        auto it = name_ids.find(name);
        return it == name_ids.end() ? -1 : it->second;
    }
};

}  // namespace ggufd::jinja
