#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/builtins.h"
#include "jinja/error.h"

namespace ggufd::jinja {

namespace {

// Deeper nesting than this is certainly not a chat template, and recursing further could
// exhaust the stack of a server thread.
constexpr int kMaxParseDepth = 150;

class Parser {
  public:
    Parser(std::vector<Token> tokens, Program& program)
        : toks_(std::move(tokens)), prog_(program) {}

    Body parse_template() {
        std::string end;
        Body body = parse_body({}, end);
        return body;
    }

  private:
    // ---- token helpers ----
    const Token& cur() const { return toks_[pos_]; }
    const Token& peek(std::size_t k = 1) const {
        return toks_[std::min(pos_ + k, toks_.size() - 1)];
    }
    void next() {
        if (pos_ + 1 < toks_.size()) ++pos_;
    }
    bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
    bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(std::string_view n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case Tok::End:
                return "end of template";
            case Tok::VarEnd:
                return "end of print statement";
            case Tok::BlockEnd:
                return "end of statement block";
            case Tok::VarBegin:
                return "begin of print statement";
            case Tok::BlockBegin:
                return "begin of statement block";
            case Tok::String:
                return "string";
            case Tok::Int:
                return "integer";
            case Tok::Float:
                return "float";
            case Tok::Text:
                return "template data";
            default:
                return "'" + t.text + "'";
        }
    }

    [[noreturn]] void fail(const std::string& msg) const {
        throw TemplateError(msg, cur().line, cur().column);
    }
    [[noreturn]] void fail_at(const std::string& msg, int line, int column) const {
        throw TemplateError(msg, line, column);
    }

    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
    }
    void expect_block_end() {
        if (cur().type != Tok::BlockEnd) {
            fail("expected end of statement block, got " + describe(cur()));
        }
        next();
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) fail("expected name, got " + describe(cur()));
        std::string n = cur().text;
        next();
        return n;
    }

    struct DepthGuard {
        explicit DepthGuard(Parser& p) : p_(p) {
            if (++p_.depth_ > kMaxParseDepth) p_.fail("template nested too deeply");
        }
        ~DepthGuard() { --p_.depth_; }
        Parser& p_;
    };

    ExprPtr node(ExprKind k, const Token& at) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = at.line;
        e->column = at.column;
        return e;
    }
    StmtPtr stmt(StmtKind k, const Token& at) {
        auto s = std::make_unique<Stmt>();
        s->kind = k;
        s->line = at.line;
        s->column = at.column;
        return s;
    }

    // ---- statements ----

    // Parses statements until a block tag whose name is one of `ends` (consumed; its name is
    // stored in `which`), or the end of the template when `ends` is empty.
    Body parse_body(std::initializer_list<std::string_view> ends, std::string& which) {
        DepthGuard guard(*this);
        Body body;
        while (true) {
            const Token& t = cur();
            switch (t.type) {
                case Tok::Text: {
                    auto s = stmt(StmtKind::Text, t);
                    s->text = t.text;
                    body.push_back(std::move(s));
                    next();
                    break;
                }
                case Tok::VarBegin: {
                    auto s = stmt(StmtKind::Output, t);
                    next();
                    s->expr = parse_tuple(false, true, {}, false);
                    if (cur().type != Tok::VarEnd) {
                        fail("expected end of print statement, got " + describe(cur()));
                    }
                    next();
                    body.push_back(std::move(s));
                    break;
                }
                case Tok::BlockBegin: {
                    const Token& name = peek();
                    if (name.type == Tok::Name) {
                        for (std::string_view e : ends) {
                            if (name.text == e) {
                                which = name.text;
                                next();
                                next();
                                return body;
                            }
                        }
                    }
                    next();
                    body.push_back(parse_statement());
                    break;
                }
                case Tok::End: {
                    if (ends.size() == 0) return body;
                    std::string want;
                    for (std::string_view e : ends) {
                        if (!want.empty()) want += " or ";
                        want += "'" + std::string(e) + "'";
                    }
                    fail("Unexpected end of template. Jinja was looking for the following tags: " +
                         want + ".");
                }
                default:
                    fail("unexpected " + describe(t));
            }
        }
    }

    StmtPtr parse_statement() {
        const Token& t = cur();
        if (t.type != Tok::Name) fail("tag name expected");
        const std::string& n = t.text;
        if (n == "for") return parse_for();
        if (n == "if") return parse_if();
        if (n == "set") return parse_set();
        if (n == "macro") return parse_macro();
        if (n == "call") return parse_call_block();
        if (n == "filter") return parse_filter_block();
        if (n == "with") return parse_with();
        if (n == "break" || n == "continue") {
            if (loop_depth_ == 0) fail("'" + n + "' outside of a loop");
            auto s = stmt(n == "break" ? StmtKind::Break : StmtKind::Continue, t);
            next();
            expect_block_end();
            return s;
        }
        if (n == "do" || n == "print") {
            auto s = stmt(n == "do" ? StmtKind::Do : StmtKind::Output, t);
            next();
            s->expr = parse_tuple(false, true, {}, false);
            expect_block_end();
            return s;
        }
        if (n == "generation" || n == "block" || n == "autoescape") {
            // {% generation %} is Hugging Face's assistant-mask marker: its body renders as is.
            // A block without inheritance renders in place.
            auto s = stmt(StmtKind::Scope, t);
            std::string end = "end" + n;
            next();
            while (cur().type != Tok::BlockEnd && cur().type != Tok::End) next();
            expect_block_end();
            std::string which;
            if (n == "generation") {
                s->body = parse_body({"endgeneration"}, which);
            } else if (n == "block") {
                s->body = parse_body({"endblock"}, which);
            } else {
                s->body = parse_body({"endautoescape"}, which);
            }
            while (cur().type != Tok::BlockEnd && cur().type != Tok::End) next();
            expect_block_end();
            return s;
        }
        if (n == "include" || n == "import" || n == "from" || n == "extends") {
            auto s = stmt(StmtKind::Unsupported, t);
            s->text = "'" + n + "' is not supported: templates have no file access";
            while (cur().type != Tok::BlockEnd && cur().type != Tok::End) next();
            expect_block_end();
            return s;
        }
        fail("Encountered unknown tag '" + n + "'.");
    }

    StmtPtr parse_for() {
        auto s = stmt(StmtKind::For, cur());
        next();
        s->target = parse_assign_target(false);
        if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
        s->expr = parse_tuple(false, false, {"recursive"}, false);
        if (skip_name("if")) s->cond = parse_expression(true);
        s->recursive = skip_name("recursive");
        expect_block_end();
        ++loop_depth_;
        std::string which;
        s->body = parse_body({"endfor", "else"}, which);
        --loop_depth_;
        if (which == "else") {
            expect_block_end();
            s->else_body = parse_body({"endfor"}, which);
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_if() {
        auto s = stmt(StmtKind::If, cur());
        next();
        while (true) {
            ExprPtr cond = parse_tuple(false, false, {}, false);
            expect_block_end();
            std::string which;
            Body body = parse_body({"elif", "else", "endif"}, which);
            s->branches.emplace_back(std::move(cond), std::move(body));
            if (which == "elif") continue;
            if (which == "else") {
                expect_block_end();
                s->else_body = parse_body({"endif"}, which);
            }
            expect_block_end();
            return s;
        }
    }

    StmtPtr parse_set() {
        const Token& at = cur();
        next();
        Target target = parse_assign_target(true);
        if (skip_op("=")) {
            auto s = stmt(StmtKind::Set, at);
            s->target = std::move(target);
            s->expr = parse_tuple(false, true, {}, false);
            expect_block_end();
            return s;
        }
        auto s = stmt(StmtKind::SetBlock, at);
        s->target = std::move(target);
        while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
        expect_block_end();
        std::string which;
        s->body = parse_body({"endset"}, which);
        expect_block_end();
        return s;
    }

    // Parameters of a macro or call block: (a, b=default, ...).
    void parse_signature(MacroDef& def) {
        expect_op("(");
        while (!is_op(")")) {
            if (!def.params.empty()) expect_op(",");
            if (is_op(")")) break;
            std::string p = expect_name();
            def.param_ids.push_back(prog_.intern(p));
            def.params.push_back(p);
            if (skip_op("=")) {
                def.defaults.push_back(parse_expression(true));
            } else {
                for (const ExprPtr& d : def.defaults) {
                    if (d) fail("non-default argument follows default argument");
                }
                def.defaults.push_back(nullptr);
            }
        }
        expect_op(")");
    }

    StmtPtr parse_macro() {
        auto s = stmt(StmtKind::Macro, cur());
        next();
        s->macro = std::make_unique<MacroDef>();
        s->macro->name = expect_name();
        s->target.ids = {prog_.intern(s->macro->name)};
        parse_signature(*s->macro);
        expect_block_end();
        parse_macro_body(*s->macro, "endmacro");
        return s;
    }

    void parse_macro_body(MacroDef& def, std::string_view end) {
        macros_.push_back(&def);
        int saved_loops = loop_depth_;
        loop_depth_ = 0;
        std::string which;
        def.body = parse_body({end}, which);
        loop_depth_ = saved_loops;
        macros_.pop_back();
        // {% endmacro name %} is allowed for readability.
        if (cur().type == Tok::Name) next();
        expect_block_end();
    }

    StmtPtr parse_call_block() {
        auto s = stmt(StmtKind::CallBlock, cur());
        next();
        s->macro = std::make_unique<MacroDef>();
        s->macro->name = "caller";
        if (is_op("(")) parse_signature(*s->macro);
        s->expr = parse_expression(true);
        if (s->expr->kind != ExprKind::Call) fail("expected call");
        expect_block_end();
        parse_macro_body(*s->macro, "endcall");
        return s;
    }

    StmtPtr parse_filter_block() {
        auto s = stmt(StmtKind::FilterBlock, cur());
        next();
        do {
            s->filters.push_back(parse_filter(nullptr));
        } while (skip_op("|"));
        expect_block_end();
        std::string which;
        s->body = parse_body({"endfilter"}, which);
        expect_block_end();
        return s;
    }

    StmtPtr parse_with() {
        auto s = stmt(StmtKind::With, cur());
        next();
        while (cur().type != Tok::BlockEnd) {
            if (!s->targets.empty()) expect_op(",");
            s->targets.push_back(parse_assign_target(false));
            expect_op("=");
            s->values.push_back(parse_expression(true));
        }
        expect_block_end();
        std::string which;
        s->body = parse_body({"endwith"}, which);
        expect_block_end();
        return s;
    }

    Target parse_assign_target(bool with_namespace) {
        Target t;
        if (with_namespace && cur().type == Tok::Name && peek().type == Tok::Op &&
            peek().text == ".") {
            t.kind = Target::Kind::NsAttr;
            t.ids.push_back(prog_.intern(expect_name()));
            next();
            t.attr = expect_name();
            return t;
        }
        bool parens = skip_op("(");
        while (true) {
            if (cur().type != Tok::Name) fail("can't assign to " + describe(cur()));
            const std::string& n = cur().text;
            if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" ||
                n == "None") {
                fail("can't assign to constant '" + n + "'");
            }
            t.ids.push_back(prog_.intern(n));
            next();
            if (!is_op(",")) break;
            next();
            t.kind = Target::Kind::Tuple;
            if (parens && is_op(")")) break;
        }
        if (parens) {
            expect_op(")");
            t.kind = Target::Kind::Tuple;
        }
        return t;
    }

    // ---- expressions ----

    bool is_tuple_end(std::initializer_list<std::string_view> extra) const {
        if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::End ||
            is_op(")")) {
            return true;
        }
        for (std::string_view e : extra) {
            if (is_name(e)) return true;
        }
        return false;
    }

    ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                        std::initializer_list<std::string_view> extra_end, bool explicit_parens) {
        const Token& at = cur();
        std::vector<ExprPtr> args;
        bool is_tuple = false;
        while (true) {
            if (!args.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
            if (is_op(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
        }
        auto e = node(ExprKind::Tuple, at);
        e->items = std::move(args);
        return e;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        DepthGuard guard(*this);
        ExprPtr e = parse_or();
        while (is_name("if")) {
            const Token& at = cur();
            next();
            auto c = node(ExprKind::Cond, at);
            c->a = parse_or();
            c->b = std::move(e);
            if (skip_name("else")) c->c = parse_condexpr();
            e = std::move(c);
        }
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (is_name("or")) {
            auto e = node(ExprKind::Or, cur());
            next();
            e->a = std::move(left);
            e->b = parse_and();
            left = std::move(e);
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (is_name("and")) {
            auto e = node(ExprKind::And, cur());
            next();
            e->a = std::move(left);
            e->b = parse_not();
            left = std::move(e);
        }
        return left;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            DepthGuard guard(*this);
            auto e = node(ExprKind::Not, cur());
            next();
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token& at = cur();
        ExprPtr first = parse_math1();
        ExprPtr cmp;
        while (true) {
            CmpOp op;
            if (cur().type == Tok::Op &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                 cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
                const std::string& t = cur().text;
                op = t == "=="   ? CmpOp::Eq
                     : t == "!=" ? CmpOp::Ne
                     : t == "<"  ? CmpOp::Lt
                     : t == "<=" ? CmpOp::Le
                     : t == ">"  ? CmpOp::Gt
                                 : CmpOp::Ge;
                next();
            } else if (is_name("in")) {
                op = CmpOp::In;
                next();
            } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
                op = CmpOp::NotIn;
                next();
                next();
            } else {
                break;
            }
            if (!cmp) {
                cmp = node(ExprKind::Compare, at);
                cmp->a = std::move(first);
            }
            cmp->cmp_ops.push_back(op);
            cmp->items.push_back(parse_math1());
        }
        return cmp ? std::move(cmp) : std::move(first);
    }

    ExprPtr binary(BinOp op, ExprPtr l, ExprPtr r, const Token& at) {
        auto e = node(ExprKind::Binary, at);
        e->bin_op = op;
        e->a = std::move(l);
        e->b = std::move(r);
        return e;
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            Token at = cur();
            BinOp op = at.text == "+" ? BinOp::Add : BinOp::Sub;
            next();
            left = binary(op, std::move(left), parse_concat(), at);
        }
        return left;
    }

    ExprPtr parse_concat() {
        const Token& at = cur();
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        auto e = node(ExprKind::Concat, at);
        e->items.push_back(std::move(first));
        while (skip_op("~")) e->items.push_back(parse_math2());
        return e;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            Token at = cur();
            BinOp op = at.text == "*"    ? BinOp::Mul
                       : at.text == "/"  ? BinOp::Div
                       : at.text == "//" ? BinOp::FloorDiv
                                         : BinOp::Mod;
            next();
            left = binary(op, std::move(left), parse_pow(), at);
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (is_op("**")) {
            Token at = cur();
            next();
            left = binary(BinOp::Pow, std::move(left), parse_unary(true), at);
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            e = node(is_op("-") ? ExprKind::Neg : ExprKind::Pos, cur());
            next();
            e->a = parse_unary(false);
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr constant(Value v, const Token& at) {
        auto e = node(ExprKind::Const, at);
        e->constant = std::move(v);
        return e;
    }

    ExprPtr parse_primary() {
        DepthGuard guard(*this);
        const Token& t = cur();
        switch (t.type) {
            case Tok::Name: {
                const std::string& n = t.text;
                ExprPtr e;
                if (n == "true" || n == "True") {
                    e = constant(Value::boolean(true), t);
                } else if (n == "false" || n == "False") {
                    e = constant(Value::boolean(false), t);
                } else if (n == "none" || n == "None") {
                    e = constant(Value::none(), t);
                } else {
                    e = node(ExprKind::Name, t);
                    e->name = n;
                    e->name_id = prog_.intern(n);
                    if (!macros_.empty()) {
                        if (n == "kwargs") macros_.back()->uses_kwargs = true;
                        if (n == "varargs") macros_.back()->uses_varargs = true;
                        if (n == "caller") macros_.back()->uses_caller = true;
                    }
                }
                next();
                return e;
            }
            case Tok::String: {
                const Token& at = t;
                std::string s;
                while (cur().type == Tok::String) {
                    s += cur().text;
                    next();
                }
                return constant(Value(std::move(s)), at);
            }
            case Tok::Int: {
                auto e = constant(Value(t.ival), t);
                next();
                return e;
            }
            case Tok::Float: {
                auto e = constant(Value(t.fval), t);
                next();
                return e;
            }
            case Tok::Op:
                if (t.text == "(") {
                    next();
                    ExprPtr e = parse_tuple(false, true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (t.text == "[") {
                    auto e = node(ExprKind::List, t);
                    next();
                    while (!is_op("]")) {
                        if (!e->items.empty()) expect_op(",");
                        if (is_op("]")) break;
                        e->items.push_back(parse_expression(true));
                    }
                    expect_op("]");
                    return e;
                }
                if (t.text == "{") {
                    auto e = node(ExprKind::Dict, t);
                    next();
                    while (!is_op("}")) {
                        if (!e->items.empty()) expect_op(",");
                        if (is_op("}")) break;
                        e->items.push_back(parse_expression(true));
                        expect_op(":");
                        e->items.push_back(parse_expression(true));
                    }
                    expect_op("}");
                    return e;
                }
                [[fallthrough]];
            default:
                fail("unexpected " + describe(t));
        }
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            if (is_op(".") || is_op("[")) {
                e = parse_subscript(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (is_op("|")) {
                next();
                e = parse_filter(std::move(e));
            } else if (is_name("is")) {
                e = parse_test(std::move(e));
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr obj) {
        const Token at = cur();
        if (skip_op(".")) {
            if (cur().type == Tok::Name) {
                auto e = node(ExprKind::GetAttr, at);
                e->a = std::move(obj);
                e->name = cur().text;
                next();
                return e;
            }
            if (cur().type == Tok::Int) {
                auto e = node(ExprKind::GetItem, at);
                e->a = std::move(obj);
                e->b = constant(Value(cur().ival), cur());
                next();
                return e;
            }
            fail("expected name or number");
        }
        expect_op("[");
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        if (args.empty()) fail_at("expected subscript expression", at.line, at.column);
        ExprPtr index;
        if (args.size() == 1) {
            index = std::move(args[0]);
        } else {
            index = node(ExprKind::Tuple, at);
            index->items = std::move(args);
        }
        if (index->kind == ExprKind::Slice && !index->a) {
            index->a = std::move(obj);
            return index;
        }
        auto e = node(ExprKind::GetItem, at);
        e->a = std::move(obj);
        e->b = std::move(index);
        return e;
    }

    // One subscript: an expression or a slice [start:stop:step]. A slice node comes back with
    // a null `a` for the caller to fill in.
    ExprPtr parse_subscribed() {
        const Token at = cur();
        ExprPtr start;
        if (!is_op(":")) {
            start = parse_expression(true);
            if (!is_op(":")) return start;
        }
        next();  // ':'
        auto s = node(ExprKind::Slice, at);
        s->b = std::move(start);
        if (!is_op("]") && !is_op(",") && !is_op(":")) s->c = parse_expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) s->d = parse_expression(true);
        }
        return s;
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) {
                expect_op(",");
                if (is_op(")")) break;
            }
            first = false;
            if (skip_op("*")) {
                e.star_args = parse_expression(true);
            } else if (skip_op("**")) {
                e.star_kwargs = parse_expression(true);
            } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
                std::string key = cur().text;
                next();
                next();
                e.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!e.kwargs.empty() || e.star_kwargs) {
                    fail("positional argument follows keyword argument");
                }
                e.items.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = node(ExprKind::Call, cur());
        e->a = std::move(callee);
        parse_call_args(*e);
        return e;
    }

    std::string dotted_name() {
        std::string n = expect_name();
        while (is_op(".") && peek().type == Tok::Name) {
            next();
            n += "." + expect_name();
        }
        return n;
    }

    ExprPtr parse_filter(ExprPtr operand) {
        auto e = node(ExprKind::Filter, cur());
        e->a = std::move(operand);
        e->name = dotted_name();
        e->filter = find_filter(e->name);
        if (is_op("(")) parse_call_args(*e);
        return e;
    }

    ExprPtr parse_test(ExprPtr operand) {
        auto e = node(ExprKind::Test, cur());
        next();  // 'is'
        e->negated = skip_name("not");
        e->a = std::move(operand);
        e->name = dotted_name();
        e->test = find_test(e->name);
        const Token& t = cur();
        if (is_op("(")) {
            parse_call_args(*e);
        } else if ((t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Int ||
                    t.type == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail("You cannot chain multiple tests with is");
            e->items.push_back(parse_postfix(parse_primary()));
        }
        return e;
    }

    std::vector<Token> toks_;
    std::size_t pos_ = 0;
    Program& prog_;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<MacroDef*> macros_;
};

}  // namespace

std::shared_ptr<const Program> parse(std::string_view source, const LexOptions& options) {
    auto program = std::make_shared<Program>();
    Parser parser(lex(source, options), *program);
    program->root = parser.parse_template();
    return program;
}

}  // namespace ggufd::jinja
