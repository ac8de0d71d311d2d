#include "engine/sampling/request_fields.h"

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
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

const RequestJson* field(const RequestJson& body, const char* name) {
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
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
        throw bad_request("'response_format' must be an object with a string 'type'",
                          "response_format");
    }
    const std::string type = rf["type"].get<std::string>();
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
