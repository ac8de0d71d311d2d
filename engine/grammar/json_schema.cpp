#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "text/json_escape.h"
#include "text/utf8.h"

namespace ggufd::grammar {

SchemaError::SchemaError(std::string pointer, const std::string& message)
    : std::invalid_argument(message + " (at " + (pointer.empty() ? "/" : pointer) + ")"),
      pointer_(std::move(pointer)) {}

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxGrammarBytes = size_t{8} << 20;
constexpr size_t kMaxProperties = 512;
constexpr int64_t kMaxBound = 1000000000000000000;  // 1e18
constexpr int kUnboundedDigits = 16;
constexpr size_t kMaxExcludedKey = 256;
constexpr size_t kInlineMember = 120;

// ---- GBNF spelling ---------------------------------------------------------------------------

void append_hex(std::string& out, uint32_t cp) {
    char buf[16];
    if (cp < 0x80) {
        std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    } else {
        std::snprintf(buf, sizeof buf, "\\U%08X", cp);
    }
    out += buf;
}

// One code point inside a string literal.
void append_literal_char(std::string& out, uint32_t cp) {
    if (cp == '"' || cp == '\\') {
        out += '\\';
        out += static_cast<char>(cp);
    } else if (cp >= 0x20 && cp < 0x7F) {
        out += static_cast<char>(cp);
    } else {
        append_hex(out, cp);
    }
}

// One code point inside a character class: everything but plain letters, digits and harmless
// punctuation is escaped, so ] - ^ \ never need the reader's context rules.
void append_class_char(std::string& out, uint32_t cp) {
    const bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
                       (cp >= '0' && cp <= '9') || cp == ' ' || cp == '_' || cp == '.' ||
                       cp == ',' || cp == ':' || cp == '/' || cp == '@' || cp == '+';
    if (plain) {
        out += static_cast<char>(cp);
    } else {
        append_hex(out, cp);
    }
}

// Decodes UTF-8 (nlohmann has validated strings it parsed; anything else is refused).
std::u32string decode_utf8(std::string_view s, const std::string& path) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
        const std::optional<uint32_t> cp = text::next_well_formed(s, i);
        if (!cp) throw SchemaError(path, "string is not valid UTF-8");
        out += static_cast<char32_t>(*cp);
    }
    return out;
}

std::string literal(std::string_view utf8, const std::string& path) {
    std::string out = "\"";
    for (char32_t cp : decode_utf8(utf8, path)) append_literal_char(out, cp);
    return out + "\"";
}

// How a decoded string character is written inside a JSON string (its one spelling here).
// Nesting of a value, measured without recursion (printing recurses once per level).
size_t nesting(const json& v) {
    size_t deepest = 0;
    std::vector<std::pair<const json*, size_t>> todo = {{&v, 1}};
    while (!todo.empty()) {
        const auto [at, depth] = todo.back();
        todo.pop_back();
        deepest = std::max(deepest, depth);
        if (at->is_structured()) {
            for (const json& e : *at) todo.emplace_back(&e, depth + 1);
        }
    }
    return deepest;
}

// A JSON value's compact text (refused when a string in it is not UTF-8).
std::string dump_value(const json& v, const std::string& path) {
    if (nesting(v) > kMaxDepth) throw SchemaError(path, "value nested too deeply");
    try {
        return v.dump();
    } catch (const nlohmann::json::exception&) {
        throw SchemaError(path, "string is not valid UTF-8");
    }
}

std::string alternation(const std::vector<std::string>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
    return out + " )";
}

// An upper bound that is not there (optional<> trips GCC's maybe-uninitialized here).
constexpr uint64_t kNoLimit = UINT64_MAX;

// `x` repeated lo..hi times; "" when it may not occur at all.
std::string repeat(const std::string& x, uint64_t lo, uint64_t hi) {
    if (hi == 0) return "";
    if (hi == kNoLimit) {
        if (lo == 0) return x + "*";
        if (lo == 1) return x + "+";
        return x + "{" + std::to_string(lo) + ",}";
    }
    if (lo == hi) return lo == 1 ? x : x + "{" + std::to_string(lo) + "}";
    if (lo == 0 && hi == 1) return x + "?";
    return x + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
}

std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) {
        if (p.empty()) continue;
        if (!out.empty()) out += ' ';
        out += p;
    }
    return out;
}

std::string pointer_token(std::string_view key) {
    std::string out;
    for (char c : key) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}

std::string child(const std::string& path, std::string_view key) {
    return path + "/" + pointer_token(key);
}

// ---- built-in rules --------------------------------------------------------------------------

struct Builtin {
    const char* name;
    const char* body;
    std::array<const char*, 6> uses;
};

// The JSON character rule writes no \u escape of a surrogate, so that string lengths counted by
// the grammar are the code points a validator counts.
const Builtin kBuiltins[] = {
    {"ws", R"(( " " | "\n" [ \x09]{0,32} )?)", {}},
    {"char",
     R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) ))",
     {}},
    {"key-char", R"([^"\\\x00-\x1F])", {}},
    {"string", R"("\"" char* "\"")", {"char"}},
    {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))", {}},
    {"number",
     R"("-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)",
     {}},
    {"boolean", R"("true" | "false")", {}},
    {"null", R"("null")", {}},
    {"value",
     "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object",
     R"("{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")",
     {"ws", "string", "value"}},
    {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")", {"ws", "value"}},
    {"date",
     R"([1-9] [0-9]{3} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | leap-year "-02-29")",
     {"leap-year"}},
    {"leap-year",
     R"([1-9] [0-9] ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [2468] [048] | [13579] [26] ) "00")",
     {}},
    {"time",
     R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
     {}},
    {"date-time", R"(date "T" time)", {"date", "time"}},
    {"uuid",
     R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})",
     {}},
};

const Builtin* find_builtin(std::string_view name) {
    for (const Builtin& b : kBuiltins) {
        if (name == b.name) return &b;
    }
    return nullptr;
}

// ---- keywords --------------------------------------------------------------------------------

// (`discriminator` is OpenAPI's, written by Pydantic beside oneOf: a hint, it admits no less.)
const std::set<std::string_view> kAnnotations = {
    "title",    "description", "examples", "default",   "$schema",       "$id",
    "$comment", "deprecated",  "readOnly", "writeOnly", "discriminator",
};
const std::set<std::string_view> kKeywords = {
    "type",
    "nullable",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
};
const std::set<std::string_view> kContainers = {"$defs", "definitions"};

bool is_annotation_or_container(std::string_view k) {
    return kAnnotations.count(k) != 0 || kContainers.count(k) != 0;
}

// Keywords that imply a type when `type` is absent.
const std::vector<std::pair<std::string_view, std::string_view>> kImpliedType = {
    {"properties", "object"},
    {"required", "object"},
    {"additionalProperties", "object"},
    {"items", "array"},
    {"prefixItems", "array"},
    {"additionalItems", "array"},
    {"minItems", "array"},
    {"maxItems", "array"},
    {"minLength", "string"},
    {"maxLength", "string"},
    {"pattern", "string"},
    {"format", "string"},
    {"minimum", "number"},
    {"maximum", "number"},
    {"exclusiveMinimum", "number"},
    {"exclusiveMaximum", "number"},
};
const std::vector<std::string_view> kTypeNames = {"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};

// ---- integer ranges --------------------------------------------------------------------------

std::string digit_class(char a, char b) {
    if (a == b) return std::string("\"") + a + "\"";
    return std::string("[") + a + "-" + b + "]";
}

std::string any_digits(size_t n) {
    if (n == 0) return "";
    if (n == 1) return "[0-9]";
    return "[0-9]{" + std::to_string(n) + "}";
}

// Numerals of equal length n between lo and hi (lo <= hi, both n digits, leading zeros allowed).
std::string same_length_range(const std::string& lo, const std::string& hi) {
    const size_t n = lo.size();
    if (n == 0) return "";
    if (lo == hi) return "\"" + lo + "\"";
    if (lo[0] == hi[0]) {
        return join({digit_class(lo[0], lo[0]), same_length_range(lo.substr(1), hi.substr(1))});
    }
    const bool lo_rest_zero = lo.find_first_not_of('0', 1) == std::string::npos;
    const bool hi_rest_nine = hi.find_first_not_of('9', 1) == std::string::npos;
    const char start = lo_rest_zero ? lo[0] : static_cast<char>(lo[0] + 1);
    const char end = hi_rest_nine ? hi[0] : static_cast<char>(hi[0] - 1);
    std::vector<std::string> alts;
    if (!lo_rest_zero) {
        alts.push_back(join(
            {digit_class(lo[0], lo[0]), same_length_range(lo.substr(1), std::string(n - 1, '9'))}));
    }
    if (start <= end) alts.push_back(join({digit_class(start, end), any_digits(n - 1)}));
    if (!hi_rest_nine) {
        alts.push_back(join(
            {digit_class(hi[0], hi[0]), same_length_range(std::string(n - 1, '0'), hi.substr(1))}));
    }
    return alternation(alts);
}

// Numerals without leading zeros for lo..hi (hi empty: no upper bound, up to kUnboundedDigits
// digits or lo's length).
std::vector<std::string> unsigned_range(uint64_t lo, uint64_t hi) {
    std::vector<std::string> alts;
    const std::string los = std::to_string(lo);
    if (hi != kNoLimit) {
        const std::string his = std::to_string(hi);
        for (size_t d = los.size(); d <= his.size(); ++d) {
            const std::string a = d == los.size() ? los : "1" + std::string(d - 1, '0');
            const std::string b = d == his.size() ? his : std::string(d, '9');
            alts.push_back(same_length_range(a, b));
        }
        return alts;
    }
    alts.push_back(same_length_range(los, std::string(los.size(), '9')));
    const size_t max_digits = std::max<size_t>(kUnboundedDigits, los.size());
    if (los.size() < max_digits) {
        alts.push_back("[1-9] " + repeat("[0-9]", los.size(), max_digits - 1));
    }
    return alts;
}

// A bound of the schema: value and whether it is exclusive.
struct Bound {
    double value;
    bool exclusive;
    std::string path;
};

// ---- the converter ---------------------------------------------------------------------------

class Converter {
  public:
    explicit Converter(const json& root) : root_(root) {
        for (const Builtin& b : kBuiltins) names_.insert(b.name);
    }

    std::string run() {
        ref_rule("", "");
        check_left_recursion();
        std::string out;
        for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
        for (const Builtin& b : kBuiltins) {
            if (used_.count(b.name)) out += std::string(b.name) + " ::= " + b.body + "\n";
        }
        if (out.size() > kMaxGrammarBytes) throw SchemaError("", "the grammar would be too large");
        return out;
    }

    std::string any_object() {
        std::string out = "root ::= " + use("object") + "\n";
        for (const Builtin& b : kBuiltins) {
            if (used_.count(b.name)) out += std::string(b.name) + " ::= " + b.body + "\n";
        }
        return out;
    }

  private:
    const json& root_;
    std::vector<std::pair<std::string, std::string>> rules_;
    std::map<std::string, size_t> rule_index_;  // name -> position in rules_
    std::set<std::string> names_;
    std::set<std::string> used_;
    std::map<std::string, std::string> ref_rules_;  // JSON pointer -> rule
    // Rules of referenced schemas each rule may begin with, without writing a character first.
    // (Each with the pointer of the $ref that leads there.)
    std::map<std::string, std::map<std::string, std::string>> leftmost_;
    std::map<std::string, std::string>* left_ =
        nullptr;  // the rule being written, while at its start
    int depth_ = 0;
    size_t bytes_ = 0;
    // The rule of a referenced schema being written: an object or array that is the whole schema
    // takes this name rather than one of its own.
    std::string reuse_;

    std::string use(const std::string& name) {
        if (used_.insert(name).second) {
            for (const char* dep : find_builtin(name)->uses) {
                if (dep) use(dep);
            }
        }
        return name;
    }

    std::string new_rule(const std::string& hint) {
        if (!reuse_.empty()) return std::exchange(reuse_, "");
        std::string base;
        for (char c : hint) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-';
            base += ok ? c : '-';
        }
        if (base.empty()) base = "schema";
        if (base.size() > 48) base.resize(48);
        std::string name = base;
        for (int i = 2; names_.count(name); ++i) name = base + "-" + std::to_string(i);
        names_.insert(name);
        rule_index_[name] = rules_.size();
        rules_.emplace_back(name, "");
        return name;
    }

    void define(const std::string& name, std::string body) {
        bytes_ += name.size() + body.size();
        if (bytes_ > kMaxGrammarBytes) throw SchemaError("", "the grammar would be too large");
        rules_[rule_index_.at(name)].second = std::move(body);
    }

    // A scope in which no character has been written yet, or (nullptr) one after some.
    struct LeftScope {
        Converter& c;
        std::map<std::string, std::string>* saved;
        LeftScope(Converter& conv, std::map<std::string, std::string>* now)
            : c(conv), saved(conv.left_) {
            c.left_ = now;
        }
        ~LeftScope() { c.left_ = saved; }
        LeftScope(const LeftScope&) = delete;
        LeftScope& operator=(const LeftScope&) = delete;
    };

    // ---- $ref ----

    const json* resolve(const std::string& pointer) const {
        const json* at = &root_;
        if (pointer.empty()) return at;
        if (pointer[0] != '/') return nullptr;  // "#x/y" is not a pointer, never "#/y" read loosely
        size_t pos = 1;
        while (true) {
            const size_t slash = pointer.find('/', pos);
            std::string token =
                pointer.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
            std::string key;
            for (size_t i = 0; i < token.size(); ++i) {
                if (token[i] == '~' && i + 1 < token.size() && token[i + 1] == '0') {
                    key += '~';
                    ++i;
                } else if (token[i] == '~' && i + 1 < token.size() && token[i + 1] == '1') {
                    key += '/';
                    ++i;
                } else if (token[i] == '~') {
                    return nullptr;
                } else {
                    key += token[i];
                }
            }
            if (at->is_object()) {
                const auto it = at->find(key);
                if (it == at->end()) return nullptr;
                at = &*it;
            } else if (at->is_array()) {
                if (key.empty() || key.size() > 9 ||
                    key.find_first_not_of("0123456789") != std::string::npos ||
                    (key.size() > 1 && key[0] == '0'))
                    return nullptr;
                const size_t index = std::stoul(key);
                if (index >= at->size()) return nullptr;
                at = &(*at)[index];
            } else {
                return nullptr;
            }
            if (slash == std::string::npos) return at;
            pos = slash + 1;
        }
    }

    static std::string percent_decode(const std::string& s, const std::string& path) {
        auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        };
        std::string out;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] != '%') {
                out += s[i];
                continue;
            }
            const int h = i + 2 < s.size() ? hex(s[i + 1]) : -1;
            const int l = i + 2 < s.size() ? hex(s[i + 2]) : -1;
            if (h < 0 || l < 0) throw SchemaError(path, "malformed percent escape in $ref");
            out += static_cast<char>(h * 16 + l);
            i += 2;
        }
        return out;
    }

    // The rule of the schema at `pointer` ("" is the whole document), written once.
    std::string ref_rule(const std::string& pointer, const std::string& ref_path) {
        if (const auto it = ref_rules_.find(pointer); it != ref_rules_.end()) {
            if (left_) left_->emplace(it->second, ref_path);
            return it->second;
        }
        const json* target = resolve(pointer);
        if (!target) throw SchemaError(ref_path, "$ref '#" + pointer + "' points to nothing");
        std::string hint = "root";
        if (!pointer.empty()) hint = pointer.substr(pointer.rfind('/') + 1);
        const std::string name = new_rule(hint);
        ref_rules_[pointer] = name;
        if (left_) left_->emplace(name, ref_path);
        std::string body;
        {
            LeftScope scope(*this, &leftmost_[name]);
            reuse_ = name;
            body = visit(*target, pointer, name);
            reuse_.clear();
        }
        if (body != name) define(name, body);
        return name;
    }

    void check_left_recursion() {
        // A cycle among "may begin with" edges would let the grammar recurse without reading.
        std::map<std::string, int> state;  // 1 on the path, 2 done
        for (const auto& [start, unused] : leftmost_) {
            (void)unused;
            if (state[start]) continue;
            std::vector<std::pair<std::string, std::map<std::string, std::string>::const_iterator>>
                path;  // iterative DFS: a node and its next edge
            path.emplace_back(start, leftmost_[start].cbegin());
            state[start] = 1;
            while (!path.empty()) {
                auto& [node, next] = path.back();
                if (next == leftmost_[node].cend()) {
                    state[node] = 2;
                    path.pop_back();
                    continue;
                }
                const auto [to, ref_path] = *next++;
                if (state[to] == 1)
                    throw SchemaError(ref_path,
                                      "$ref recursion that writes nothing before recursing");
                if (state[to] == 0) {
                    state[to] = 1;
                    path.emplace_back(to, leftmost_[to].cbegin());
                }
            }
        }
    }

    // ---- schemas ----

    std::string visit(const json& s, const std::string& path, const std::string& hint) {
        if (++depth_ > kMaxDepth) throw SchemaError(path, "schema nested too deeply");
        std::string out = visit_inner(s, path, hint);
        --depth_;
        return out;
    }

    void check_keywords(const json& s, const std::string& path) {
        for (const auto& [key, value] : s.items()) {
            (void)value;
            if (kAnnotations.count(key) || kKeywords.count(key)) continue;
            throw SchemaError(child(path, key), "unsupported keyword '" + key + "'");
        }
        for (const char* c : {"$defs", "definitions"}) {
            if (const auto it = s.find(c); it != s.end() && !it->is_object())
                throw SchemaError(child(path, c), std::string(c) + " must be an object");
        }
    }

    // Refuses any constraint keyword beside `keyword` other than those in `allowed`.
    void only_beside(const json& s, const std::string& path, std::string_view keyword,
                     std::initializer_list<std::string_view> allowed) {
        for (const auto& [key, value] : s.items()) {
            (void)value;
            if (key == keyword || is_annotation_or_container(key)) continue;
            if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
            throw SchemaError(child(path, key), "keyword '" + key + "' beside '" +
                                                    std::string(keyword) + "' is not supported");
        }
    }

    std::string visit_inner(const json& s, const std::string& path, const std::string& hint) {
        if (s.is_boolean()) {
            if (!s.get<bool>()) throw SchemaError(path, "schema false admits no value");
            return use("value");
        }
        if (!s.is_object()) throw SchemaError(path, "a schema must be an object or a boolean");
        check_keywords(s, path);
        std::string reuse = std::exchange(reuse_, "");

        if (const auto it = s.find("$ref"); it != s.end()) {
            only_beside(s, path, "$ref", {});
            const std::string rpath = child(path, "$ref");
            if (!it->is_string()) throw SchemaError(rpath, "$ref must be a string");
            const std::string ref = it->get<std::string>();
            if (ref.empty() || ref[0] != '#')
                throw SchemaError(rpath, "only local $ref ('#...') is supported");
            std::string pointer = percent_decode(ref.substr(1), rpath);
            if (!pointer.empty() && pointer[0] != '/')
                throw SchemaError(rpath, "$ref must be a JSON pointer ('#/...')");
            return ref_rule(pointer, rpath);
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (const auto it = s.find(key); it != s.end()) {
                only_beside(s, path, key, {});
                const std::string kpath = child(path, key);
                if (!it->is_array() || it->empty())
                    throw SchemaError(kpath, std::string(key) + " must be a non-empty array");
                std::vector<std::string> alts;
                for (size_t i = 0; i < it->size(); ++i) {
                    alts.push_back(visit((*it)[i], kpath + "/" + std::to_string(i),
                                         hint + "-" + std::to_string(i)));
                }
                return alternation(alts);
            }
        }
        if (s.contains("allOf")) {
            reuse_ = reuse;
            return visit_all_of(s, path, hint);
        }
        if (s.contains("enum") || s.contains("const")) return visit_enum(s, path);

        std::vector<std::string> types = schema_types(s, path);
        if (types.empty()) return use("value");
        if (types.size() == 1) reuse_ = reuse;
        std::vector<std::string> alts;
        for (const std::string& t : types) {
            if (t == "object") {
                alts.push_back(object_rule(object_spec(s, path), hint));
            } else if (t == "array") {
                alts.push_back(array_rule(s, path, hint));
            } else if (t == "string") {
                alts.push_back(string_expr(s, path));
            } else if (t == "integer") {
                alts.push_back(integer_expr(s, path));
            } else if (t == "number") {
                alts.push_back(number_expr(s, path));
            } else if (t == "boolean") {
                alts.push_back(use("boolean"));
            } else {
                alts.push_back(use("null"));
            }
        }
        return alternation(alts);
    }

    // The types a schema may take: `type`, else those its keywords imply; "nullable" adds null.
    std::vector<std::string> schema_types(const json& s, const std::string& path) {
        std::vector<std::string> types;
        auto add = [&](const json& t, const std::string& tpath) {
            if (!t.is_string()) throw SchemaError(tpath, "type names must be strings");
            const std::string name = t.get<std::string>();
            if (std::find(kTypeNames.begin(), kTypeNames.end(), name) == kTypeNames.end())
                throw SchemaError(tpath, "unknown type '" + name + "'");
            if (std::find(types.begin(), types.end(), name) != types.end())
                throw SchemaError(tpath, "type '" + name + "' given twice");
            types.push_back(name);
        };
        if (const auto it = s.find("type"); it != s.end()) {
            const std::string tpath = child(path, "type");
            if (it->is_array()) {
                if (it->empty()) throw SchemaError(tpath, "type must not be an empty array");
                for (size_t i = 0; i < it->size(); ++i)
                    add((*it)[i], tpath + "/" + std::to_string(i));
            } else {
                add(*it, tpath);
            }
        } else {
            for (const auto& [key, type] : kImpliedType) {
                if (!s.contains(key)) continue;
                if (std::find(types.begin(), types.end(), type) == types.end())
                    types.emplace_back(type);
            }
            if (types.empty() && !s.contains("nullable")) return types;
        }
        if (const auto it = s.find("nullable"); it != s.end()) {
            if (!it->is_boolean()) throw SchemaError(child(path, "nullable"), "must be a boolean");
            if (it->get<bool>() && std::find(types.begin(), types.end(), "null") == types.end())
                types.emplace_back("null");
            if (types.empty()) return {};
        }
        // An integer is a number: "number" alone covers both.
        const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
        if (has_number) std::erase(types, std::string("integer"));
        return types;
    }

    std::string visit_enum(const json& s, const std::string& path) {
        if (s.contains("enum") && s.contains("const"))
            throw SchemaError(child(path, "const"), "enum and const together are not supported");
        const char* key = s.contains("enum") ? "enum" : "const";
        only_beside(s, path, key, {"type", "nullable"});
        const std::string kpath = child(path, key);
        const json& v = s.at(key);
        std::vector<const json*> values;
        if (std::string_view(key) == "const") {
            values.push_back(&v);
        } else {
            if (!v.is_array() || v.empty())
                throw SchemaError(kpath, "enum must be a non-empty array");
            for (const json& e : v) values.push_back(&e);
        }
        std::vector<std::string> types;
        if (s.contains("type") || s.contains("nullable")) types = schema_types(s, path);
        std::vector<std::string> alts;
        std::set<std::string> seen;
        for (const json* e : values) {
            if (!types.empty() && !has_type(types, *e)) continue;
            const std::string text = dump_value(*e, kpath);
            if (seen.insert(text).second) alts.push_back(literal(text, kpath));
        }
        if (alts.empty()) throw SchemaError(kpath, "no value of the allowed types");
        return alternation(alts);
    }

    static bool has_type(const std::vector<std::string>& types, const json& v) {
        auto has = [&](std::string_view t) {
            return std::find(types.begin(), types.end(), t) != types.end();
        };
        switch (v.type()) {
            case json::value_t::null:
                return has("null");
            case json::value_t::boolean:
                return has("boolean");
            case json::value_t::string:
                return has("string");
            case json::value_t::array:
                return has("array");
            case json::value_t::object:
                return has("object");
            case json::value_t::number_integer:
            case json::value_t::number_unsigned:
                return has("integer") || has("number");
            case json::value_t::number_float: {
                const double d = v.get<double>();
                return has("number") || (has("integer") && std::isfinite(d) && d == std::floor(d));
            }
            default:
                return false;
        }
    }

    // ---- objects ----

    struct Prop {
        std::string name;
        const json* schema;
        std::string path;
        bool required = false;
    };
    struct ObjectSpec {
        std::vector<Prop> props;
        bool extra = false;                  // keys beyond the declared ones
        const json* extra_schema = nullptr;  // their values (nullptr: any value)
        std::string extra_path;
    };

    // Adds `s`'s object keywords to `spec`. The properties' order is the schema's.
    void add_object_keywords(const json& s, const std::string& path, ObjectSpec& spec,
                             bool merging) {
        const size_t first = spec.props.size();
        if (const auto it = s.find("properties"); it != s.end()) {
            const std::string ppath = child(path, "properties");
            if (!it->is_object()) throw SchemaError(ppath, "properties must be an object");
            for (const auto& [name, schema] : it->items()) {
                for (const Prop& p : spec.props) {
                    if (p.name == name)
                        throw SchemaError(child(ppath, name),
                                          "property '" + name + "' declared twice in allOf");
                }
                spec.props.push_back({name, &schema, child(ppath, name)});
                if (spec.props.size() > kMaxProperties)
                    throw SchemaError(ppath, "too many properties");
            }
        }
        if (const auto it = s.find("required"); it != s.end()) {
            const std::string rpath = child(path, "required");
            if (!it->is_array()) throw SchemaError(rpath, "required must be an array");
            for (size_t i = 0; i < it->size(); ++i) {
                const json& r = (*it)[i];
                const std::string ipath = rpath + "/" + std::to_string(i);
                if (!r.is_string()) throw SchemaError(ipath, "required names must be strings");
                auto p = std::find_if(
                    spec.props.begin() + (merging ? 0 : first), spec.props.end(),
                    [&](const Prop& q) { return q.name == r.get_ref<const std::string&>(); });
                if (p == spec.props.end())
                    throw SchemaError(ipath, "required property '" + r.get<std::string>() +
                                                 "' is not among the properties");
                p->required = true;
            }
        }
        const std::string apath = child(path, "additionalProperties");
        const auto it = s.find("additionalProperties");
        if (merging) {
            if (it != s.end() && !(it->is_boolean() && it->get<bool>()))
                throw SchemaError(apath,
                                  "additionalProperties in an allOf branch cannot be merged");
            return;
        }
        if (it == s.end()) {
            spec.extra = !s.contains("properties");
        } else if (it->is_boolean()) {
            spec.extra = it->get<bool>();
        } else if (it->is_object()) {
            spec.extra = true;
            if (!it->empty()) {
                spec.extra_schema = &*it;
                spec.extra_path = apath;
            }
        } else {
            throw SchemaError(apath, "additionalProperties must be a boolean or a schema");
        }
    }

    ObjectSpec object_spec(const json& s, const std::string& path) {
        ObjectSpec spec;
        add_object_keywords(s, path, spec, false);
        return spec;
    }

    std::string visit_all_of(const json& s, const std::string& path, const std::string& hint) {
        const std::string apath = child(path, "allOf");
        const json& parts = s.at("allOf");
        if (!parts.is_array() || parts.empty())
            throw SchemaError(apath, "allOf must be a non-empty array");
        bool alone = true;
        for (const auto& [key, value] : s.items()) {
            (void)value;
            if (key != "allOf" && !is_annotation_or_container(key)) alone = false;
        }
        if (alone && parts.size() == 1) return visit(parts[0], apath + "/0", hint);
        // Merge object schemas: the branches' and this schema's own object keywords.
        only_beside(s, path, "allOf", {"type", "properties", "required", "additionalProperties"});
        ObjectSpec spec;
        std::vector<std::pair<const json*, std::string>> branches;
        for (size_t i = 0; i < parts.size(); ++i) {
            branches.emplace_back(&parts[i], apath + "/" + std::to_string(i));
        }
        branches.emplace_back(&s, path);
        for (auto [branch, bpath] : branches) {
            // Follow $ref chains to the schema that is merged.
            for (int hops = 0; branch->is_object() && branch->contains("$ref"); ++hops) {
                const json& r = branch->at("$ref");
                if (hops > 32 || !r.is_string() || r.get<std::string>().rfind("#", 0) != 0)
                    throw SchemaError(child(bpath, "$ref"), "cannot merge this $ref in allOf");
                only_beside(*branch, bpath, "$ref", {});
                const std::string pointer =
                    percent_decode(r.get<std::string>().substr(1), child(bpath, "$ref"));
                if (!pointer.empty() && pointer[0] != '/')
                    throw SchemaError(child(bpath, "$ref"),
                                      "$ref must be a JSON pointer ('#/...')");
                const json* target = resolve(pointer);
                if (!target) throw SchemaError(child(bpath, "$ref"), "$ref points to nothing");
                branch = target;
                bpath = pointer;
            }
            if (!branch->is_object())
                throw SchemaError(bpath, "allOf branches must be object schemas to be merged");
            if (branch != &s) {
                check_keywords(*branch, bpath);
                only_beside(*branch, bpath, "properties",
                            {"type", "required", "additionalProperties"});
            }
            if (const auto t = branch->find("type"); t != branch->end() && *t != "object")
                throw SchemaError(child(bpath, "type"), "allOf branches must be objects to merge");
            add_object_keywords(*branch, bpath, spec, true);
        }
        return object_rule(spec, hint);
    }

    // Keys that are not one of `names`, spelled without escapes.
    std::string key_not_in(const std::vector<std::u32string>& names, const std::u32string& prefix) {
        std::vector<std::string> alts;
        std::set<char32_t> next;
        bool is_name = false;
        for (const auto& n : names) {
            if (n.size() < prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
            if (n.size() == prefix.size()) {
                is_name = true;
            } else {
                next.insert(n[prefix.size()]);
            }
        }
        if (!is_name) alts.push_back("\"\\\"\"");
        std::string other = "[^\"\\\\\\x00-\\x1F";
        for (char32_t c : next) {
            append_class_char(other, c);
            if (c == '"' || c == '\\' || c < 0x20) continue;  // cannot be spelled unescaped
            std::string lit = "\"";
            append_literal_char(lit, c);
            lit += "\"";
            alts.push_back(lit + " " + key_not_in(names, prefix + c));
        }
        other += "]";
        alts.push_back(other + " " + use("key-char") + "* \"\\\"\"");
        return alternation(alts);
    }

    std::string object_rule(const ObjectSpec& spec, const std::string& hint) {
        const std::string name = new_rule(hint);
        LeftScope scope(*this, nullptr);
        const std::string ws = use("ws");
        std::vector<std::string> members;
        for (const Prop& p : spec.props) {
            const std::string value = visit(*p.schema, p.path, name + "-" + p.name);
            std::string member = literal(dump_value(json(p.name), p.path), p.path) + " " + ws +
                                 " \":\" " + ws + " " + value + " " + ws;
            // Optional members appear in several alternatives: long ones are written once.
            if (!p.required && member.size() > kInlineMember) {
                const std::string rule = new_rule(name + "-" + p.name + "-kv");
                define(rule, member);
                member = rule;
            }
            members.push_back(std::move(member));
        }
        std::string extra;
        if (spec.extra) {
            std::string key;
            if (spec.props.empty()) {
                key = use("string");
            } else {
                std::vector<std::u32string> names;
                for (const Prop& p : spec.props) {
                    names.push_back(decode_utf8(p.name, p.path));
                    if (names.back().size() > kMaxExcludedKey)
                        throw SchemaError(p.path,
                                          "property names this long are not supported "
                                          "beside additionalProperties");
                }
                const std::string key_rule = new_rule(name + "-extra-key");
                define(key_rule, "\"\\\"\" " + key_not_in(names, U""));
                key = key_rule;
            }
            const std::string value =
                spec.extra_schema ? visit(*spec.extra_schema, spec.extra_path, name + "-extra")
                                  : use("value");
            extra = key + " " + ws + " \":\" " + ws + " " + value + " " + ws;
        }
        const size_t n = members.size();
        const std::string more_extra = spec.extra ? "( \",\" " + ws + " " + extra + " )*" : "";
        // after[i]: the members from i on once one has been written (each behind a comma).
        std::vector<std::string> after(n + 1);
        after[n] = more_extra;
        for (size_t i = n; i-- > 0;) {
            const std::string m = "\",\" " + ws + " " + members[i];
            after[i] = join({spec.props[i].required ? m : "( " + m + " )?", after[i + 1]});
        }
        // The alternatives for the first member written, starting the search at i.
        std::vector<std::string> alts;
        bool may_be_empty = true;
        for (size_t i = 0; i < n; ++i) {
            alts.push_back(join({members[i], after[i + 1]}));
            if (spec.props[i].required) {
                may_be_empty = false;
                break;
            }
        }
        if (may_be_empty && spec.extra) alts.push_back(join({extra, more_extra}));
        std::string inner;
        if (!alts.empty()) {
            inner = alts.size() == 1 ? "( " + alts[0] + " )" : alternation(alts);
            if (may_be_empty) inner += "?";
        }
        define(name, join({"\"{\"", ws, inner, "\"}\""}));
        return name;
    }

    // ---- arrays ----

    std::optional<uint64_t> count(const json& s, const std::string& path, const char* key) {
        const auto it = s.find(key);
        if (it == s.end()) return std::nullopt;
        const std::string kpath = child(path, key);
        uint64_t v = 0;
        if (it->is_number_unsigned()) {
            v = it->get<uint64_t>();
        } else if (it->is_number_integer() && it->get<int64_t>() >= 0) {
            v = static_cast<uint64_t>(it->get<int64_t>());
        } else if (it->is_number_float() && it->get<double>() >= 0 &&
                   it->get<double>() == std::floor(it->get<double>()) && it->get<double>() < 1e18) {
            v = static_cast<uint64_t>(it->get<double>());
        } else {
            throw SchemaError(kpath, std::string(key) + " must be a non-negative integer");
        }
        if (v > kMaxRepeat)
            throw SchemaError(kpath, std::string(key) + " above " + std::to_string(kMaxRepeat) +
                                         " is not supported");
        return v;
    }

    std::string array_rule(const json& s, const std::string& path, const std::string& hint) {
        const std::string name = new_rule(hint);
        LeftScope scope(*this, nullptr);
        const std::string ws = use("ws");
        if (const auto it = s.find("uniqueItems");
            it != s.end() && !(it->is_boolean() && !it->get<bool>()))
            throw SchemaError(child(path, "uniqueItems"), "uniqueItems is not supported");
        const uint64_t min = count(s, path, "minItems").value_or(0);
        const std::optional<uint64_t> max = count(s, path, "maxItems");
        if (max && *max < min) throw SchemaError(child(path, "maxItems"), "maxItems < minItems");

        std::vector<std::string> prefix;
        const json* prefix_items = nullptr;
        std::string prefix_path;
        const json* items = nullptr;
        std::string items_path;
        if (const auto it = s.find("prefixItems"); it != s.end()) {
            prefix_items = &*it;
            prefix_path = child(path, "prefixItems");
            if (s.contains("additionalItems"))
                throw SchemaError(child(path, "additionalItems"),
                                  "additionalItems beside prefixItems is not supported");
        }
        if (const auto it = s.find("items"); it != s.end()) {
            if (it->is_array()) {
                if (prefix_items)
                    throw SchemaError(child(path, "items"),
                                      "items must be a schema beside prefixItems");
                prefix_items = &*it;
                prefix_path = child(path, "items");
                if (const auto a = s.find("additionalItems"); a != s.end()) {
                    items = &*a;
                    items_path = child(path, "additionalItems");
                }
            } else {
                items = &*it;
                items_path = child(path, "items");
            }
        } else if (s.contains("additionalItems")) {
            throw SchemaError(child(path, "additionalItems"),
                              "additionalItems without an items array is not supported");
        }
        if (prefix_items && (!prefix_items->is_array()))
            throw SchemaError(prefix_path, "must be an array of schemas");
        // Items allowed after the prefix: `items` (absent: any value without a prefix, none with).
        bool extra = prefix_items == nullptr;
        std::string extra_expr;
        if (items && items->is_boolean()) {
            extra = items->get<bool>();
            if (extra) extra_expr = use("value");
        } else if (items) {
            extra = true;
            extra_expr = visit(*items, items_path, name + "-item");
        } else if (extra) {
            extra_expr = use("value");
        }
        const size_t k = prefix_items ? prefix_items->size() : 0;
        const size_t written = max ? std::min<uint64_t>(k, *max) : k;
        for (size_t i = 0; i < written; ++i) {
            prefix.push_back(visit((*prefix_items)[i], prefix_path + "/" + std::to_string(i),
                                   name + "-" + std::to_string(i)) +
                             " " + ws);
        }
        if (!extra && min > written)
            throw SchemaError(child(path, "minItems"), "minItems exceeds the items allowed");
        const uint64_t lo = min > written ? min - written : 0;
        uint64_t hi = kNoLimit;
        if (!extra) {
            hi = 0;
        } else if (max) {
            hi = *max - written;
        }
        std::vector<std::string> seq = {"\"[\"", ws};
        const std::string item = extra ? extra_expr + " " + ws : "";
        const std::string comma_item = "( \",\" " + ws + " " + item + " )";
        if (!prefix.empty()) {
            seq.push_back(prefix[0]);
            for (size_t i = 1; i < prefix.size(); ++i)
                seq.push_back("\",\" " + ws + " " + prefix[i]);
            if (extra) seq.push_back(repeat(comma_item, lo, hi));
        } else if (extra && hi != 0) {
            const uint64_t rest_hi = hi == kNoLimit ? kNoLimit : hi - 1;
            const std::string rest = repeat(comma_item, lo > 0 ? lo - 1 : 0, rest_hi);
            const std::string items_seq = join({item, rest});
            seq.push_back(lo == 0 ? "( " + items_seq + " )?" : items_seq);
        }
        seq.push_back("\"]\"");
        define(name, join(seq));
        return name;
    }

    // ---- strings ----

    std::string string_expr(const json& s, const std::string& path) {
        const std::optional<uint64_t> min_len = count(s, path, "minLength");
        const std::optional<uint64_t> max_len = count(s, path, "maxLength");
        const auto format = s.find("format");
        const auto pattern = s.find("pattern");
        const int constraints = (min_len || max_len) + (format != s.end()) + (pattern != s.end());
        if (constraints > 1) {
            const char* key = pattern != s.end() ? "pattern" : "format";
            throw SchemaError(child(path, key),
                              "only one of pattern, format and the lengths may constrain a string");
        }
        const std::string quote = "\"\\\"\"";
        if (format != s.end()) {
            const std::string fpath = child(path, "format");
            if (!format->is_string()) throw SchemaError(fpath, "format must be a string");
            const std::string f = format->get<std::string>();
            if (f != "date" && f != "time" && f != "date-time" && f != "uuid")
                throw SchemaError(fpath, "format '" + f + "' is not supported");
            return quote + " " + use(f) + " " + quote;
        }
        if (pattern != s.end()) {
            const std::string ppath = child(path, "pattern");
            if (!pattern->is_string()) throw SchemaError(ppath, "pattern must be a string");
            return quote + " " + regex_expr(pattern->get<std::string>(), ppath) + " " + quote;
        }
        if (max_len && min_len && *max_len < *min_len)
            throw SchemaError(child(path, "maxLength"), "maxLength < minLength");
        const std::string chars =
            repeat(use("char"), min_len.value_or(0), max_len.value_or(kNoLimit));
        return join({quote, chars, quote});
    }

    // ---- pattern ----

    struct CharSet {
        std::vector<std::pair<char32_t, char32_t>> ranges;
        bool negated = false;
        bool contains(char32_t c) const {
            bool in = false;
            for (auto [a, b] : ranges) in = in || (c >= a && c <= b);
            return in != negated;
        }
    };

    class Regex {
      public:
        Regex(Converter& conv, std::u32string pattern, std::string path)
            : c_(conv), p_(std::move(pattern)), path_(std::move(path)) {}

        std::string convert() {
            std::vector<std::string> branches;
            while (true) {
                bool start = false;
                if (pos_ < p_.size() && p_[pos_] == '^') {
                    start = true;
                    ++pos_;
                }
                std::vector<std::string> seq = sequence(true);
                bool end = false;
                if (pos_ < p_.size() && p_[pos_] == '$') {
                    end = true;
                    ++pos_;
                    if (pos_ < p_.size() && p_[pos_] != '|')
                        fail("'$' only at the end of a branch");
                }
                const std::string any = c_.use("char") + "*";
                branches.push_back(join({start ? "" : any, join(seq), end ? "" : any}));
                if (pos_ == p_.size()) break;
                if (p_[pos_] == ')') fail("unbalanced ')'");
                ++pos_;  // '|'
            }
            // An empty branch (e.g. "a|") matches the empty string.
            for (std::string& b : branches) {
                if (b.empty()) b = "\"\"";
            }
            return alternation(branches);
        }

      private:
        Converter& c_;
        std::u32string p_;
        std::string path_;
        size_t pos_ = 0;
        int depth_ = 0;

        [[noreturn]] void fail(const std::string& why) const {
            throw SchemaError(path_,
                              "pattern: " + why + " (at character " + std::to_string(pos_) + ")");
        }

        std::vector<std::string> sequence(bool top) {
            std::vector<std::string> seq;
            while (pos_ < p_.size()) {
                const char32_t c = p_[pos_];
                if (c == '|' || c == ')') break;
                if (c == '$' && top) break;
                std::string atom = this->atom();
                seq.push_back(quantified(atom));
            }
            return seq;
        }

        std::string alternatives() {
            std::vector<std::string> branches;
            while (true) {
                std::string s = join(sequence(false));
                branches.push_back(s.empty() ? "\"\"" : s);
                if (pos_ < p_.size() && p_[pos_] == '|') {
                    ++pos_;
                    continue;
                }
                break;
            }
            std::string out = "(";
            for (size_t i = 0; i < branches.size(); ++i) out += (i ? " | " : " ") + branches[i];
            return out + " )";
        }

        std::optional<uint64_t> number() {
            if (pos_ >= p_.size() || p_[pos_] < '0' || p_[pos_] > '9') return std::nullopt;
            uint64_t v = 0;
            while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
                v = v * 10 + (p_[pos_++] - '0');
                if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat));
            }
            return v;
        }

        std::string quantified(const std::string& atom) {
            if (pos_ >= p_.size()) return atom;
            const char32_t q = p_[pos_];
            uint64_t lo = 0;
            uint64_t hi = kNoLimit;
            if (q == '?') {
                hi = 1;
            } else if (q == '*') {
            } else if (q == '+') {
                lo = 1;
            } else if (q == '{') {
                ++pos_;
                const auto a = number();
                if (!a) fail("'{' must start a repetition {n}, {n,} or {n,m}");
                lo = *a;
                hi = *a;
                if (pos_ < p_.size() && p_[pos_] == ',') {
                    ++pos_;
                    hi = number().value_or(kNoLimit);
                }
                if (pos_ >= p_.size() || p_[pos_] != '}') fail("unterminated repetition");
                if (hi < lo) fail("repetition {n,m} with m < n");
            } else {
                return atom;
            }
            ++pos_;
            if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: the same strings match
            if (pos_ < p_.size() &&
                (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || p_[pos_] == '{'))
                fail("nothing to repeat");
            const std::string r = repeat(atom, lo, hi);
            return r.empty() ? "\"\"" : r;
        }

        std::string atom() {
            const char32_t c = p_[pos_++];
            switch (c) {
                case '(': {
                    if (++depth_ > kMaxDepth) fail("groups nested too deeply");
                    if (pos_ < p_.size() && p_[pos_] == '?') {
                        if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
                            pos_ += 2;
                        } else {
                            fail("lookaround and named groups are not supported");
                        }
                    }
                    std::string inner = alternatives();
                    if (pos_ >= p_.size() || p_[pos_] != ')') fail("unbalanced '('");
                    ++pos_;
                    --depth_;
                    return inner;
                }
                case '[':
                    return set_expr(bracket());
                case '.': {
                    CharSet dot;
                    dot.negated = true;
                    dot.ranges = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
                    return set_expr(dot);
                }
                case '\\': {
                    CharSet set;
                    if (escape(set, false)) return set_expr(set);
                    return char_expr(set.ranges[0].first);
                }
                case '^':
                    fail("'^' only at the start of a branch");
                case '$':
                    fail("'$' only at the end of a branch");
                case '*':
                case '+':
                case '?':
                case '{':
                    --pos_;
                    fail("nothing to repeat");
                default:
                    return char_expr(c);
            }
        }

        // After a backslash: adds to `set` a class (returns true) or one character (false).
        bool escape(CharSet& set, bool in_class) {
            if (pos_ >= p_.size()) fail("pattern ends with '\\'");
            const char32_t e = p_[pos_++];
            auto add_class = [&](std::initializer_list<std::pair<char32_t, char32_t>> r) {
                set.ranges.insert(set.ranges.end(), r.begin(), r.end());
                return true;
            };
            auto negated_class = [&](std::vector<std::pair<char32_t, char32_t>> r) {
                if (in_class) fail("\\D \\W \\S inside a class are not supported");
                set.negated = true;
                set.ranges = std::move(r);
                return true;
            };
            auto one = [&](char32_t cp) {
                set.ranges.push_back({cp, cp});
                return false;
            };
            switch (e) {
                case 'd':
                    return add_class({{'0', '9'}});
                case 'w':
                    return add_class({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
                case 's':
                    return add_class({{'\t', '\r'}, {' ', ' '}});
                case 'D':
                    return negated_class({{'0', '9'}});
                case 'W':
                    return negated_class({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
                case 'S':
                    return negated_class({{'\t', '\r'}, {' ', ' '}});
                case 't':
                    return one('\t');
                case 'n':
                    return one('\n');
                case 'r':
                    return one('\r');
                case 'f':
                    return one('\f');
                case 'v':
                    return one('\v');
                case '0':
                    if (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9')
                        fail("octal escapes are not supported");
                    return one(0);
                case 'x':
                    return one(hex(2));
                case 'u':
                    return one(hex(4));
                default:
                    break;
            }
            if (e >= '1' && e <= '9') fail("backreferences are not supported");
            if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
                fail(std::string("escape \\") + static_cast<char>(e) + " is not supported");
            return one(e);
        }

        char32_t hex(int n) {
            char32_t v = 0;
            for (int i = 0; i < n; ++i) {
                if (pos_ >= p_.size()) fail("truncated hex escape");
                const char32_t h = p_[pos_++];
                int d = -1;
                if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
                if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
                if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
                if (d < 0) fail("bad hex escape");
                v = v * 16 + static_cast<char32_t>(d);
            }
            if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate escapes are not supported");
            return v;
        }

        CharSet bracket() {
            CharSet set;
            if (pos_ < p_.size() && p_[pos_] == '^') {
                set.negated = true;
                ++pos_;
            }
            bool first = true;
            while (true) {
                if (pos_ >= p_.size()) fail("unterminated '['");
                if (p_[pos_] == ']' && !first) {
                    ++pos_;
                    break;
                }
                if (p_[pos_] == ']') {  // "[]" matches nothing in ECMA-262
                    fail("empty class");
                }
                first = false;
                char32_t lo = 0;
                if (!class_atom(set, lo)) continue;
                if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
                    ++pos_;
                    char32_t hi = 0;
                    CharSet scratch;
                    if (!class_atom(scratch, hi)) fail("a class cannot end a range");
                    if (hi < lo) fail("range out of order in class");
                    set.ranges.push_back({lo, hi});
                } else {
                    set.ranges.push_back({lo, lo});
                }
            }
            return set;
        }

        // One class member: a character (returns true, in `cp`) or an escape class added to set.
        bool class_atom(CharSet& set, char32_t& cp) {
            const char32_t c = p_[pos_++];
            if (c == '[') fail("nested classes are not supported");
            if (c != '\\') {
                cp = c;
                return true;
            }
            if (pos_ < p_.size() && p_[pos_] == 'b') {  // backspace inside a class
                ++pos_;
                cp = '\b';
                return true;
            }
            CharSet one;
            if (escape(one, true)) {
                set.ranges.insert(set.ranges.end(), one.ranges.begin(), one.ranges.end());
                return false;
            }
            cp = one.ranges[0].first;
            return true;
        }

        std::string char_expr(char32_t c) {
            std::string out = "\"";
            std::string escape;
            if (!text::append_json_escape(escape, c)) append_literal_char(out, c);
            for (char x : escape) append_literal_char(out, static_cast<unsigned char>(x));
            return out + "\"";
        }

        // The JSON spellings of the characters of `set`: the unescaped ones as one class, plus
        // the quote, backslash and control characters it holds, each as its escape.
        std::string set_expr(const CharSet& set) {
            std::string cls = set.negated ? "[^" : "[";
            bool any_member = set.negated;
            for (auto [a, b] : set.ranges) {
                // Members outside the quote, backslash and control characters, clipped.
                std::vector<std::pair<char32_t, char32_t>> parts;
                if (a < 0x20) a = 0x20;
                if (a > b) continue;
                if (a <= '"' && b >= '"') {
                    if (a < '"') parts.push_back({a, '"' - 1});
                    a = '"' + 1;
                }
                if (a <= '\\' && b >= '\\') {
                    if (a < '\\') parts.push_back({a, '\\' - 1});
                    a = '\\' + 1;
                }
                if (a <= b) parts.push_back({a, b});
                for (auto [x, y] : parts) {
                    if (x > y) continue;
                    any_member = true;
                    append_class_char(cls, x);
                    if (y != x) {
                        cls += '-';
                        append_class_char(cls, y);
                    }
                }
            }
            if (set.negated) cls += "\"\\\\\\x00-\\x1F";
            cls += "]";
            std::vector<std::string> alts;
            if (any_member) alts.push_back(cls);
            for (char32_t sp = 0; sp < 0x20; ++sp) {
                if (set.contains(sp)) alts.push_back(char_expr(sp));
            }
            if (set.contains('"')) alts.push_back(char_expr('"'));
            if (set.contains('\\')) alts.push_back(char_expr('\\'));
            if (alts.empty()) fail("class matches no character");
            return alternation(alts);
        }
    };

    std::string regex_expr(const std::string& pattern, const std::string& path) {
        Regex re(*this, decode_utf8(pattern, path), path);
        return re.convert();
    }

    // ---- numbers ----

    std::optional<Bound> bound(const json& s, const std::string& path, const char* key,
                               const char* draft4_flag, bool lower) {
        std::optional<Bound> out;
        if (const auto it = s.find(key); it != s.end()) {
            const std::string kpath = child(path, key);
            if (!it->is_number()) throw SchemaError(kpath, std::string(key) + " must be a number");
            out = Bound{it->get<double>(), false, kpath};
            if (const auto f = s.find(draft4_flag); f != s.end() && f->is_boolean())
                out->exclusive = f->get<bool>();
        }
        const std::string epath = child(path, draft4_flag);
        if (const auto e = s.find(draft4_flag); e != s.end() && !e->is_boolean()) {
            if (!e->is_number())
                throw SchemaError(epath, std::string(draft4_flag) + " must be a number");
            Bound b{e->get<double>(), true, epath};
            // Both given: the tighter one wins.
            if (!out || (lower ? b.value >= out->value : b.value <= out->value)) out = b;
        } else if (e != s.end() && e->get<bool>() && !s.contains(key)) {
            throw SchemaError(epath, std::string(draft4_flag) + " true needs " + key);
        }
        if (out && !(std::fabs(out->value) <= static_cast<double>(kMaxBound)))
            throw SchemaError(out->path, "bounds beyond 1e18 are not supported");
        return out;
    }

    std::string integer_expr(const json& s, const std::string& path) {
        const auto lo = bound(s, path, "minimum", "exclusiveMinimum", true);
        const auto hi = bound(s, path, "maximum", "exclusiveMaximum", false);
        if (!lo && !hi) return use("integer");
        // The whole numbers a..b; INT64_MIN / INT64_MAX stand for no bound (both beyond 1e18).
        int64_t a = INT64_MIN, b = INT64_MAX;
        if (lo) {
            double v = std::ceil(lo->value);
            if (lo->exclusive && v == lo->value) v += 1;
            a = static_cast<int64_t>(v);
        }
        if (hi) {
            double v = std::floor(hi->value);
            if (hi->exclusive && v == hi->value) v -= 1;
            b = static_cast<int64_t>(v);
        }
        if (a > b) throw SchemaError(hi->path, "the bounds admit no integer");
        std::vector<std::string> alts;
        if (b >= 0) {
            const uint64_t from = a > 0 ? static_cast<uint64_t>(a) : 0;
            for (auto& x : unsigned_range(from, hi ? static_cast<uint64_t>(b) : kNoLimit))
                alts.push_back(x);
        }
        if (a < 0) {
            const uint64_t from = b < 0 ? static_cast<uint64_t>(-b) : 1;
            const uint64_t to = lo ? static_cast<uint64_t>(-a) : kNoLimit;
            alts.push_back("\"-\" " + alternation(unsigned_range(from, to)));
        }
        return alternation(alts);
    }

    // Magnitudes m with lo < m (or <=) and m < hi (or <=), lo and hi whole numbers, as decimal
    // text: integer part, then an optional fraction.
    std::vector<std::string> magnitudes(uint64_t lo, bool lo_excl, uint64_t hi, bool hi_excl) {
        const std::string frac = "( \".\" [0-9]{1,16} )?";
        std::vector<std::string> alts;
        const uint64_t int_lo = lo_excl ? lo + 1 : lo;
        if (hi == kNoLimit) {
            alts.push_back(join({alternation(unsigned_range(int_lo, kNoLimit)), frac}));
        } else {
            if (hi >= 1 && int_lo <= hi - 1)
                alts.push_back(join({alternation(unsigned_range(int_lo, hi - 1)), frac}));
            if (!hi_excl && hi >= int_lo) alts.push_back("\"" + std::to_string(hi) + "\"");
        }
        if (lo_excl && lo < hi) alts.push_back("\"" + std::to_string(lo) + ".\" [0-9]{0,15} [1-9]");
        return alts;
    }

    std::string number_expr(const json& s, const std::string& path) {
        const auto lo = bound(s, path, "minimum", "exclusiveMinimum", true);
        const auto hi = bound(s, path, "maximum", "exclusiveMaximum", false);
        if (!lo && !hi) return use("number");
        for (const auto& b : {lo, hi}) {
            if (b && b->value != std::floor(b->value))
                throw SchemaError(b->path, "fractional bounds of numbers are not supported");
        }
        // a..b as whole numbers; INT64_MIN / INT64_MAX stand for no bound.
        const int64_t a = lo ? static_cast<int64_t>(lo->value) : INT64_MIN;
        const int64_t b = hi ? static_cast<int64_t>(hi->value) : INT64_MAX;
        const bool a_excl = lo && lo->exclusive;
        const bool b_excl = hi && hi->exclusive;
        if (a > b || (a == b && (a_excl || b_excl)))
            throw SchemaError(hi->path, "the bounds admit no number");
        std::vector<std::string> alts;
        // Zero and above.
        if (b > 0 || (b == 0 && !b_excl)) {
            const bool from_a = a >= 0;
            const auto m = magnitudes(from_a ? static_cast<uint64_t>(a) : 0, from_a && a_excl,
                                      hi ? static_cast<uint64_t>(b) : kNoLimit, b_excl);
            alts.insert(alts.end(), m.begin(), m.end());
        }
        // Below zero: x = -m.
        if (a < 0) {
            const bool from_b = b < 0;
            const auto m =
                magnitudes(from_b ? static_cast<uint64_t>(-b) : 0, from_b ? b_excl : true,
                           lo ? static_cast<uint64_t>(-a) : kNoLimit, a_excl);
            if (!m.empty()) alts.push_back("\"-\" " + alternation(m));
        }
        if (alts.empty()) throw SchemaError(path, "the bounds admit no number");
        return alternation(alts);
    }
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
    return Converter(schema).run();
}

std::string json_object_gbnf() {
    const nlohmann::ordered_json empty = nlohmann::ordered_json::object();
    return Converter(empty).any_object();
}

std::string gbnf_literal(std::string_view utf8) {
    return literal(utf8, "");
}

std::string gbnf_class_char(uint32_t cp) {
    std::string out;
    append_class_char(out, cp);
    return out;
}

std::string gbnf_sequence(const std::vector<std::string>& items) {
    return join(items);
}

}  // namespace ggufd::grammar
