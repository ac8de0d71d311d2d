// The global functions: range, dict, namespace, cycler, joiner, raise_exception, strftime_now.
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

// ---- globals ----

using GlobalFn = Value (*)(Interp&, CallArgs&);

class BuiltinFunction : public Object {
  public:
    BuiltinFunction(std::string name, GlobalFn fn) : name_(std::move(name)), fn_(fn) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    bool callable() const override { return true; }
    Value call(Interp& interp, CallArgs& args) override {
        return interp.carry_content(fn_(interp, args), nullptr, args);
    }
    std::string to_string() const override { return "<built-in function " + name_ + ">"; }

  private:
    std::string name_;
    GlobalFn fn_;
};

Value g_range(Interp& interp, CallArgs& a) {
    std::int64_t start = 0, stop = 0, step = 1;
    auto num = [](const Value& v) {
        if (v.is_int() || v.is_bool()) return v.as_int();
        throw TemplateError("'" + type_name(v) + "' object cannot be interpreted as an integer");
    };
    if (a.pos.size() == 1) {
        stop = num(a.pos[0]);
    } else if (a.pos.size() == 2 || a.pos.size() == 3) {
        start = num(a.pos[0]);
        stop = num(a.pos[1]);
        if (a.pos.size() == 3) step = num(a.pos[2]);
    } else {
        throw TemplateError("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    std::int64_t n = 0;
    if (step > 0 && stop > start) n = (stop - start + step - 1) / step;
    if (step < 0 && stop < start) n = (start - stop - step - 1) / -step;
    // Jinja2's sandbox refuses ranges above MAX_RANGE; so do we, before allocating anything.
    constexpr std::int64_t kMaxRange = 100000;
    if (n > kMaxRange) {
        throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                            std::to_string(kMaxRange) + ").");
    }
    interp.check_list_size(static_cast<std::size_t>(n));
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) items.emplace_back(start + i * step);
    return Value::new_list(std::move(items));
}

Value g_dict(Interp&, CallArgs& a) {
    auto d = std::make_shared<DictObj>();
    if (!a.pos.empty()) {
        const Value& src = a.pos[0];
        if (src.is_dict()) {
            for (const auto& [k, v] : src.dict().entries) d->set(k, v);
        } else {
            for (const Value& kv : iterate(src)) {
                std::vector<Value> p = iterate(kv);
                if (p.size() != 2) {
                    throw TemplateError("dictionary update sequence element has wrong length");
                }
                d->set(p[0], p[1]);
            }
        }
    }
    for (const auto& [k, v] : a.kw) d->set(keyword_name(k, a), v);
    return Value(std::move(d));
}

Value g_namespace(Interp&, CallArgs& a) {
    auto ns = std::make_shared<Namespace>();
    if (!a.pos.empty()) {
        if (!a.pos[0].is_dict()) throw TemplateError("namespace() takes a mapping");
        for (const auto& [k, v] : a.pos[0].dict().entries) ns->attrs->set(k, v);
    }
    for (const auto& [k, v] : a.kw) ns->attrs->set(keyword_name(k, a), v);
    return Value(std::static_pointer_cast<Object>(ns));
}

class Cycler : public Object {
  public:
    explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
    std::string type_name() const override { return "Cycler"; }
    Value get_attr(std::string_view name) const override {
        if (name == "current") return items_[pos_];
        if (name == "next" || name == "reset") {
            auto self = std::const_pointer_cast<Object>(
                std::static_pointer_cast<const Object>(self_.lock()));
            return Value(std::static_pointer_cast<Object>(std::make_shared<CyclerMethod>(
                std::static_pointer_cast<Cycler>(self), name == "next")));
        }
        return Object::get_attr(name);
    }
    std::weak_ptr<Cycler> self_;
    std::vector<Value> items_;
    std::size_t pos_ = 0;

  private:
    class CyclerMethod : public Object {
      public:
        CyclerMethod(std::shared_ptr<Cycler> c, bool next) : c_(std::move(c)), next_(next) {}
        std::string type_name() const override { return "method"; }
        bool callable() const override { return true; }
        Value call(Interp&, CallArgs&) override {
            if (!next_) {
                c_->pos_ = 0;
                return Value::none();
            }
            Value v = c_->items_[c_->pos_];
            c_->pos_ = (c_->pos_ + 1) % c_->items_.size();
            return v;
        }

      private:
        std::shared_ptr<Cycler> c_;
        bool next_;
    };
};

Value g_cycler(Interp&, CallArgs& a) {
    if (a.pos.empty()) throw TemplateError("at least one item has to be provided");
    auto c = std::make_shared<Cycler>(a.pos);
    c->self_ = c;
    return Value(std::static_pointer_cast<Object>(c));
}

class Joiner : public Object {
  public:
    explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
    std::string type_name() const override { return "Joiner"; }
    bool callable() const override { return true; }
    Value call(Interp&, CallArgs&) override {
        if (!used_) {
            used_ = true;
            return Value("");
        }
        return Value(sep_);
    }

  private:
    std::string sep_;
    bool used_ = false;
};

Value g_joiner(Interp&, CallArgs& a) {
    return Value(std::static_pointer_cast<Object>(
        std::make_shared<Joiner>(str_arg(a, 0, "sep").value_or(", "))));
}

Value g_raise_exception(Interp&, CallArgs& a) {
    throw TemplateError(a.pos.empty() ? std::string("raise_exception() called") : to_str(a.pos[0]));
}

Value g_strftime_now(Interp& interp, CallArgs& a) {
    std::string fmt = need_str(a.pos.empty() ? Value() : a.pos[0], "strftime_now()");
    std::tm tm = interp.now();
    if (fmt.empty()) return Value("");
    std::vector<char> buf(256);
    while (true) {
        std::size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
        if (n > 0) return Value(std::string(buf.data(), n));
        if (buf.size() > 65536) return Value("");
        buf.resize(buf.size() * 4);
    }
}

const std::unordered_map<std::string_view, GlobalFn>& globals() {
    static const std::unordered_map<std::string_view, GlobalFn> table = {
        {"range", g_range},
        {"dict", g_dict},
        {"namespace", g_namespace},
        {"cycler", g_cycler},
        {"joiner", g_joiner},
        {"raise_exception", g_raise_exception},
        {"strftime_now", g_strftime_now},
    };
    return table;
}

}  // namespace

Value global_function(std::string_view name) {
    auto it = globals().find(name);
    if (it == globals().end()) return Value();
    return Value(std::static_pointer_cast<Object>(
        std::make_shared<BuiltinFunction>(std::string(name), it->second)));
}

}  // namespace ggufd::jinja
