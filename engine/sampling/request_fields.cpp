#include "engine/sampling/request_fields.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"

namespace ggufd::sampling {

namespace {

// InvalidParam in the order the HTTP layer's errors take their arguments: message first.
InvalidParam bad_request(const std::string& message, const std::string& param) {
    return InvalidParam(param, message);
}

std::string fmt_number(double v) {
    return fmt::format("{}", v);
}

}  // namespace

namespace fields {

namespace {

// The FieldReads active on this thread, if any.
thread_local FieldReads::Log* t_reads = nullptr;

// Deeper objects than requests ever nest are not followed (parse_json_body refuses beyond 64).
constexpr int kMaxReadDepth = 64;

// A path's components, each length-prefixed so that no key can be read as two.
void append_key(std::string& path, std::string_view key) {
    path += std::to_string(key.size());
    path += ':';
    path += key;
}

// An object's identity: its storage, which stays where it is while the json value holding it
// moves (a key added beside it).
const void* object_id(const RequestJson& object) {
    return &object.get_ref<const RequestJson::object_t&>();
}

}  // namespace

struct FieldReads::Log {
    struct Node {
        std::string path;
        // For a FieldAlias's copy: the keys that stand for the original's (the rest are the
        // translation's own).
        std::optional<std::unordered_set<std::string>> keys;
    };
    std::unordered_map<const void*, Node> nodes;
    std::unordered_set<std::string> read;     // the paths of the fields looked up
    std::unordered_set<std::string> touched;  // the paths of the objects looked up in

    // `object` and the objects within it (not within arrays) as `path`.
    void add(const RequestJson& object, const std::string& path, int depth,
             std::vector<const void*>* registered) {
        if (depth > kMaxReadDepth) return;
        for (const auto& [key, value] : object.items()) {
            if (!value.is_object()) continue;
            std::string inner = path;
            append_key(inner, key);
            add(value, inner, depth + 1, registered);
        }
        const void* id = object_id(object);
        nodes[id] = Node{path, std::nullopt};
        if (registered) registered->push_back(id);
    }

    void note(const RequestJson& object, std::string_view key) {
        const auto it = nodes.find(object_id(object));
        if (it == nodes.end()) return;
        const Node& node = it->second;
        if (node.keys && !node.keys->contains(std::string(key))) return;
        std::string path = node.path;
        append_key(path, key);
        read.insert(std::move(path));
        touched.insert(node.path);
    }

    void unread(const RequestJson& object, const std::string& path, const std::string& shown,
                int depth, std::vector<std::string>& out) const {
        if (depth > kMaxReadDepth || !touched.contains(path)) return;
        for (const auto& [key, value] : object.items()) {
            if (value.is_null()) continue;
            std::string inner = path;
            append_key(inner, key);
            std::string name = shown.empty() ? key : shown + "." + key;
            if (!read.contains(inner)) {
                out.push_back(std::move(name));
            } else if (value.is_object()) {
                unread(value, inner, name, depth + 1, out);
            }
        }
    }
};

FieldReads::FieldReads(const RequestJson& body)
    : log_(std::make_unique<Log>()), outer_(t_reads), body_(body) {
    if (body.is_object()) log_->add(body, std::string(), 0, nullptr);
    log_->touched.insert(std::string());
    t_reads = log_.get();
}

FieldReads::~FieldReads() {
    t_reads = outer_;
}

std::vector<std::string> FieldReads::unread() const {
    std::vector<std::string> out;
    if (body_.is_object()) log_->unread(body_, std::string(), std::string(), 0, out);
    return out;
}

FieldAlias::FieldAlias(const RequestJson& copy, const RequestJson& original) : log_(t_reads) {
    if (!log_ || !copy.is_object() || !original.is_object()) return;
    const auto it = log_->nodes.find(object_id(original));
    if (it == log_->nodes.end()) return;
    const std::string path = it->second.path;
    std::unordered_set<std::string> keys;
    for (const auto& [key, value] : copy.items()) {
        keys.insert(key);
        if (!value.is_object()) continue;
        std::string inner = path;
        append_key(inner, key);
        log_->add(value, inner, 1, &registered_);
    }
    const void* id = object_id(copy);
    log_->nodes[id] = FieldReads::Log::Node{path, std::move(keys)};
    registered_.push_back(id);
}

FieldAlias::~FieldAlias() {
    if (!log_) return;
    for (const void* id : registered_) log_->nodes.erase(id);
}

void note_all_read(const RequestJson& object) {
    if (!t_reads || !object.is_object()) return;
    for (const auto& [key, value] : object.items()) t_reads->note(object, key);
}

const RequestJson* field(const RequestJson& body, const char* name) {
    if (t_reads && body.is_object()) t_reads->note(body, name);
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

const RequestJson& required(const RequestJson& body, const char* name) {
    const RequestJson* v = field(body, name);
    if (!v) throw bad_request(fmt::format("'{}' is required", name), name);
    return *v;
}

bool get_bool(const RequestJson& body, const char* name, bool fallback) {
    const RequestJson* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean()) throw bad_request(fmt::format("'{}' must be a boolean", name), name);
    return v->get<bool>();
}

double get_number(const RequestJson& body, const char* name, double fallback, double lo, double hi,
                  Low low) {
    const RequestJson* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number()) throw bad_request(fmt::format("'{}' must be a number", name), name);
    double x = v->get<double>();
    const bool above_lo = low == Low::open ? x > lo : x >= lo;
    if (!(above_lo && x <= hi)) {
        // Closed ranges keep the wording "between lo and hi" that clients already see.
        const char* form = low == Low::open ? "'{}' must be greater than {} and at most {}, got {}"
                                            : "'{}' must be between {} and {}, got {}";
        throw bad_request(
            fmt::format(fmt::runtime(form), name, fmt_number(lo), fmt_number(hi), fmt_number(x)),
            name);
    }
    return x;
}

bool as_integer(const RequestJson& v, int64_t& out) {
    if (v.is_number_unsigned()) {
        auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
        out = static_cast<int64_t>(u);
        return true;
    }
    if (v.is_number_integer()) {
        out = v.get<int64_t>();
        return true;
    }
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (std::trunc(d) != d || std::abs(d) > 9.0e15) return false;
        out = static_cast<int64_t>(d);
        return true;
    }
    return false;
}

int64_t get_int(const RequestJson& body, const char* name, int64_t fallback, int64_t lo,
                int64_t hi) {
    const RequestJson* v = field(body, name);
    if (!v) return fallback;
    int64_t x = 0;
    if (!as_integer(*v, x)) {
        throw bad_request(fmt::format("'{}' must be an integer", name), name);
    }
    if (x < lo || x > hi) {
        throw bad_request(fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x),
                          name);
    }
    return x;
}

std::string string_value(const RequestJson& v, const char* name) {
    if (!v.is_string()) throw bad_request(fmt::format("'{}' must be a string", name), name);
    return v.get<std::string>();
}

std::string get_string(const RequestJson& body, const char* name) {
    const RequestJson* v = field(body, name);
    return v ? string_value(*v, name) : std::string();
}

}  // namespace fields

namespace {

using namespace fields;

std::vector<std::string> parse_stop(const RequestJson& body, const FieldLimits& limits) {
    const RequestJson* v = field(body, "stop");
    if (!v) return {};
    std::vector<std::string> stops;
    if (v->is_string()) {
        stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        for (const auto& s : *v) {
            if (!s.is_string()) {
                throw bad_request("'stop' must be a string or an array of strings", "stop");
            }
            stops.push_back(s.get<std::string>());
        }
    } else {
        throw bad_request("'stop' must be a string or an array of strings", "stop");
    }
    if (stops.size() > static_cast<size_t>(limits.max_stop)) {
        throw bad_request(fmt::format("'stop' may hold at most {} strings, got {}", limits.max_stop,
                                      stops.size()),
                          "stop");
    }
    for (const auto& s : stops) {
        if (s.empty() || s.size() > limits.max_stop_bytes) {
            throw bad_request(
                fmt::format("each 'stop' string must be 1 to {} bytes long", limits.max_stop_bytes),
                "stop");
        }
    }
    return stops;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const RequestJson& body,
                                                        const FieldLimits& limits) {
    const RequestJson* v = field(body, "logit_bias");
    if (!v) return {};
    if (!v->is_object()) {
        throw bad_request("'logit_bias' must be an object of token id -> bias", "logit_bias");
    }
    if (v->size() > static_cast<size_t>(limits.max_logit_bias)) {
        throw bad_request(fmt::format("'logit_bias' may hold at most {} entries, got {}",
                                      limits.max_logit_bias, v->size()),
                          "logit_bias");
    }
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, value] : v->items()) {
        int64_t id = -1;
        bool digits = !key.empty() && key.size() <= 10 &&
                      key.find_first_not_of("0123456789") == std::string::npos;
        if (digits) id = std::stoll(key);
        if (!digits || id > std::numeric_limits<int32_t>::max()) {
            throw bad_request(fmt::format("'logit_bias' keys must be token ids, got '{}'", key),
                              "logit_bias");
        }
        if (!value.is_number()) {
            throw bad_request(
                fmt::format("'logit_bias[{}]' must be a number between -100 and 100", key),
                "logit_bias");
        }
        double bias = value.get<double>();
        if (!(bias >= -100.0 && bias <= 100.0)) {
            throw bad_request(fmt::format("'logit_bias[{}]' must be between -100 and 100, got {}",
                                          key, fmt_number(bias)),
                              "logit_bias");
        }
        out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
    return out;
}

std::vector<std::string> parse_dry_breakers(const RequestJson& body, const FieldLimits& limits,
                                            std::vector<std::string> fallback) {
    const RequestJson* v = field(body, "dry_sequence_breakers");
    if (!v) return fallback;
    if (!v->is_array()) {
        throw bad_request("'dry_sequence_breakers' must be an array of strings",
                          "dry_sequence_breakers");
    }
    if (v->size() > static_cast<size_t>(limits.max_dry_breakers)) {
        throw bad_request(fmt::format("'dry_sequence_breakers' may hold at most {} strings, got {}",
                                      limits.max_dry_breakers, v->size()),
                          "dry_sequence_breakers");
    }
    std::vector<std::string> out;
    for (const auto& b : *v) {
        const std::string text = string_value(b, "dry_sequence_breakers");
        if (text.empty() || text.size() > limits.max_dry_breaker_bytes) {
            throw bad_request(fmt::format("each 'dry_sequence_breakers' string must be 1 to {} "
                                          "bytes long",
                                          limits.max_dry_breaker_bytes),
                              "dry_sequence_breakers");
        }
        out.push_back(text);
    }
    return out;
}

// The steps llama-server's `samplers` list may name, in the chain's own order (sampler.h), with
// llama-server's names, aliases and one-letter codes.
enum class Step { penalties, dry, top_n_sigma, top_k, typical_p, top_p, min_p, xtc, temperature };
static_assert(static_cast<int>(Step::temperature) - static_cast<int>(Step::top_n_sigma) ==
              static_cast<int>(SamplerStep::temperature));
struct StepName {
    std::string_view name;
    char code;  // 0: a name only
    Step step;
};
constexpr StepName kStepNames[] = {
    {"penalties", 'e', Step::penalties},
    {"dry", 'd', Step::dry},
    {"top_n_sigma", 's', Step::top_n_sigma},
    {"top-n-sigma", 0, Step::top_n_sigma},
    {"top_k", 'k', Step::top_k},
    {"top-k", 0, Step::top_k},
    {"typ_p", 'y', Step::typical_p},
    {"typ-p", 0, Step::typical_p},
    {"typical_p", 0, Step::typical_p},
    {"typical-p", 0, Step::typical_p},
    {"typical", 0, Step::typical_p},
    {"typ", 0, Step::typical_p},
    {"top_p", 'p', Step::top_p},
    {"top-p", 0, Step::top_p},
    {"nucleus", 0, Step::top_p},
    {"min_p", 'm', Step::min_p},
    {"min-p", 0, Step::min_p},
    {"xtc", 'x', Step::xtc},
    {"temperature", 't', Step::temperature},
    {"temp", 0, Step::temperature},
};
constexpr std::string_view kOrder =
    "penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature";

// `samplers`: an array of names or a string of one-letter codes (as llama-server reads it). A
// step the list leaves out is turned off, as llama-server runs only the listed ones; the steps
// after the logit changes run in the list's order (SamplingParams::order, when it is not the
// chain's own); mirostat has its own steps and ignores the list, as llama-server's does.
void apply_sampler_order(const RequestJson& body, SamplingParams& s) {
    const RequestJson* v = field(body, "samplers");
    if (!v) return;
    std::vector<std::string> entries;
    if (v->is_string()) {
        for (char c : v->get_ref<const std::string&>()) entries.emplace_back(1, c);
    } else if (v->is_array()) {
        for (const auto& e : *v) entries.push_back(string_value(e, "samplers"));
    } else {
        throw bad_request(
            "'samplers' must be an array of sampler names or a string of their "
            "one-letter codes",
            "samplers");
    }
    bool listed[static_cast<size_t>(Step::temperature) + 1] = {};
    std::vector<Step> order;
    std::string_view first_step;  // the first entry past the logit changes
    for (const std::string& entry : entries) {
        const auto* known =
            std::find_if(std::begin(kStepNames), std::end(kStepNames), [&](const StepName& n) {
                return entry.size() == 1 ? n.code == entry[0] : n.name == entry;
            });
        if (known == std::end(kStepNames)) {
            throw bad_request(
                fmt::format("'samplers' entry '{}' is not a sampler ggufd runs (it runs {})", entry,
                            kOrder),
                "samplers");
        }
        const int at = static_cast<int>(known->step);
        if (listed[at]) {
            throw bad_request(fmt::format("'samplers' lists '{}' twice", entry), "samplers");
        }
        if (known->step == Step::penalties || known->step == Step::dry) {
            if (!first_step.empty()) {
                throw bad_request(fmt::format("'samplers' entry '{}' comes after '{}': penalties "
                                              "and DRY change the logits every other step reads, "
                                              "so ggufd runs them first",
                                              entry, first_step),
                                  "samplers");
            }
        } else {
            if (first_step.empty()) first_step = known->name;
            order.push_back(known->step);
        }
        listed[at] = true;
    }
    if (s.mirostat != 0) return;
    if (!std::is_sorted(order.begin(), order.end())) {
        // Step and SamplerStep name the steps after the logit changes in the same order.
        for (Step step : order) {
            s.order.push_back(static_cast<SamplerStep>(static_cast<int>(step) -
                                                       static_cast<int>(Step::top_n_sigma)));
        }
    }
    auto off = [&](Step step) { return !listed[static_cast<size_t>(step)]; };
    if (off(Step::penalties)) {
        s.repeat_penalty = 1.0f;
        s.presence_penalty = 0.0f;
        s.frequency_penalty = 0.0f;
    }
    if (off(Step::dry)) s.dry_multiplier = 0.0f;
    if (off(Step::top_n_sigma)) s.top_n_sigma = -1.0f;
    if (off(Step::top_k)) s.top_k = 0;
    if (off(Step::typical_p)) s.typical_p = 1.0f;
    if (off(Step::top_p)) s.top_p = 1.0f;
    if (off(Step::min_p)) s.min_p = 0.0f;
    if (off(Step::xtc)) s.xtc_probability = 0.0f;
    // Without the temperature step the draw is at temperature 1, as llama-server's; but a request
    // for greedy decoding (temperature 0) stays greedy whatever the list says: llama.vscode sends
    // a list without "temperature", and a client asking for 0 means the most likely text.
    if (off(Step::temperature)) {
        if (s.temperature > 0.0f) s.temperature = 1.0f;
        s.dynatemp_range = 0.0f;
    }
}

// llama-server's sampling fields for what ggufd does not do: accepted at the value that asks
// for nothing, else refused naming the field, so that a client never silently gets other
// sampling than it asked for.
void refuse_unsupported(const RequestJson& body) {
    if (get_int(body, "min_keep", 0, 0, std::numeric_limits<int32_t>::max()) > 1) {
        throw bad_request(
            "'min_keep' above 1 is not supported: each of ggufd's filters keeps at "
            "least one token",
            "min_keep");
    }
    if (get_bool(body, "grammar_lazy", false)) {
        throw bad_request(
            "'grammar_lazy' is not supported: a 'grammar' holds from the first "
            "token (tool_choice auto starts its grammar at the call on its own)",
            "grammar_lazy");
    }
}

// A JSON Schema (the value at `where`, named `param` in the error) as a grammar; the 400 names
// the keyword the converter refuses by its JSON pointer within the schema.
std::string schema_gbnf(const RequestJson& schema, const std::string& where, const char* param) {
    if (!schema.is_object() && !schema.is_boolean()) {
        throw bad_request(fmt::format("'{}' must be a JSON Schema (an object)", where), param);
    }
    try {
        return grammar::json_schema_to_gbnf(schema);
    } catch (...) {
        throw_grammar_error(fmt::format("'{}'", where), param);
    }
}

// What OpenAI's response_format asks for: nothing (text), any JSON object, or a schema's
// instances. llama-server's {"type": "json_object", "schema": {...}} is a schema too.
std::optional<std::string> response_format_gbnf(const RequestJson& rf) {
    // Looked up through field(), as every request field is (FieldReads counts it as read).
    const RequestJson* type_field = rf.is_object() ? field(rf, "type") : nullptr;
    if (!type_field || !type_field->is_string()) {
        throw bad_request("'response_format' must be an object with a string 'type'",
                          "response_format");
    }
    const std::string type = type_field->get<std::string>();
    if (type == "text") return std::nullopt;
    if (type == "json_object") {
        if (const RequestJson* schema = field(rf, "schema"))
            return schema_gbnf(*schema, "response_format.schema", "response_format");
        return grammar::json_object_gbnf();
    }
    if (type == "json_schema") {
        const RequestJson* js = field(rf, "json_schema");
        if (!js || !js->is_object()) {
            throw bad_request("'response_format.json_schema' must be an object with the 'schema'",
                              "response_format");
        }
        // name, description and strict are OpenAI's; the output always follows the schema, so
        // strict false changes nothing but is accepted.
        for (const char* key : {"name", "description"}) {
            if (const RequestJson* v = field(*js, key); v && !v->is_string()) {
                throw bad_request(
                    fmt::format("'response_format.json_schema.{}' must be a string", key),
                    "response_format");
            }
        }
        if (const RequestJson* v = field(*js, "strict"); v && !v->is_boolean()) {
            throw bad_request("'response_format.json_schema.strict' must be a boolean",
                              "response_format");
        }
        const RequestJson* schema = field(*js, "schema");
        if (!schema) return grammar::json_object_gbnf();  // OpenAI: the schema is optional
        return schema_gbnf(*schema, "response_format.json_schema.schema", "response_format");
    }
    throw bad_request(
        fmt::format("'response_format.type' must be text, json_object or json_schema; got '{}'",
                    type),
        "response_format");
}

// The grammar a request constrains its output with: response_format (OpenAI), or llama-server's
// `grammar` (GBNF text) and `json_schema` fields; at most one of them. A JSON grammar's text goes
// to `json_gbnf` when given.
std::shared_ptr<const grammar::Grammar> parse_output_grammar(const RequestJson& body,
                                                             std::string* json_gbnf) {
    std::optional<std::string> gbnf;
    const char* from = nullptr;
    auto take = [&](std::optional<std::string> g, const char* param) {
        if (!g) return;
        if (from) {
            throw bad_request(
                fmt::format("'{}' and '{}' both constrain the output: give one of them", from,
                            param),
                param);
        }
        gbnf = std::move(g);
        from = param;
    };
    if (const RequestJson* rf = field(body, "response_format"))
        take(response_format_gbnf(*rf), "response_format");
    if (const RequestJson* g = field(body, "grammar")) {
        if (!g->is_string()) throw bad_request("'grammar' must be a string", "grammar");
        take(g->get<std::string>(), "grammar");
    }
    if (const RequestJson* schema = field(body, "json_schema"))
        take(schema_gbnf(*schema, "json_schema", "json_schema"), "json_schema");
    if (!gbnf) return nullptr;
    try {
        auto parsed = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(*gbnf));
        if (json_gbnf != nullptr && std::string_view(from) != "grammar") *json_gbnf = *gbnf;
        return parsed;
    } catch (...) {
        // A converted schema parses unless it outgrows the grammar limits.
        throw_grammar_error(fmt::format("'{}'", from), from, std::string_view(from) == "grammar");
    }
}

}  // namespace

void throw_grammar_error(std::string_view what, const char* param, bool client_gbnf) {
    try {
        throw;
    } catch (const grammar::SchemaError& e) {
        throw bad_request(fmt::format("{} cannot be used: {}", what, e.what()), param);
    } catch (const grammar::Error& e) {
        throw bad_request(
            client_gbnf ? fmt::format("{} is not valid GBNF: {}", what, e.what())
                        : fmt::format("{} gives a grammar too large to use: {}", what, e.message()),
            param);
    } catch (const std::invalid_argument& e) {
        throw bad_request(fmt::format("{} cannot be used: {}", what, e.what()), param);
    }
}

void read_generation_fields(const RequestJson& body, const FieldLimits& limits,
                            int32_t default_max_tokens, SamplingParams& s, StopParams& stop,
                            std::string* json_gbnf) {
    s.temperature = static_cast<float>(get_number(body, "temperature", s.temperature, 0.0, 2.0));
    s.top_p = static_cast<float>(get_number(body, "top_p", s.top_p, 0.0, 1.0));
    s.top_k = static_cast<int32_t>(
        get_int(body, "top_k", s.top_k, 0, std::numeric_limits<int32_t>::max()));
    s.min_p = static_cast<float>(get_number(body, "min_p", s.min_p, 0.0, 1.0));
    s.presence_penalty =
        static_cast<float>(get_number(body, "presence_penalty", s.presence_penalty, -2.0, 2.0));
    s.frequency_penalty =
        static_cast<float>(get_number(body, "frequency_penalty", s.frequency_penalty, -2.0, 2.0));
    // llama-server's names and meanings: typical_p 1 = off; repeat_penalty 1 = off;
    // repeat_last_n -1 = the whole context, 0 = penalties off.
    s.typical_p =
        static_cast<float>(get_number(body, "typical_p", s.typical_p, 0.0, 1.0, Low::open));
    s.repeat_penalty = static_cast<float>(
        get_number(body, "repeat_penalty", s.repeat_penalty, 0.0, 2.0, Low::open));
    s.penalty_last_n = static_cast<int32_t>(
        get_int(body, "repeat_last_n", s.penalty_last_n, -1, std::numeric_limits<int32_t>::max()));
    s.logit_bias = parse_logit_bias(body, limits);
    constexpr auto kIntMax = std::numeric_limits<int32_t>::max();
    s.dry_multiplier =
        static_cast<float>(get_number(body, "dry_multiplier", s.dry_multiplier, 0.0, 100.0));
    s.dry_base = static_cast<float>(get_number(body, "dry_base", s.dry_base, 1.0, 100.0));
    s.dry_allowed_length =
        static_cast<int32_t>(get_int(body, "dry_allowed_length", s.dry_allowed_length, 0, kIntMax));
    s.dry_penalty_last_n = static_cast<int32_t>(
        get_int(body, "dry_penalty_last_n", s.dry_penalty_last_n, -1, kIntMax));
    s.dry_sequence_breakers = parse_dry_breakers(body, limits, std::move(s.dry_sequence_breakers));
    s.xtc_probability =
        static_cast<float>(get_number(body, "xtc_probability", s.xtc_probability, 0.0, 1.0));
    s.xtc_threshold =
        static_cast<float>(get_number(body, "xtc_threshold", s.xtc_threshold, 0.0, 1.0));
    s.top_n_sigma = static_cast<float>(get_number(body, "top_n_sigma", s.top_n_sigma, -1.0, 100.0));
    s.dynatemp_range =
        static_cast<float>(get_number(body, "dynatemp_range", s.dynatemp_range, 0.0, 10.0));
    s.dynatemp_exponent =
        static_cast<float>(get_number(body, "dynatemp_exponent", s.dynatemp_exponent, 0.0, 10.0));
    s.mirostat = static_cast<int32_t>(get_int(body, "mirostat", s.mirostat, 0, 2));
    s.mirostat_tau =
        static_cast<float>(get_number(body, "mirostat_tau", s.mirostat_tau, 0.0, 100.0));
    s.mirostat_eta =
        static_cast<float>(get_number(body, "mirostat_eta", s.mirostat_eta, 0.0, 10.0));
    apply_sampler_order(body, s);
    refuse_unsupported(body);
    if (const RequestJson* seed = field(body, "seed")) {
        if (seed->is_number_unsigned()) {
            s.seed = seed->get<uint64_t>();
        } else {
            int64_t x = 0;
            if (!as_integer(*seed, x) || x < 0) {
                throw bad_request("'seed' must be a non-negative integer", "seed");
            }
            s.seed = static_cast<uint64_t>(x);
        }
    }
    stop.stop = parse_stop(body, limits);
    // llama.cpp's extension: generate past end-of-generation tokens (benchmarks want exactly
    // max_tokens tokens).
    stop.ignore_eos = get_bool(body, "ignore_eos", stop.ignore_eos);
    stop.max_tokens =
        static_cast<int32_t>(get_int(body, "max_tokens", default_max_tokens, 1, limits.max_tokens));
    s.grammar = parse_output_grammar(body, json_gbnf);
    if (s.grammar && stop.ignore_eos) {
        throw bad_request(
            "'ignore_eos' cannot be combined with a constrained output: the output ends where its "
            "grammar is complete",
            "ignore_eos");
    }
}

}  // namespace ggufd::sampling
