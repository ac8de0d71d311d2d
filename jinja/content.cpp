#include "jinja/content.h"

#include <unordered_set>

namespace ggufd::jinja {

namespace {

// Values nested deeper than any real data (or cyclic) are treated as content rather than walked.
constexpr int kMaxDepth = 200;

// What a builtin's arguments hold: whether any content, and which strings and lists they
// contain, so that results passed through unchanged are told apart from results made anew.
struct ArgumentScan {
    bool content = false;
    std::unordered_set<const void*> seen;

    void visit(const Value& v, int depth) {
        if (depth > kMaxDepth) {
            content = true;
            return;
        }
        switch (v.kind()) {
            case Kind::String:
                seen.insert(v.identity());
                if (v.content_ranges()) content = true;
                return;
            case Kind::List:
                if (!seen.insert(v.identity()).second) return;
                for (const Value& item : v.list().items) visit(item, depth + 1);
                return;
            case Kind::Dict:
                if (!seen.insert(v.identity()).second) return;
                visit_entries(v.dict(), depth);
                return;
            case Kind::Object:
                if (const auto* ns = dynamic_cast<const Namespace*>(&v.object())) {
                    if (seen.insert(ns->attrs.get()).second) visit_entries(*ns->attrs, depth);
                }
                return;
            default:
                return;
        }
    }
    void visit_entries(const DictObj& d, int depth) {
        for (const auto& [k, val] : d.entries) {
            visit(k, depth + 1);
            visit(val, depth + 1);
        }
    }
};

// True when `v` is or (in lists) holds a non-empty string without content: only then can a
// builtin's result need marking.
bool has_plain_string(const Value& v, int depth) {
    if (depth > kMaxDepth) return true;
    if (v.is_string()) return !v.str().empty() && !v.content_ranges();
    if (!v.is_list()) return false;
    for (const Value& item : v.list().items) {
        if (has_plain_string(item, depth + 1)) return true;
    }
    return false;
}

Value mark_made(const Value& v, const ArgumentScan& scan, int depth) {
    if (v.is_string()) {
        if (v.str().empty() || v.content_ranges() || scan.seen.count(v.identity())) return v;
        return all_content(v);
    }
    if (!v.is_list() || scan.seen.count(v.identity()) || depth > kMaxDepth) return v;
    auto l = std::make_shared<ListObj>(v.list());
    for (Value& item : l->items) item = mark_made(item, scan, depth + 1);
    return Value(std::move(l));
}

}  // namespace

void add_range(ByteRanges& ranges, std::size_t begin, std::size_t end) {
    if (begin >= end) return;
    if (!ranges.empty() && begin <= ranges.back().second) {
        if (end > ranges.back().second) ranges.back().second = end;
        return;
    }
    ranges.emplace_back(begin, end);
}

Value substring(const Value& s, std::size_t begin, std::size_t end) {
    std::string text = s.str().substr(begin, end - begin);
    const ByteRanges* from = s.content_ranges();
    if (!from) return Value(std::move(text));
    ByteRanges ranges;
    for (const auto& [b, e] : *from) {
        if (e <= begin) continue;
        if (b >= end) break;
        add_range(ranges, std::max(b, begin) - begin, std::min(e, end) - begin);
    }
    return Value::content(std::move(text), std::move(ranges));
}

Value stripped(const Value& s, std::string kept, bool left, bool right) {
    if (!s.content_ranges()) return Value(std::move(kept));
    const std::string& text = s.str();
    // The kept part cannot start inside the stripped prefix: its first character would have
    // been stripped too.
    const std::size_t at = !left ? 0 : right ? text.find(kept) : text.size() - kept.size();
    if (at == std::string::npos) return all_content(Value(std::move(kept)));
    return substring(s, at, at + kept.size());
}

Value all_content(const Value& s) {
    const std::string& text = s.str();
    if (text.empty()) return s;
    return Value::content(text, {{0, text.size()}}, s.is_markup());
}

bool holds_content(const Value& v) {
    ArgumentScan scan;
    scan.visit(v, 0);
    return scan.content;
}

Value carry_content(Value result, const Value* input, const CallArgs& args) {
    if (!has_plain_string(result, 0)) return result;
    ArgumentScan scan;
    if (input) scan.visit(*input, 0);
    for (const Value& v : args.pos) scan.visit(v, 0);
    for (const auto& [k, v] : args.kw) scan.visit(v, 0);
    if (!scan.content && !args.content_keywords) return result;
    return mark_made(result, scan, 0);
}

Value keyword_name(const std::string& name, const CallArgs& args) {
    Value v(name);
    return args.content_keywords ? all_content(v) : v;
}

void TextBuilder::append(const Value& v) {
    const std::size_t at = text.size();
    if (v.is_string()) {
        text += v.str();
        if (const ByteRanges* from = v.content_ranges()) {
            for (const auto& [b, e] : *from) add_range(ranges, at + b, at + e);
        }
        return;
    }
    append_str(text, v);
    if (text.size() > at && holds_content(v)) add_range(ranges, at, text.size());
}

}  // namespace ggufd::jinja
