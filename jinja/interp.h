// Walks a Program to render it: one Interp per render, holding the scopes, the output buffers
// and the budget counters. Builtin filters, tests and methods call back into it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/chat_template.h"
#include "jinja/content.h"
#include "jinja/error.h"
#include "jinja/value.h"

namespace ggufd::jinja {

// Variables of one frame: the template top level, a loop iteration, a macro call, a with block.
// Lookups walk to the parent, which is how macros see their surroundings at call time.
class Scope {
  public:
    explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

    const Value* find(int id) const {
        for (const Scope* s = this; s; s = s->parent_.get()) {
            for (const auto& [k, v] : s->vars_) {
                if (k == id) return &v;
            }
        }
        return nullptr;
    }
    void set(int id, Value v) {
        for (auto& [k, old] : vars_) {
            if (k == id) {
                old = std::move(v);
                return;
            }
        }
        vars_.emplace_back(id, std::move(v));
    }
    void clear() { vars_.clear(); }
    const std::shared_ptr<Scope>& parent() const { return parent_; }

  private:
    std::shared_ptr<Scope> parent_;
    std::vector<std::pair<int, Value>> vars_;
};

using ScopePtr = std::shared_ptr<Scope>;

enum class Flow : std::uint8_t { Normal, Break, Continue };

class Interp {
  public:
    Interp(const Program& program, const RenderOptions& options);
    ~Interp();
    Interp(const Interp&) = delete;
    Interp& operator=(const Interp&) = delete;

    Rendered render(const nlohmann::ordered_json& context);

    // ---- services for builtins ----
    Value call(const Value& callee, CallArgs& args);
    // Jinja's sandboxed getattr (attribute first, then item) and getitem (item first).
    Value getattr(const Value& obj, std::string_view name);
    Value getitem(const Value& obj, const Value& key);
    Value apply_filter(std::string_view name, const Value& input, CallArgs& args);
    bool apply_test(std::string_view name, const Value& input, CallArgs& args);
    void step() {
        if (++steps_ > options_.limits.max_steps) {
            throw TemplateError("template exceeded its evaluation budget of " +
                                std::to_string(options_.limits.max_steps) + " steps");
        }
    }
    // Throws when a string being built would exceed the output limit.
    void check_string_size(std::size_t bytes) const {
        if (bytes > options_.limits.max_output_bytes) {
            throw TemplateError("template output exceeds " +
                                std::to_string(options_.limits.max_output_bytes) + " bytes");
        }
    }
    void check_list_size(std::size_t n) const {
        if (n > options_.limits.max_list_size) {
            throw TemplateError("list exceeds " + std::to_string(options_.limits.max_list_size) +
                                " elements");
        }
    }
    // A builtin's result, its strings made from content marked as content (see content.h);
    // free when the render has no content.
    Value carry_content(Value result, const Value* input, const CallArgs& args) const {
        if (!tracks_content_) return result;
        return jinja::carry_content(std::move(result), input, args);
    }
    // Containers mutated during the render; emptied at its end so cycles are freed.
    void note_mutation(const Value& container) { mutated_.push_back(container); }
    std::tm now() const;
    // The numbers |random draws from: splitmix64 from a fixed seed, restarted by every render,
    // so the same template and context always give the same prompt.
    std::uint64_t next_random() {
        std::uint64_t z = (random_state_ += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }

    // Runs a macro body (also caller() bodies) with arguments bound; returns its output.
    Value call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args,
                     const Value& caller);
    // Runs a for loop over `iterable` (also recursive loop(...) calls); output goes to `out`.
    void run_for(const Stmt& s, const ScopePtr& scope, const Value& iterable, int depth,
                 TextBuilder& out);

  private:
    Flow exec_body(const Body& body, const ScopePtr& scope, TextBuilder& out);
    Flow exec(const Stmt& s, const ScopePtr& scope, TextBuilder& out);
    // A set or filter block's body rendered, then passed through the block's filters.
    Value filtered_block(const Stmt& s, const ScopePtr& scope);
    Value eval(const Expr& e, const ScopePtr& scope);
    Value eval_call(const Expr& e, const ScopePtr& scope);
    void collect_args(const Expr& e, const ScopePtr& scope, CallArgs& args);
    Value eval_filter(const Expr& e, const ScopePtr& scope, const Value& input);
    Value eval_slice(const Expr& e, const ScopePtr& scope);
    bool eval_compare(const Expr& e, const ScopePtr& scope);
    void assign(const Target& t, const ScopePtr& scope, const Value& v);
    Value lookup(int id, const ScopePtr& scope) const;
    void append_output(TextBuilder& out, const Value& v) const;

    const Program& program_;
    const RenderOptions& options_;
    std::uint64_t steps_ = 0;
    std::uint64_t random_state_ = 0;
    int call_depth_ = 0;
    int nesting_ = 0;
    int loop_id_ = -1;
    int caller_id_ = -1;
    int varargs_id_ = -1;
    int kwargs_id_ = -1;
    bool tracks_content_ = false;
    std::vector<Value> mutated_;
    std::vector<ScopePtr> captured_scopes_;

    friend struct InterpAccess;
};

}  // namespace ggufd::jinja
