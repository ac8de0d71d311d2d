#include "jinja/interp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

#include "jinja/builtins.h"
#include "jinja/json.h"
#include "jinja/ops.h"
#include "jinja/pystr.h"

namespace ggufd::jinja {

namespace {

// A macro value: the definition plus the scope it was defined in (read at call time, so a
// macro sees variables as they are when it runs, like a Python closure).
class MacroObj : public Object {
  public:
    MacroObj(const MacroDef* def, ScopePtr closure, Value caller = Value())
        : def_(def), closure_(std::move(closure)), caller_(std::move(caller)) {}
    std::string type_name() const override { return "Macro"; }
    bool callable() const override { return true; }
    Value call(Interp& interp, CallArgs& args) override {
        return interp.call_macro(*def_, closure_, args, caller_);
    }
    Value get_attr(std::string_view name) const override {
        if (name == "name") return Value(def_->name);
        if (name == "arguments") {
            std::vector<Value> ps;
            for (const auto& p : def_->params) ps.emplace_back(p);
            return Value::new_tuple(std::move(ps));
        }
        return Object::get_attr(name);
    }
    std::string to_string() const override { return "<Macro '" + def_->name + "'>"; }
    void clear_references() override { closure_.reset(); }

  private:
    const MacroDef* def_;
    ScopePtr closure_;
    Value caller_;
};

// The `loop` variable of a for loop.
class LoopObj : public Object, public std::enable_shared_from_this<LoopObj> {
  public:
    LoopObj(const Stmt& stmt, ScopePtr scope, std::shared_ptr<const std::vector<Value>> items,
            int depth)
        : stmt_(stmt), scope_(std::move(scope)), items_(std::move(items)), depth_(depth) {}

    std::string type_name() const override { return "LoopContext"; }
    bool callable() const override { return true; }

    Value get_attr(std::string_view name) const override {
        auto n = static_cast<std::int64_t>(items_->size());
        auto i = static_cast<std::int64_t>(index_);
        if (name == "index") return Value(i + 1);
        if (name == "index0") return Value(i);
        if (name == "revindex") return Value(n - i);
        if (name == "revindex0") return Value(n - i - 1);
        if (name == "first") return Value::boolean(i == 0);
        if (name == "last") return Value::boolean(i == n - 1);
        if (name == "length") return Value(n);
        if (name == "depth") return Value(depth_ + 1);
        if (name == "depth0") return Value(depth_);
        if (name == "previtem") {
            return i > 0 ? (*items_)[index_ - 1] : Value::undefined("there is no previous item");
        }
        if (name == "nextitem") {
            return i + 1 < n ? (*items_)[index_ + 1] : Value::undefined("there is no next item");
        }
        if (name == "cycle" || name == "changed") {
            auto self = std::const_pointer_cast<LoopObj>(shared_from_this());
            return Value(std::static_pointer_cast<Object>(
                std::make_shared<LoopMethod>(self, name == "cycle")));
        }
        return Object::get_attr(name);
    }

    Value call(Interp& interp, CallArgs& args) override {
        if (!stmt_.recursive) {
            throw TemplateError("The loop must have the 'recursive' marker to be callable.");
        }
        if (args.pos.size() != 1) throw TemplateError("loop() takes exactly one argument");
        TextBuilder out;
        interp.run_for(stmt_, scope_, args.pos[0], depth_ + 1, out);
        return out.take();
    }

    std::string to_string() const override { return "<LoopContext>"; }
    void clear_references() override { last_changed_.clear(); }

    std::size_t index_ = 0;

  private:
    class LoopMethod : public Object {
      public:
        LoopMethod(std::shared_ptr<LoopObj> loop, bool cycle)
            : loop_(std::move(loop)), cycle_(cycle) {}
        std::string type_name() const override { return "method"; }
        bool callable() const override { return true; }
        Value call(Interp&, CallArgs& args) override {
            if (cycle_) {
                if (args.pos.empty()) throw TemplateError("no items for cycling given");
                return args.pos[loop_->index_ % args.pos.size()];
            }
            // changed(*values): true on the first call and whenever the values differ.
            Value now = Value::new_tuple(args.pos);
            bool changed = loop_->last_changed_.empty() || !equals(loop_->last_changed_[0], now);
            loop_->last_changed_.assign(1, now);
            return Value::boolean(changed);
        }

      private:
        std::shared_ptr<LoopObj> loop_;
        bool cycle_;
    };

    const Stmt& stmt_;
    ScopePtr scope_;
    std::shared_ptr<const std::vector<Value>> items_;
    int depth_;
    std::vector<Value> last_changed_;
};

struct DepthGuard {
    DepthGuard(int& depth, int limit) : depth_(depth) {
        if (++depth_ > limit) {
            --depth_;
            throw TemplateError("maximum recursion depth (" + std::to_string(limit) +
                                " nested macro calls) exceeded");
        }
    }
    ~DepthGuard() { --depth_; }
    int& depth_;
};

struct NestingGuard {
    NestingGuard(int& nesting, int limit) : nesting_(nesting) {
        if (++nesting_ > limit) {
            --nesting_;
            throw TemplateError("template evaluation nested too deeply (limit " +
                                std::to_string(limit) + ")");
        }
    }
    ~NestingGuard() { --nesting_; }
    int& nesting_;
};

}  // namespace

Interp::Interp(const Program& program, const RenderOptions& options)
    : program_(program), options_(options) {
    loop_id_ = program_.find("loop");
    caller_id_ = program_.find("caller");
    varargs_id_ = program_.find("varargs");
    kwargs_id_ = program_.find("kwargs");
}

Interp::~Interp() {
    // Values never leave a render (the result is a string), so emptying everything that could
    // take part in a reference cycle is safe and frees what the cycles would leak.
    for (Value& v : mutated_) {
        if (v.is_list()) {
            v.list().items.clear();
        } else if (v.is_dict()) {
            v.dict().clear();
        } else if (v.is_object()) {
            v.object().clear_references();
        }
    }
    for (ScopePtr& s : captured_scopes_) s->clear();
}

std::tm Interp::now() const {
    if (options_.now) return options_.now();
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

Rendered Interp::render(const nlohmann::ordered_json& context) {
    auto globals = std::make_shared<Scope>(nullptr);
    for (std::size_t id = 0; id < program_.names.size(); ++id) {
        Value g = global_function(program_.names[id]);
        if (!g.is_undefined()) globals->set(static_cast<int>(id), std::move(g));
    }
    auto root = std::make_shared<Scope>(globals);
    if (context.is_object()) {
        // Only names the template mentions can ever be read, so only those are converted.
        for (auto it = context.begin(); it != context.end(); ++it) {
            int id = program_.find(it.key());
            if (id < 0) continue;
            const auto& marked = options_.content_variables;
            const bool content = std::find(marked.begin(), marked.end(), it.key()) != marked.end();
            tracks_content_ = tracks_content_ || content;
            root->set(id, from_json(it.value(), content));
        }
    } else if (!context.is_null()) {
        throw TemplateError("the template context must be a JSON object");
    }
    TextBuilder out;
    exec_body(program_.root, root, out);
    return Rendered{std::move(out.text), std::move(out.ranges)};
}

Value Interp::lookup(int id, const ScopePtr& scope) const {
    if (const Value* v = scope->find(id)) return *v;
    return Value::undefined("'" + program_.names[static_cast<std::size_t>(id)] + "' is undefined");
}

void Interp::append_output(TextBuilder& out, const Value& v) const {
    out.append(v);
    check_string_size(out.text.size());
}

Flow Interp::exec_body(const Body& body, const ScopePtr& scope, TextBuilder& out) {
    for (const StmtPtr& s : body) {
        Flow f = exec(*s, scope, out);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Flow Interp::exec(const Stmt& s, const ScopePtr& scope, TextBuilder& out) {
    step();
    NestingGuard nesting(nesting_, options_.limits.max_nesting);
    try {
        switch (s.kind) {
            case StmtKind::Text:
                out.append_text(s.text);
                check_string_size(out.text.size());
                return Flow::Normal;
            case StmtKind::Output:
                append_output(out, eval(*s.expr, scope));
                return Flow::Normal;
            case StmtKind::If:
                for (const auto& [cond, body] : s.branches) {
                    if (truthy(eval(*cond, scope))) return exec_body(body, scope, out);
                }
                return exec_body(s.else_body, scope, out);
            case StmtKind::For:
                run_for(s, scope, eval(*s.expr, scope), 0, out);
                return Flow::Normal;
            case StmtKind::Set:
                assign(s.target, scope, eval(*s.expr, scope));
                return Flow::Normal;
            case StmtKind::SetBlock:
                assign(s.target, scope, filtered_block(s, scope));
                return Flow::Normal;
            case StmtKind::Macro:
                captured_scopes_.push_back(scope);
                scope->set(s.target.ids[0], Value(std::static_pointer_cast<Object>(
                                                std::make_shared<MacroObj>(s.macro.get(), scope))));
                return Flow::Normal;
            case StmtKind::CallBlock: {
                captured_scopes_.push_back(scope);
                Value caller(std::static_pointer_cast<Object>(
                    std::make_shared<MacroObj>(s.macro.get(), scope)));
                const Expr& call = *s.expr;
                Value fn;
                if (call.a->kind == ExprKind::GetAttr) {
                    fn = getattr(eval(*call.a->a, scope), call.a->name);
                } else {
                    fn = eval(*call.a, scope);
                }
                CallArgs args;
                collect_args(call, scope, args);
                args.kw.emplace_back("caller", caller);
                append_output(out, this->call(fn, args));
                return Flow::Normal;
            }
            case StmtKind::FilterBlock:
                append_output(out, filtered_block(s, scope));
                return Flow::Normal;
            case StmtKind::With: {
                auto inner = std::make_shared<Scope>(scope);
                for (std::size_t i = 0; i < s.targets.size(); ++i) {
                    assign(s.targets[i], inner, eval(*s.values[i], scope));
                }
                return exec_body(s.body, inner, out);
            }
            case StmtKind::Break:
                return Flow::Break;
            case StmtKind::Continue:
                return Flow::Continue;
            case StmtKind::Do:
                eval(*s.expr, scope);
                return Flow::Normal;
            case StmtKind::Scope: {
                auto inner = std::make_shared<Scope>(scope);
                return exec_body(s.body, inner, out);
            }
            case StmtKind::Unsupported:
                throw TemplateError(s.text);
        }
    } catch (const TemplateError& e) {
        if (e.line() == 0) throw TemplateError(e.message(), s.line, s.column);
        throw;
    }
    return Flow::Normal;
}

Value Interp::filtered_block(const Stmt& s, const ScopePtr& scope) {
    TextBuilder buf;
    exec_body(s.body, scope, buf);
    Value v = buf.take();
    for (const ExprPtr& f : s.filters) v = eval_filter(*f, scope, v);
    return v;
}

void Interp::run_for(const Stmt& s, const ScopePtr& scope, const Value& iterable, int depth,
                     TextBuilder& out) {
    if (depth > options_.limits.max_call_depth) {
        throw TemplateError("maximum recursion depth (" +
                            std::to_string(options_.limits.max_call_depth) +
                            " nested recursive loop calls) exceeded");
    }
    std::vector<Value> items = iterate(iterable);
    if (s.cond) {
        // The loop filter sees the loop variables but not `loop`.
        auto fs = std::make_shared<Scope>(scope);
        std::vector<Value> kept;
        for (Value& item : items) {
            step();
            fs->clear();
            assign(s.target, fs, item);
            if (truthy(eval(*s.cond, fs))) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        auto es = std::make_shared<Scope>(scope);
        exec_body(s.else_body, es, out);
        return;
    }
    auto seq = std::make_shared<const std::vector<Value>>(std::move(items));
    std::shared_ptr<LoopObj> loop;
    Value loop_value;
    if (loop_id_ >= 0 || s.recursive) {
        loop = std::make_shared<LoopObj>(s, scope, seq, depth);
        loop_value = Value(std::static_pointer_cast<Object>(loop));
    }
    for (std::size_t i = 0; i < seq->size(); ++i) {
        step();
        auto it_scope = std::make_shared<Scope>(scope);
        assign(s.target, it_scope, (*seq)[i]);
        if (loop) {
            loop->index_ = i;
            if (loop_id_ >= 0) it_scope->set(loop_id_, loop_value);
        }
        Flow f = exec_body(s.body, it_scope, out);
        if (f == Flow::Break) break;
    }
}

}  // namespace ggufd::jinja

namespace ggufd::jinja {

void Interp::assign(const Target& t, const ScopePtr& scope, const Value& v) {
    switch (t.kind) {
        case Target::Kind::Name:
            scope->set(t.ids[0], v);
            return;
        case Target::Kind::Tuple: {
            std::vector<Value> parts = iterate(v);
            if (parts.size() != t.ids.size()) {
                if (parts.size() < t.ids.size()) {
                    throw TemplateError("not enough values to unpack (expected " +
                                        std::to_string(t.ids.size()) + ", got " +
                                        std::to_string(parts.size()) + ")");
                }
                throw TemplateError("too many values to unpack (expected " +
                                    std::to_string(t.ids.size()) + ")");
            }
            for (std::size_t i = 0; i < parts.size(); ++i) scope->set(t.ids[i], parts[i]);
            return;
        }
        case Target::Kind::NsAttr: {
            Value ns = lookup(t.ids[0], scope);
            auto* obj = ns.is_object() ? dynamic_cast<Namespace*>(&ns.object()) : nullptr;
            if (!obj) throw TemplateError("cannot assign attribute on non-namespace object");
            obj->attrs->set(t.attr, v);
            note_mutation(ns);
            return;
        }
    }
}

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
    step();
    NestingGuard nesting(nesting_, options_.limits.max_nesting);
    switch (e.kind) {
        case ExprKind::Const:
            return e.constant;
        case ExprKind::Name:
            return lookup(e.name_id, scope);
        case ExprKind::List:
        case ExprKind::Tuple: {
            std::vector<Value> items;
            items.reserve(e.items.size());
            for (const ExprPtr& item : e.items) items.push_back(eval(*item, scope));
            return e.kind == ExprKind::List ? Value::new_list(std::move(items))
                                            : Value::new_tuple(std::move(items));
        }
        case ExprKind::Dict: {
            auto d = std::make_shared<DictObj>();
            for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
                Value k = eval(*e.items[i], scope);
                if (k.is_dict() || (k.is_list() && k.list().seq == SeqKind::List)) {
                    throw TemplateError("unhashable type: '" + type_name(k) + "'");
                }
                d->set(std::move(k), eval(*e.items[i + 1], scope));
            }
            return Value(std::move(d));
        }
        case ExprKind::GetAttr:
            return getattr(eval(*e.a, scope), e.name);
        case ExprKind::GetItem:
            return getitem(eval(*e.a, scope), eval(*e.b, scope));
        case ExprKind::Slice:
            return eval_slice(e, scope);
        case ExprKind::Call:
            return eval_call(e, scope);
        case ExprKind::Filter:
            return eval_filter(e, scope, eval(*e.a, scope));
        case ExprKind::Test: {
            Value v = eval(*e.a, scope);
            if (!e.test) throw TemplateError("No test named '" + e.name + "'.");
            CallArgs args;
            collect_args(e, scope, args);
            return Value::boolean(e.test(*this, v, args) != e.negated);
        }
        case ExprKind::Not:
            return Value::boolean(!truthy(eval(*e.a, scope)));
        case ExprKind::Neg:
            return negate(eval(*e.a, scope));
        case ExprKind::Pos: {
            Value v = eval(*e.a, scope);
            if (v.is_bool()) return Value(v.as_int());
            if (v.is_number()) return v;
            if (v.is_undefined()) throw TemplateError(v.undefined_message());
            throw TemplateError("bad operand type for unary +: '" + type_name(v) + "'");
        }
        case ExprKind::Binary: {
            Value a = eval(*e.a, scope);
            Value b = eval(*e.b, scope);
            return binary_op(*this, e.bin_op, a, b);
        }
        case ExprKind::And: {
            Value a = eval(*e.a, scope);
            if (!truthy(a)) return a;
            return eval(*e.b, scope);
        }
        case ExprKind::Or: {
            Value a = eval(*e.a, scope);
            if (truthy(a)) return a;
            return eval(*e.b, scope);
        }
        case ExprKind::Compare:
            return Value::boolean(eval_compare(e, scope));
        case ExprKind::Concat: {
            TextBuilder s;
            for (const ExprPtr& item : e.items) {
                s.append(eval(*item, scope));
                check_string_size(s.text.size());
            }
            return s.take();
        }
        case ExprKind::Cond:
            if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
            if (e.c) return eval(*e.c, scope);
            return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                    " evaluated to false and no else section was defined.");
    }
    return Value();
}

bool Interp::eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.a, scope);
    for (std::size_t i = 0; i < e.cmp_ops.size(); ++i) {
        Value right = eval(*e.items[i], scope);
        bool ok = false;
        switch (e.cmp_ops[i]) {
            case CmpOp::Eq:
                ok = equals(left, right);
                break;
            case CmpOp::Ne:
                ok = !equals(left, right);
                break;
            case CmpOp::Lt:
                ok = compare(left, right) < 0;
                break;
            case CmpOp::Le:
                ok = compare(left, right) <= 0;
                break;
            case CmpOp::Gt:
                ok = compare(left, right) > 0;
                break;
            case CmpOp::Ge:
                ok = compare(left, right) >= 0;
                break;
            case CmpOp::In:
                ok = contains(right, left);
                break;
            case CmpOp::NotIn:
                ok = !contains(right, left);
                break;
        }
        if (!ok) return false;
        left = std::move(right);
    }
    return true;
}

Value Interp::eval_slice(const Expr& e, const ScopePtr& scope) {
    // The parser fills in the sliced object only when the slice is the whole subscript; inside a
    // tuple subscript (x[1:, 4]) Python would build a tuple key, which no value here accepts.
    if (!e.a) throw TemplateError("a slice must be the whole subscript, not part of a tuple");
    Value obj = eval(*e.a, scope);
    Value start = e.b ? eval(*e.b, scope) : Value::none();
    Value stop = e.c ? eval(*e.c, scope) : Value::none();
    Value step_v = e.d ? eval(*e.d, scope) : Value::none();
    std::optional<Value> r = slice(obj, start, stop, step_v);
    if (!r) return Value::undefined("'" + object_type_repr(obj) + "' has no element slice");
    return *r;
}

void Interp::collect_args(const Expr& e, const ScopePtr& scope, CallArgs& args) {
    args.pos.reserve(e.items.size());
    for (const ExprPtr& a : e.items) args.pos.push_back(eval(*a, scope));
    if (e.star_args) {
        for (Value& v : iterate(eval(*e.star_args, scope))) args.pos.push_back(std::move(v));
    }
    for (const auto& [k, v] : e.kwargs) args.kw.emplace_back(k, eval(*v, scope));
    if (e.star_kwargs) {
        Value d = eval(*e.star_kwargs, scope);
        if (!d.is_dict()) throw TemplateError("argument after ** must be a mapping");
        for (const auto& [k, v] : d.dict().entries) {
            if (!k.is_string()) throw TemplateError("keywords must be strings");
            if (k.content_ranges()) args.content_keywords = true;
            args.kw.emplace_back(k.str(), v);
        }
    }
}

Value Interp::eval_call(const Expr& e, const ScopePtr& scope) {
    const Expr& callee = *e.a;
    if (callee.kind == ExprKind::GetAttr) {
        Value obj = eval(*callee.a, scope);
        if ((obj.is_string() || obj.is_list() || obj.is_dict()) && has_method(obj, callee.name)) {
            CallArgs args;
            collect_args(e, scope, args);
            return call_method(*this, obj, callee.name, args);
        }
        Value fn = getattr(obj, callee.name);
        CallArgs args;
        collect_args(e, scope, args);
        return call(fn, args);
    }
    Value fn = eval(callee, scope);
    CallArgs args;
    collect_args(e, scope, args);
    return call(fn, args);
}

Value Interp::eval_filter(const Expr& e, const ScopePtr& scope, const Value& input) {
    if (!e.filter) throw TemplateError("No filter named '" + e.name + "'.");
    CallArgs args;
    collect_args(e, scope, args);
    return carry_content(e.filter(*this, input, args), &input, args);
}

Value Interp::call(const Value& callee, CallArgs& args) {
    if (callee.is_object() && callee.object().callable()) return callee.object().call(*this, args);
    if (callee.is_undefined()) throw TemplateError(callee.undefined_message());
    throw TemplateError("'" + type_name(callee) + "' object is not callable");
}

Value Interp::apply_filter(std::string_view name, const Value& input, CallArgs& args) {
    FilterFn f = find_filter(name);
    if (!f) throw TemplateError("No filter named '" + std::string(name) + "'.");
    return carry_content(f(*this, input, args), &input, args);
}

bool Interp::apply_test(std::string_view name, const Value& input, CallArgs& args) {
    TestFn t = find_test(name);
    if (!t) throw TemplateError("No test named '" + std::string(name) + "'.");
    return t(*this, input, args);
}

Value Interp::getattr(const Value& obj, std::string_view name) {
    switch (obj.kind()) {
        case Kind::Undefined:
            throw TemplateError(obj.undefined_message());
        case Kind::Dict:
            if (has_method(obj, name)) return bound_method(obj, name);
            if (const Value* v = obj.dict().find(name)) return *v;
            break;
        case Kind::List:
            if (const auto* fields = obj.list().fields) {
                for (std::size_t i = 0; i < fields->size() && i < obj.list().items.size(); ++i) {
                    if ((*fields)[i] == name) return obj.list().items[i];
                }
            }
            if (has_method(obj, name)) return bound_method(obj, name);
            break;
        case Kind::String:
            if (has_method(obj, name)) return bound_method(obj, name);
            break;
        case Kind::Object:
            return obj.object().get_attr(name);
        default:
            break;
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" +
                            std::string(name) + "'");
}

Value Interp::getitem(const Value& obj, const Value& key) {
    switch (obj.kind()) {
        case Kind::Undefined:
            throw TemplateError(obj.undefined_message());
        case Kind::Dict:
            if (const Value* v = obj.dict().find(key)) return *v;
            break;
        case Kind::List:
            if ((key.is_int() || key.is_bool()) && obj.list().seq != SeqKind::Iterator) {
                const auto& items = obj.list().items;
                if (auto i = normalize_index(key.as_int(), items.size())) return items[*i];
                return Value::undefined("'" + object_type_repr(obj) + "' has no element " +
                                        to_str(key));
            }
            break;
        case Kind::String:
            if (key.is_int() || key.is_bool()) {
                const std::string& s = obj.str();
                if (pystr::is_ascii(s)) {
                    if (auto i = normalize_index(key.as_int(), s.size())) {
                        return substring(obj, *i, *i + 1);
                    }
                } else {
                    std::vector<std::size_t> offs = pystr::offsets(s);
                    if (auto i = normalize_index(key.as_int(), offs.size() - 1)) {
                        return substring(obj, offs[*i], offs[*i + 1]);
                    }
                }
                return Value::undefined("'str object' has no element " + to_str(key));
            }
            break;
        case Kind::Object:
            if (key.is_string()) return obj.object().get_attr(key.str());
            break;
        default:
            break;
    }
    // Jinja2 falls back to the attribute of that name for string keys.
    if (key.is_string() && !obj.is_dict()) return getattr(obj, key.str());
    if (key.is_string() && has_method(obj, key.str())) return bound_method(obj, key.str());
    if (key.is_string()) {
        return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + key.str() +
                                "'");
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no element " + repr(key));
}

Value Interp::call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args,
                         const Value& caller) {
    DepthGuard guard(call_depth_, options_.limits.max_call_depth);
    auto sc = std::make_shared<Scope>(closure);
    const std::size_t np = def.params.size();
    std::vector<bool> bound(np, false);
    for (std::size_t i = 0; i < args.pos.size() && i < np; ++i) {
        sc->set(def.param_ids[i], args.pos[i]);
        bound[i] = true;
    }
    if (args.pos.size() > np && !def.uses_varargs) {
        throw TemplateError("macro '" + def.name + "' takes not more than " + std::to_string(np) +
                            " argument(s)");
    }
    Value caller_value = caller;
    auto kwargs = std::make_shared<DictObj>();
    for (auto& [k, v] : args.kw) {
        if (k == "caller") {
            caller_value = v;
            continue;
        }
        std::size_t i = 0;
        while (i < np && def.params[i] != k) ++i;
        if (i < np) {
            if (bound[i]) {
                throw TemplateError("macro '" + def.name + "' got multiple values for argument '" +
                                    k + "'");
            }
            sc->set(def.param_ids[i], v);
            bound[i] = true;
        } else if (def.uses_kwargs) {
            kwargs->set(keyword_name(k, args), v);
        } else {
            throw TemplateError("macro '" + def.name + "' takes no keyword argument '" + k + "'");
        }
    }
    for (std::size_t i = 0; i < np; ++i) {
        if (bound[i]) continue;
        if (def.defaults[i]) {
            sc->set(def.param_ids[i], eval(*def.defaults[i], sc));
        } else {
            sc->set(def.param_ids[i],
                    Value::undefined("parameter '" + def.params[i] + "' was not provided"));
        }
    }
    if (def.uses_varargs && varargs_id_ >= 0) {
        std::vector<Value> extra;
        for (std::size_t i = np; i < args.pos.size(); ++i) extra.push_back(args.pos[i]);
        sc->set(varargs_id_, Value::new_tuple(std::move(extra)));
    }
    if (def.uses_kwargs && kwargs_id_ >= 0) sc->set(kwargs_id_, Value(kwargs));
    if (!caller_value.is_undefined() && caller_id_ >= 0) sc->set(caller_id_, caller_value);
    TextBuilder out;
    exec_body(def.body, sc, out);
    return out.take();
}

}  // namespace ggufd::jinja
