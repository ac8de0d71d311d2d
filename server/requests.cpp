#include "server/requests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "chat/common.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"

namespace ggufd::server {

using json = RequestJson;

namespace {

// The field when present and not null.
const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

// The field, which the request must have.
const json& required(const json& body, const char* name) {
    const json* v = field(body, name);
    if (!v) throw ApiError::bad_request(fmt::format("'{}' is required", name), name);
    return *v;
}

std::string fmt_number(double v) {
    return fmt::format("{}", v);
}

bool get_bool(const json& body, const char* name, bool fallback) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_boolean())
        throw ApiError::bad_request(fmt::format("'{}' must be a boolean", name), name);
    return v->get<bool>();
}

enum class Low { closed, open };  // whether the lower bound itself is allowed

double get_number(const json& body, const char* name, double fallback, double lo, double hi,
                  Low low = Low::closed) {
    const json* v = field(body, name);
    if (!v) return fallback;
    if (!v->is_number())
        throw ApiError::bad_request(fmt::format("'{}' must be a number", name), name);
    double x = v->get<double>();
    const bool above_lo = low == Low::open ? x > lo : x >= lo;
    if (!(above_lo && x <= hi)) {
        // Closed ranges keep the wording "between lo and hi" that clients already see.
        const char* form = low == Low::open ? "'{}' must be greater than {} and at most {}, got {}"
                                            : "'{}' must be between {} and {}, got {}";
        throw ApiError::bad_request(
            fmt::format(fmt::runtime(form), name, fmt_number(lo), fmt_number(hi), fmt_number(x)),
            name);
    }
    return x;
}

// An integer; a float with an integral value (16.0) counts as one.
bool as_integer(const json& v, int64_t& out) {
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

int64_t get_int(const json& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
    const json* v = field(body, name);
    if (!v) return fallback;
    int64_t x = 0;
    if (!as_integer(*v, x)) {
        throw ApiError::bad_request(fmt::format("'{}' must be an integer", name), name);
    }
    if (x < lo || x > hi) {
        throw ApiError::bad_request(
            fmt::format("'{}' must be between {} and {}, got {}", name, lo, hi, x), name);
    }
    return x;
}

std::string string_value(const json& v, const char* name) {
    if (!v.is_string())
        throw ApiError::bad_request(fmt::format("'{}' must be a string", name), name);
    return v.get<std::string>();
}

std::string get_string(const json& body, const char* name) {
    const json* v = field(body, name);
    return v ? string_value(*v, name) : std::string();
}

// A token id list; `param` names it in errors.
std::vector<int32_t> token_list(const json& array, const std::string& param) {
    std::vector<int32_t> out;
    out.reserve(array.size());
    for (size_t i = 0; i < array.size(); ++i) {
        int64_t id = 0;
        if (!as_integer(array[i], id) || id < 0 || id > std::numeric_limits<int32_t>::max()) {
            throw ApiError::bad_request(
                fmt::format("'{}[{}]' must be a non-negative integer token id", param, i), param);
        }
        out.push_back(static_cast<int32_t>(id));
    }
    return out;
}

// `name`: "prompt" (completions) or "input" (embeddings), the same shapes.
std::vector<PromptInput> parse_prompt(const json& body, const char* name = "prompt") {
    const json* p = &required(body, name);
    std::vector<PromptInput> prompts;
    if (p->is_string()) {
        prompts.push_back({false, p->get<std::string>(), {}});
        return prompts;
    }
    const std::string shape = fmt::format(
        "'{}' must be a string, an array of strings, an array of token ids or an array of "
        "arrays of token ids",
        name);
    if (!p->is_array() || p->empty()) throw ApiError::bad_request(shape, name);
    const json& first = p->front();
    if (first.is_number()) {
        prompts.push_back({true, {}, token_list(*p, name)});
    } else if (first.is_string()) {
        for (const auto& item : *p) {
            if (!item.is_string()) throw ApiError::bad_request(shape, name);
            prompts.push_back({false, item.get<std::string>(), {}});
        }
    } else if (first.is_array()) {
        for (size_t i = 0; i < p->size(); ++i) {
            const json& item = (*p)[i];
            if (!item.is_array()) throw ApiError::bad_request(shape, name);
            std::string param = fmt::format("{}[{}]", name, i);
            if (item.empty()) {
                throw ApiError::bad_request(fmt::format("'{}' must not be empty", param), name);
            }
            prompts.push_back({true, {}, token_list(item, param)});
        }
    } else {
        throw ApiError::bad_request(shape, name);
    }
    return prompts;
}

std::vector<std::string> parse_stop(const json& body, const ApiLimits& limits) {
    const json* v = field(body, "stop");
    if (!v) return {};
    std::vector<std::string> stops;
    if (v->is_string()) {
        stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        for (const auto& s : *v) {
            if (!s.is_string()) {
                throw ApiError::bad_request("'stop' must be a string or an array of strings",
                                            "stop");
            }
            stops.push_back(s.get<std::string>());
        }
    } else {
        throw ApiError::bad_request("'stop' must be a string or an array of strings", "stop");
    }
    if (stops.size() > static_cast<size_t>(limits.max_stop)) {
        throw ApiError::bad_request(fmt::format("'stop' may hold at most {} strings, got {}",
                                                limits.max_stop, stops.size()),
                                    "stop");
    }
    for (const auto& s : stops) {
        if (s.empty() || s.size() > limits.max_stop_bytes) {
            throw ApiError::bad_request(
                fmt::format("each 'stop' string must be 1 to {} bytes long", limits.max_stop_bytes),
                "stop");
        }
    }
    return stops;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body, const ApiLimits& limits) {
    const json* v = field(body, "logit_bias");
    if (!v) return {};
    if (!v->is_object()) {
        throw ApiError::bad_request("'logit_bias' must be an object of token id -> bias",
                                    "logit_bias");
    }
    if (v->size() > static_cast<size_t>(limits.max_logit_bias)) {
        throw ApiError::bad_request(fmt::format("'logit_bias' may hold at most {} entries, got {}",
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
            throw ApiError::bad_request(
                fmt::format("'logit_bias' keys must be token ids, got '{}'", key), "logit_bias");
        }
        if (!value.is_number()) {
            throw ApiError::bad_request(
                fmt::format("'logit_bias[{}]' must be a number between -100 and 100", key),
                "logit_bias");
        }
        double bias = value.get<double>();
        if (!(bias >= -100.0 && bias <= 100.0)) {
            throw ApiError::bad_request(
                fmt::format("'logit_bias[{}]' must be between -100 and 100, got {}", key,
                            fmt_number(bias)),
                "logit_bias");
        }
        out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
    return out;
}

// `lora`: an array of {"id": the adapter's index (as llama-server) or its name, "scale": number,
// 1 when absent}; which ids and names exist is the model's, checked by scheduler::validate().
std::optional<std::vector<scheduler::AdapterChoice>> parse_lora(const json& body,
                                                                const ApiLimits& limits) {
    const json* v = field(body, "lora");
    if (!v) return std::nullopt;
    const char* shape =
        "'lora' must be an array of {\"id\": adapter index or name, \"scale\": number}";
    if (!v->is_array()) throw ApiError::bad_request(shape, "lora");
    if (v->size() > static_cast<size_t>(limits.max_lora)) {
        throw ApiError::bad_request(
            fmt::format("'lora' may hold at most {} adapters, got {}", limits.max_lora, v->size()),
            "lora");
    }
    std::vector<scheduler::AdapterChoice> out;
    for (size_t i = 0; i < v->size(); ++i) {
        const json& item = (*v)[i];
        if (!item.is_object()) throw ApiError::bad_request(shape, "lora");
        for (const auto& [key, value] : item.items()) {
            if (key != "id" && key != "scale") {
                throw ApiError::bad_request(
                    fmt::format("'lora[{}]' has an unknown field '{}' (only id and scale)", i, key),
                    "lora");
            }
        }
        scheduler::AdapterChoice c;
        const json* id = field(item, "id");
        int64_t index = -1;
        if (id && id->is_string() && !id->get_ref<const std::string&>().empty()) {
            c.name = id->get<std::string>();
        } else if (id && as_integer(*id, index) && index >= 0) {
            c.id = index;
        } else {
            throw ApiError::bad_request(
                fmt::format("'lora[{}].id' must be an adapter's index (0, 1, ...) or its name", i),
                "lora");
        }
        if (const json* scale = field(item, "scale")) {
            if (!scale->is_number() || !(std::abs(scale->get<double>()) <= 100.0)) {
                throw ApiError::bad_request(
                    fmt::format("'lora[{}].scale' must be a number between -100 and 100", i),
                    "lora");
            }
            c.scale = scale->get<float>();
        }
        out.push_back(std::move(c));
    }
    return out;
}

// A JSON Schema (the value at `where`, named `param` in the error) as a grammar; the 400 names
// the keyword the converter refuses by its JSON pointer within the schema.
std::string schema_gbnf(const json& schema, const std::string& where, const char* param) {
    if (!schema.is_object() && !schema.is_boolean()) {
        throw ApiError::bad_request(fmt::format("'{}' must be a JSON Schema (an object)", where),
                                    param);
    }
    try {
        return grammar::json_schema_to_gbnf(schema);
    } catch (...) {
        throw_grammar_error(fmt::format("'{}'", where), param);
    }
}

// What OpenAI's response_format asks for: nothing (text), any JSON object, or a schema's
// instances. llama-server's {"type": "json_object", "schema": {...}} is a schema too.
std::optional<std::string> response_format_gbnf(const json& rf) {
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
        throw ApiError::bad_request("'response_format' must be an object with a string 'type'",
                                    "response_format");
    }
    const std::string type = rf["type"].get<std::string>();
    if (type == "text") return std::nullopt;
    if (type == "json_object") {
        if (const json* schema = field(rf, "schema"))
            return schema_gbnf(*schema, "response_format.schema", "response_format");
        return grammar::json_object_gbnf();
    }
    if (type == "json_schema") {
        const json* js = field(rf, "json_schema");
        if (!js || !js->is_object()) {
            throw ApiError::bad_request(
                "'response_format.json_schema' must be an object with the 'schema'",
                "response_format");
        }
        // name, description and strict are OpenAI's; the output always follows the schema, so
        // strict false changes nothing but is accepted.
        for (const char* key : {"name", "description"}) {
            if (const json* v = field(*js, key); v && !v->is_string()) {
                throw ApiError::bad_request(
                    fmt::format("'response_format.json_schema.{}' must be a string", key),
                    "response_format");
            }
        }
        if (const json* v = field(*js, "strict"); v && !v->is_boolean()) {
            throw ApiError::bad_request("'response_format.json_schema.strict' must be a boolean",
                                        "response_format");
        }
        const json* schema = field(*js, "schema");
        if (!schema) return grammar::json_object_gbnf();  // OpenAI: the schema is optional
        return schema_gbnf(*schema, "response_format.json_schema.schema", "response_format");
    }
    throw ApiError::bad_request(
        fmt::format("'response_format.type' must be text, json_object or json_schema; got '{}'",
                    type),
        "response_format");
}

// The grammar a request constrains its output with: response_format (OpenAI), or llama-server's
// `grammar` (GBNF text) and `json_schema` fields; at most one of them. A JSON grammar's text is
// kept in `json_gbnf`.
std::shared_ptr<const grammar::Grammar> parse_output_grammar(const json& body,
                                                             std::string& json_gbnf) {
    std::optional<std::string> gbnf;
    const char* from = nullptr;
    auto take = [&](std::optional<std::string> g, const char* param) {
        if (!g) return;
        if (from) {
            throw ApiError::bad_request(
                fmt::format("'{}' and '{}' both constrain the output: give one of them", from,
                            param),
                param);
        }
        gbnf = std::move(g);
        from = param;
    };
    if (const json* rf = field(body, "response_format"))
        take(response_format_gbnf(*rf), "response_format");
    if (const json* g = field(body, "grammar")) {
        if (!g->is_string()) throw ApiError::bad_request("'grammar' must be a string", "grammar");
        take(g->get<std::string>(), "grammar");
    }
    if (const json* schema = field(body, "json_schema"))
        take(schema_gbnf(*schema, "json_schema", "json_schema"), "json_schema");
    if (!gbnf) return nullptr;
    try {
        auto parsed = std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(*gbnf));
        if (std::string_view(from) != "grammar") json_gbnf = std::move(*gbnf);
        return parsed;
    } catch (...) {
        // A converted schema parses unless it outgrows the grammar limits.
        throw_grammar_error(fmt::format("'{}'", from), from, std::string_view(from) == "grammar");
    }
}

}  // namespace

GenerationOptions parse_generation_options(const json& body, const ApiLimits& limits,
                                           int32_t default_max_tokens) {
    GenerationOptions out;
    out.model = get_string(body, "model");
    out.n = static_cast<int32_t>(get_int(body, "n", 1, 1, limits.max_choices));
    out.stream = get_bool(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) {
            throw ApiError::bad_request("'stream_options' must be an object", "stream_options");
        }
        if (!out.stream) {
            throw ApiError::bad_request("'stream_options' is only allowed when 'stream' is true",
                                        "stream_options");
        }
        out.include_usage = get_bool(*so, "include_usage", false);
    }

    auto& s = out.sampling;
    s.temperature = static_cast<float>(get_number(body, "temperature", 1.0, 0.0, 2.0));
    s.top_p = static_cast<float>(get_number(body, "top_p", 1.0, 0.0, 1.0));
    s.top_k =
        static_cast<int32_t>(get_int(body, "top_k", 0, 0, std::numeric_limits<int32_t>::max()));
    s.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 0.0, 1.0));
    s.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", 0.0, -2.0, 2.0));
    s.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", 0.0, -2.0, 2.0));
    // llama-server's names and meanings: typical_p 1 = off; repeat_penalty 1 = off;
    // repeat_last_n -1 = the whole context, 0 = penalties off.
    s.typical_p =
        static_cast<float>(get_number(body, "typical_p", s.typical_p, 0.0, 1.0, Low::open));
    s.repeat_penalty = static_cast<float>(
        get_number(body, "repeat_penalty", s.repeat_penalty, 0.0, 2.0, Low::open));
    s.penalty_last_n = static_cast<int32_t>(
        get_int(body, "repeat_last_n", s.penalty_last_n, -1, std::numeric_limits<int32_t>::max()));
    s.logit_bias = parse_logit_bias(body, limits);
    if (const json* seed = field(body, "seed")) {
        if (seed->is_number_unsigned()) {
            s.seed = seed->get<uint64_t>();
        } else {
            int64_t x = 0;
            if (!as_integer(*seed, x) || x < 0) {
                throw ApiError::bad_request("'seed' must be a non-negative integer", "seed");
            }
            s.seed = static_cast<uint64_t>(x);
        }
    }
    out.stop.stop = parse_stop(body, limits);
    // llama.cpp's extension: generate past end-of-generation tokens (benchmarks want exactly
    // max_tokens tokens).
    out.stop.ignore_eos = get_bool(body, "ignore_eos", false);
    out.stop.max_tokens =
        static_cast<int32_t>(get_int(body, "max_tokens", default_max_tokens, 1, limits.max_tokens));
    s.grammar = parse_output_grammar(body, out.json_output_gbnf);
    if (s.grammar && out.stop.ignore_eos) {
        throw ApiError::bad_request(
            "'ignore_eos' cannot be combined with a constrained output: the output ends where its "
            "grammar is complete",
            "ignore_eos");
    }
    out.lora = parse_lora(body, limits);
    get_string(body, "user");  // accepted for compatibility, checked, unused
    return out;
}

namespace {

// Deepest nesting of arrays and objects in a JSON text (string contents skipped).
size_t nesting_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_keep_alive(const RequestJson& body) {
    const json* v = field(body, "keep_alive");
    if (!v) return std::nullopt;
    auto refuse = [] [[noreturn]] {
        throw ApiError::bad_request(
            "'keep_alive' must be seconds (a number) or a duration such as \"5m\", \"1h30m\", "
            "\"90s\" or \"-1\"",
            "keep_alive");
    };
    // Seconds, as a number or the text of one; else Go's duration syntax, which Ollama reads.
    double seconds = 0;
    if (v->is_number()) {
        seconds = v->get<double>();
    } else if (v->is_string()) {
        const std::string text = v->get<std::string>();
        std::string_view rest = text;
        const bool negative = rest.starts_with('-');
        if (negative || rest.starts_with('+')) rest.remove_prefix(1);
        if (rest.empty()) refuse();
        bool any = false;
        while (!rest.empty()) {
            size_t n = 0;
            while (n < rest.size() &&
                   (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '.')) {
                ++n;
            }
            if (n == 0 || n > 20) refuse();
            double number = 0;
            try {
                size_t used = 0;
                number = std::stod(std::string(rest.substr(0, n)), &used);
                if (used != n) refuse();
            } catch (const std::logic_error&) {  // not a number, or out of range
                refuse();
            }
            rest.remove_prefix(n);
            size_t u = 0;
            while (u < rest.size() && std::isalpha(static_cast<unsigned char>(rest[u]))) ++u;
            const std::string_view unit = rest.substr(0, u);
            rest.remove_prefix(u);
            double scale = 0;
            if (unit.empty()) {
                if (any || !rest.empty()) refuse();  // a bare number is seconds, alone
                scale = 1;
            } else if (unit == "h") {
                scale = 3600;
            } else if (unit == "m") {
                scale = 60;
            } else if (unit == "s") {
                scale = 1;
            } else if (unit == "ms") {
                scale = 1e-3;
            } else if (unit == "us") {
                scale = 1e-6;
            } else if (unit == "ns") {
                scale = 1e-9;
            } else {
                refuse();
            }
            seconds += number * scale;
            any = true;
        }
        if (negative) seconds = -seconds;
    } else {
        refuse();
    }
    // Negative keeps the model loaded, as does anything beyond ten years.
    if (!std::isfinite(seconds)) refuse();
    if (seconds < 0 || seconds > 10.0 * 365 * 86400) return std::chrono::milliseconds::max();
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

json parse_json_body(std::string_view body) {
    // nlohmann parses any nesting without recursion, but copying, comparing or printing the result
    // recurses once per level: a 200 KB body of nested '[' overflowed the stack when the chat
    // messages were copied (reproduced through fuzz_http_request). Requests never need this.
    constexpr size_t kMaxNesting = 64;
    if (nesting_depth(body) > kMaxNesting) {
        throw ApiError::bad_request("the request body nests arrays and objects deeper than " +
                                    std::to_string(kMaxNesting) + " levels");
    }
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) throw ApiError::bad_request("the request body is not valid JSON");
    if (!parsed.is_object()) throw ApiError::bad_request("the request body must be a JSON object");
    return parsed;
}

CompletionRequest parse_completion_request(const json& body, const ApiLimits& limits) {
    CompletionRequest r;
    r.prompts = parse_prompt(body);
    static_cast<GenerationOptions&>(r) = parse_generation_options(body, limits, 16);
    if (static_cast<int64_t>(r.prompts.size()) * r.n > limits.max_choices) {
        throw ApiError::bad_request(
            fmt::format("'n' times the number of prompts must be at most {}, got {} x {}",
                        limits.max_choices, r.n, r.prompts.size()),
            "n");
    }
    r.echo = get_bool(body, "echo", false);
    if (field(body, "logprobs")) {
        r.logprobs = true;
        r.sampling.top_logprobs =
            static_cast<int32_t>(get_int(body, "logprobs", 0, 0, limits.max_top_logprobs));
    }
    if (r.echo && r.logprobs) {
        throw ApiError::bad_request(
            "'echo' together with 'logprobs' is not supported: prompt log-probabilities are not "
            "computed",
            "echo");
    }
    return r;
}

namespace {

// An assistant turn's calls as templates iterate them: `function.arguments` sent as JSON text
// (as OpenAI clients send it) becomes its object, in place so the key order stays.
void normalise_tool_calls(json& msg, const std::string& where) {
    json& calls = msg["tool_calls"];
    if (!calls.is_array()) {
        throw ApiError::bad_request(fmt::format("'{}.tool_calls' must be an array", where),
                                    "messages");
    }
    for (size_t k = 0; k < calls.size(); ++k) {
        json& call = calls[k];
        const std::string cwhere = fmt::format("{}.tool_calls[{}]", where, k);
        auto fn = call.is_object() ? call.find("function") : call.end();
        if (fn == call.end() || !fn->is_object()) {
            throw ApiError::bad_request(
                fmt::format("'{}' must be an object with a 'function' object", cwhere), "messages");
        }
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string()) {
            throw ApiError::bad_request(fmt::format("'{}.function.name' must be a string", cwhere),
                                        "messages");
        }
        auto args = fn->find("arguments");
        if (args != fn->end() && args->is_string()) {
            json parsed = json::parse(args->get<std::string>(), nullptr, false);
            if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
        }
    }
}

json parse_messages(const json& body, const ApiLimits& limits) {
    const json* v = &required(body, "messages");
    if (!v->is_array() || v->empty()) {
        throw ApiError::bad_request("'messages' must be a non-empty array", "messages");
    }
    if (v->size() > static_cast<size_t>(limits.max_messages)) {
        throw ApiError::bad_request(fmt::format("'messages' may hold at most {} messages, got {}",
                                                limits.max_messages, v->size()),
                                    "messages");
    }
    json out = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
        const json& m = (*v)[i];
        std::string where = fmt::format("messages[{}]", i);
        if (!m.is_object()) {
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "messages");
        }
        auto role_it = m.find("role");
        if (role_it == m.end() || !role_it->is_string()) {
            throw ApiError::bad_request(fmt::format("'{}.role' must be a string", where),
                                        "messages");
        }
        std::string role = role_it->get<std::string>();
        if (role == "developer") role = "system";
        if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
            throw ApiError::bad_request(
                fmt::format("'{}.role' must be one of system, developer, user, assistant, tool; "
                            "got '{}'",
                            where, role),
                "messages");
        }
        json msg = m;
        msg["role"] = role;
        const json* content = field(m, "content");
        if (!content) {
            if (role != "assistant") {
                throw ApiError::bad_request(fmt::format("'{}.content' is required", where),
                                            "messages");
            }
            msg["content"] = nullptr;
        } else if (content->is_array()) {
            std::string joined;
            for (size_t j = 0; j < content->size(); ++j) {
                const json& part = (*content)[j];
                std::string pwhere = fmt::format("{}.content[{}]", where, j);
                if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
                    throw ApiError::bad_request(
                        fmt::format("'{}' must be an object with a 'type'", pwhere), "messages");
                }
                std::string type = part["type"].get<std::string>();
                if (type != "text") {
                    throw ApiError::bad_request(
                        fmt::format(
                            "'{}.type' '{}' is not supported: this server handles text only",
                            pwhere, type),
                        "messages");
                }
                if (!part.contains("text") || !part["text"].is_string()) {
                    throw ApiError::bad_request(fmt::format("'{}.text' must be a string", pwhere),
                                                "messages");
                }
                if (j > 0) joined += "\n";
                joined += part["text"].get<std::string>();
            }
            msg["content"] = joined;
        } else if (!content->is_string()) {
            throw ApiError::bad_request(
                fmt::format("'{}.content' must be a string or an array of content parts", where),
                "messages");
        }
        // vLLM's name for the reasoning of an earlier reply, which clients moved to in 2026; the
        // templates read reasoning_content.
        if (const json* reasoning = field(m, "reasoning"); role == "assistant" && reasoning &&
                                                           reasoning->is_string() &&
                                                           !field(m, "reasoning_content")) {
            msg["reasoning_content"] = *reasoning;
        }
        if (role == "assistant" && field(m, "tool_calls")) {
            normalise_tool_calls(msg, where);
            if (msg["content"].is_null()) msg["content"] = "";
        }
        out.push_back(std::move(msg));
    }
    return out;
}

// OpenAI's function tools: [{"type": "function", "function": {"name", "description",
// "parameters", "strict"}}], checked so that a template and the call grammar can rely on them.
json parse_tools(const json& body) {
    const json* tools = field(body, "tools");
    if (!tools) return nullptr;
    if (!tools->is_array()) throw ApiError::bad_request("'tools' must be an array", "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
        const json& t = (*tools)[i];
        const std::string where = fmt::format("tools[{}]", i);
        if (!t.is_object()) {
            throw ApiError::bad_request(fmt::format("'{}' must be an object", where), "tools");
        }
        const json* type = field(t, "type");
        if (!type || *type != "function") {
            throw ApiError::bad_request(
                fmt::format("'{}.type' must be \"function\" (the only tool type supported)", where),
                "tools");
        }
        const json* fn = field(t, "function");
        if (!fn || !fn->is_object()) {
            throw ApiError::bad_request(fmt::format("'{}.function' must be an object", where),
                                        "tools");
        }
        const json* name = field(*fn, "name");
        if (!name || !name->is_string() || !chat::is_function_name(name->get<std::string>())) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_' or '-'",
                            where),
                "tools");
        }
        const json* description = field(*fn, "description");
        if (description && !description->is_string()) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.description' must be a string", where), "tools");
        }
        const json* parameters = field(*fn, "parameters");
        if (parameters && !parameters->is_object()) {
            throw ApiError::bad_request(
                fmt::format("'{}.function.parameters' must be a JSON Schema object", where),
                "tools");
        }
    }
    return *tools;
}

bool has_tool(const json& tools, const std::string& name) {
    if (!tools.is_array()) return false;
    return std::any_of(tools.begin(), tools.end(),
                       [&](const json& t) { return t["function"]["name"] == name; });
}

void parse_tool_choice(const json& body, ChatRequest& r) {
    const json* choice = field(body, "tool_choice");
    if (!choice) return;
    const bool has_tools = r.tools.is_array() && !r.tools.empty();
    if (choice->is_string()) {
        const std::string c = choice->get<std::string>();
        if (c == "auto") {
            r.tool_choice = ToolChoice::automatic;
        } else if (c == "none") {
            r.tool_choice = ToolChoice::none;
        } else if (c == "required") {
            if (!has_tools) {
                throw ApiError::bad_request("'tool_choice' \"required\" needs 'tools'",
                                            "tool_choice");
            }
            r.tool_choice = ToolChoice::required;
        } else {
            throw ApiError::bad_request(
                "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                "tool_choice");
        }
        return;
    }
    const json* type = choice->is_object() ? field(*choice, "type") : nullptr;
    const json* fn = choice->is_object() ? field(*choice, "function") : nullptr;
    const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string()) {
        throw ApiError::bad_request(
            "'tool_choice' must be \"auto\", \"none\", \"required\" or "
            "{\"type\": \"function\", \"function\": {\"name\": ...}}",
            "tool_choice");
    }
    r.tool_choice_function = name->get<std::string>();
    if (!has_tool(r.tools, r.tool_choice_function)) {
        throw ApiError::bad_request(fmt::format("'tool_choice' names '{}', which is not in 'tools'",
                                                r.tool_choice_function),
                                    "tool_choice");
    }
    r.tool_choice = ToolChoice::function;
}

}  // namespace

void throw_grammar_error(std::string_view what, const char* param, bool client_gbnf) {
    try {
        throw;
    } catch (const grammar::SchemaError& e) {
        throw ApiError::bad_request(fmt::format("{} cannot be used: {}", what, e.what()), param);
    } catch (const grammar::Error& e) {
        throw ApiError::bad_request(
            client_gbnf ? fmt::format("{} is not valid GBNF: {}", what, e.what())
                        : fmt::format("{} gives a grammar too large to use: {}", what, e.message()),
            param);
    } catch (const std::invalid_argument& e) {
        throw ApiError::bad_request(fmt::format("{} cannot be used: {}", what, e.what()), param);
    }
}

namespace {

// The reasoning budget under either name clients send it; both at once must agree.
void parse_reasoning_budget(const json& body, ChatRequest& r) {
    constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
    for (const char* name : {"reasoning_budget_tokens", "thinking_token_budget"}) {
        if (!field(body, name)) continue;
        const auto budget = static_cast<int32_t>(get_int(body, name, -1, -1, kMax));
        if (r.reasoning_budget && *r.reasoning_budget != budget) {
            throw ApiError::bad_request(
                "'reasoning_budget_tokens' and 'thinking_token_budget' disagree", name);
        }
        r.reasoning_budget = budget;
    }
}

}  // namespace

ChatRequest parse_chat_request(const json& body, const ApiLimits& limits) {
    ChatRequest r;
    r.messages = parse_messages(body, limits);
    static_cast<GenerationOptions&>(r) = parse_generation_options(body, limits, -1);
    r.stop.max_tokens = static_cast<int32_t>(
        get_int(body, "max_completion_tokens", r.stop.max_tokens, 1, limits.max_tokens));

    r.logprobs = get_bool(body, "logprobs", false);
    if (field(body, "top_logprobs")) {
        if (!r.logprobs) {
            throw ApiError::bad_request("'top_logprobs' requires 'logprobs' to be true",
                                        "top_logprobs");
        }
        r.sampling.top_logprobs =
            static_cast<int32_t>(get_int(body, "top_logprobs", 0, 0, limits.max_top_logprobs));
    } else if (r.logprobs) {
        r.sampling.top_logprobs = 0;
    }

    r.tools = parse_tools(body);
    parse_tool_choice(body, r);
    r.parallel_tool_calls = get_bool(body, "parallel_tool_calls", true);
    if (const json* f = field(body, "reasoning_format")) {
        std::optional<chat::ReasoningFormat> format;
        if (f->is_string()) format = chat::reasoning_format_from_name(f->get<std::string>());
        if (!format) {
            throw ApiError::bad_request(
                "'reasoning_format' must be one of \"none\", \"auto\", \"deepseek\", "
                "\"parsed\"",
                "reasoning_format");
        }
        r.reasoning_format = *format;
    }
    if (const json* kw = field(body, "chat_template_kwargs")) {
        if (!kw->is_object()) {
            throw ApiError::bad_request("'chat_template_kwargs' must be an object",
                                        "chat_template_kwargs");
        }
        r.extra_context = *kw;
    } else {
        r.extra_context = json::object();
    }
    // llama-server's top-level shortcuts for two template variables; chat_template_kwargs wins.
    if (field(body, "enable_thinking") && !r.extra_context.contains("enable_thinking"))
        r.extra_context["enable_thinking"] = get_bool(body, "enable_thinking", true);
    if (const auto thinking = r.extra_context.find("enable_thinking");
        thinking != r.extra_context.end() && thinking->is_boolean()) {
        r.enable_thinking = thinking->get<bool>();
    }
    if (const json* effort = field(body, "reasoning_effort")) {
        if (!effort->is_string()) {
            throw ApiError::bad_request("'reasoning_effort' must be a string", "reasoning_effort");
        }
        if (!r.extra_context.contains("reasoning_effort"))
            r.extra_context["reasoning_effort"] = *effort;
    }
    parse_reasoning_budget(body, r);
    if (r.forces_tool_call() && r.sampling.grammar) {
        throw ApiError::bad_request(
            "'tool_choice' that forces a call cannot be combined with 'response_format', "
            "'grammar' or 'json_schema': both would constrain the output",
            "tool_choice");
    }
    return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
    TokenizeRequest r;
    r.model = get_string(body, "model");
    r.content = string_value(required(body, "content"), "content");
    r.add_special = get_bool(body, "add_special", false);
    r.parse_special = get_bool(body, "parse_special", true);
    r.with_pieces = get_bool(body, "with_pieces", false);
    return r;
}

DetokenizeRequest parse_detokenize_request(const json& body) {
    DetokenizeRequest r;
    r.model = get_string(body, "model");
    const json& tokens = required(body, "tokens");
    if (!tokens.is_array()) {
        throw ApiError::bad_request("'tokens' must be an array of token ids", "tokens");
    }
    r.tokens = token_list(tokens, "tokens");
    return r;
}

// --- embeddings and reranking ---

EmbeddingsRequest parse_embeddings_request(const json& body, const ApiLimits& limits) {
    EmbeddingsRequest r;
    r.model = get_string(body, "model");
    r.inputs = parse_prompt(body, "input");
    if (r.inputs.size() > static_cast<size_t>(limits.max_embedding_inputs)) {
        throw ApiError::bad_request(fmt::format("'input' has {} items; at most {} are accepted",
                                                r.inputs.size(), limits.max_embedding_inputs),
                                    "input");
    }
    if (const json* f = field(body, "encoding_format")) {
        const std::string format = f->is_string() ? f->get<std::string>() : std::string();
        if (format != "float" && format != "base64") {
            throw ApiError::bad_request("'encoding_format' must be \"float\" or \"base64\"",
                                        "encoding_format");
        }
        r.base64 = format == "base64";
    }
    if (field(body, "dimensions")) r.dimensions = get_int(body, "dimensions", 0, 1, 1 << 20);
    r.normalize = get_bool(body, "normalize", true);
    // llama-server's spelling: -1 raw, 2 Euclidean (L2); its other norms are not offered.
    if (field(body, "embd_normalize")) {
        const int64_t norm = get_int(body, "embd_normalize", 2, -1, 2);
        if (norm != -1 && norm != 2) {
            throw ApiError::bad_request(
                "'embd_normalize' must be -1 (raw) or 2 (Euclidean); other norms are not "
                "supported",
                "embd_normalize");
        }
        if (field(body, "normalize") && r.normalize != (norm == 2)) {
            throw ApiError::bad_request("'normalize' and 'embd_normalize' disagree",
                                        "embd_normalize");
        }
        r.normalize = norm == 2;
    }
    r.truncate = get_bool(body, "truncate", false);
    return r;
}

RerankRequest parse_rerank_request(const json& body, const ApiLimits& limits) {
    RerankRequest r;
    r.model = get_string(body, "model");
    r.query = string_value(required(body, "query"), "query");
    const json* docs = &required(body, "documents");
    const char* shape = "'documents' must be a non-empty array of strings or of {\"text\": string}";
    if (!docs->is_array() || docs->empty()) throw ApiError::bad_request(shape, "documents");
    if (docs->size() > static_cast<size_t>(limits.max_embedding_inputs)) {
        throw ApiError::bad_request(fmt::format("'documents' has {} items; at most {} are accepted",
                                                docs->size(), limits.max_embedding_inputs),
                                    "documents");
    }
    for (const json& d : *docs) {
        // Jina's and Cohere's clients may send {"text": ...} objects.
        const json* text = d.is_object() ? field(d, "text") : &d;
        if (!text || !text->is_string()) throw ApiError::bad_request(shape, "documents");
        r.documents.push_back(text->get<std::string>());
    }
    if (field(body, "top_n")) {
        r.top_n = static_cast<size_t>(get_int(body, "top_n", 0, 1, limits.max_embedding_inputs));
    }
    r.return_documents = get_bool(body, "return_documents", false);
    return r;
}

}  // namespace ggufd::server
