#include "config/config.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>

extern char** environ;

namespace ggufd::config {
namespace po = boost::program_options;

namespace {

constexpr const char* kVersion = "ggufd 0.1.0";
constexpr std::string_view kEnvPrefix = "GGUFD_";

// A setting's help ending with its default, read from a default Config: config.h states it once.
template <typename T>
std::string with_default(std::string_view help, const T& value) {
    std::string out(help);
    out += " (default ";
    if constexpr (std::is_same_v<T, bool>) {
        out += value ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
        out += std::to_string(value);
    } else {
        out += value;
    }
    return out + ")";
}

// Every setting is read as text by program_options and converted here, so a bad value gets one
// message format whatever its source.
po::options_description settings_description() {
    const Config c;
    po::options_description d(
        "Settings (also GGUFD_<NAME> in the environment, or NAME = value in --config)");
    // clang-format off
    d.add_options()
        ("model,m", po::value<std::vector<std::string>>(), "model to serve: PATH or NAME=PATH (repeatable; GGUFD_MODEL takes a comma-separated list)")
        ("models-dir", po::value<std::string>(), "serve every .gguf in this folder, each loaded when a request first names it (new files appear without a restart)")
        ("idle-unload", po::value<std::string>(), with_default("seconds a folder model may stay idle before it is unloaded; 0: never", c.idle_unload_s).c_str())
        ("memory-budget", po::value<std::string>(), with_default("bytes every loaded model may hold together (weights, KV cache, repacked copies), with an optional K, M or G suffix; the least recently used idle folder model is unloaded to make room; 0: no limit", c.memory_budget).c_str())
        ("load-timeout", po::value<std::string>(), with_default("seconds a request waits for its model to load before a 503", c.load_timeout_s).c_str())
        ("lora", po::value<std::vector<std::string>>(), "LoRA adapter a model's requests may use: NAME=PATH for the only model, MODEL/NAME=PATH for one of several (repeatable; a request picks adapters with \"lora\": [{\"id\": NAME or index, \"scale\": S}])")
        ("lora-scale", po::value<std::vector<std::string>>(), "scale an adapter is applied with to requests that do not name adapters: [MODEL/]NAME=SCALE (repeatable; default 0: only when a request asks)")
        ("host", po::value<std::string>(), with_default("address to listen on", c.host).c_str())
        ("port", po::value<std::string>(), with_default("TCP port", c.port).c_str())
        ("threads,t", po::value<std::string>(), "inference threads (default: physical cores)")
        ("threads-batch", po::value<std::string>(), "threads of the steps that process prompt tokens (or embeddings); --threads then serves the steps of single decode tokens (default: --threads)")
        ("parallel", po::value<std::string>(), with_default("concurrent sequences per model", c.parallel).c_str())
        ("ctx-size,c", po::value<std::string>(), "most tokens of one request (default: the model's trained context, as far as the KV pool holds it)")
        ("kv-memory", po::value<std::string>(), with_default("MiB of memory per model for the KV pool its slots share (one long conversation may use most of it, many short ones share it; the youngest request waits when it is full); 0: half the memory available when the model loads", c.kv_memory_mib).c_str())
        ("batch-size,b", po::value<std::string>(), with_default("token budget of one engine step", c.batch_size).c_str())
        ("queue-size", po::value<std::string>(), with_default("requests per model waiting for a slot before 503", c.queue_size).c_str())
        ("attention-accumulator", po::value<std::string>(), with_default("f32, or f16 to accumulate attention as llama.cpp's CPU flash attention does (its greedy text where logits nearly tie; attention 2-3x slower)", std::string(c.f16_accumulator ? "f16" : "f32")).c_str())
        ("cache-type-k", po::value<std::string>(), with_default("KV cache storage of keys: f16, q8_0 or q4_0 (the quantised types halve or quarter the cache)", c.cache_type_k).c_str())
        ("cache-type-v", po::value<std::string>(), with_default("KV cache storage of values: f16, q8_0 or q4_0", c.cache_type_v).c_str())
        ("cache-ram", po::value<std::string>(), with_default("MiB of host memory per model for prompt prefixes kept beyond the slots (a slot's conversation stays reusable after another takes the slot); 0: off", c.cache_ram_mib).c_str())
        ("checkpoint-interval", po::value<std::string>(), with_default("prompt tokens between two checkpoints of a sliding-window or recurrent model's prompt, which later prompts sharing that much resume from (one is also taken at every prompt's end); 0: only at prompts' ends", c.checkpoint_interval).c_str())
        ("cache-dir", po::value<std::string>(), "folder the prefix cache's entries are written to, and read back from at start for the same model file and settings (unset: memory only)")
        ("chat-template-file", po::value<std::vector<std::string>>(), "Jinja chat template replacing the model's: PATH for every model, or NAME=PATH for one (repeatable)")
        ("mmproj", po::value<std::vector<std::string>>(), "projector (mmproj) GGUF that lets a model take images: PATH for the only model, or NAME=PATH for one (repeatable; a models folder pairs mmproj-*.gguf files by name)")
        ("tool-parser", po::value<std::vector<std::string>>(), "how replies' reasoning and tool calls are read, instead of the family detected from the chat template: PARSER for every model, or NAME=PARSER for one (repeatable; hermes, llama3, mistral, harmony, ... as /models shows)")
        ("pooling", po::value<std::vector<std::string>>(), "how embeddings are pooled, instead of the model's pooling_type: POOLING for every model, or NAME=POOLING for one (repeatable; none, mean, cls, last, rank)")
        ("spec-type", po::value<std::vector<std::string>>(), "speculative decoding's draft source: TYPE for every model, or NAME=TYPE for one (repeatable; none, ngram: lookup over the prompt and the generated text, or draft: the model's --model-draft; default none, or draft with a draft model)")
        ("model-draft", po::value<std::vector<std::string>>(), "a smaller model of the same vocabulary that drafts tokens for speculative decoding, loaded beside its target: PATH for every model, or NAME=PATH for one (repeatable; a name of the models folder too)")
        ("draft-p-min", po::value<std::string>(), with_default("a draft model stops drafting at a token it gives less probability (speculative.p_min)", c.draft_p_min).c_str())
        ("draft-max", po::value<std::string>(), with_default("most tokens of one speculative draft (a request's speculative.n_max overrides it)", c.draft_max).c_str())
        ("draft-min", po::value<std::string>(), with_default("a shorter speculative draft is not verified (speculative.n_min)", c.draft_min).c_str())
        ("spec-ngram-size-n", po::value<std::string>(), with_default("the longest suffix of the text the n-gram lookup matches (speculative.ngram)", c.spec_ngram_size_n).c_str())
        ("reasoning-budget", po::value<std::string>(), with_default("tokens a thinking model may reason before its reasoning block is closed for it, unless a request sets reasoning_budget_tokens; -1: no budget", c.reasoning_budget).c_str())
        ("api-key", po::value<std::string>(), "require a bearer token on API requests: one key, or several separated by commas")
        ("api-key-file", po::value<std::string>(), "read accepted API keys from this file, one per line (adds to --api-key)")
        ("metrics-public", po::value<std::string>(), with_default("serve /metrics without an API key: true or false", c.metrics_public).c_str())
        ("io-threads", po::value<std::string>(), with_default("HTTP I/O threads, apart from the inference threads", c.io_threads).c_str())
        ("idle-timeout", po::value<std::string>(), with_default("seconds a keep-alive connection may wait for its next request", c.idle_timeout_s).c_str())
        ("header-timeout", po::value<std::string>(), with_default("seconds from a request's first byte to the end of its headers", c.header_timeout_s).c_str())
        ("cors-origin", po::value<std::string>(), "allow browser pages from this origin (or *) to call the API; unset = no CORS headers")
        ("no-webui", po::value<std::string>()->implicit_value("true"), "do not serve the chat page at / (GGUFD_NO_WEBUI=true, or no-webui = true in a config file); / then answers only Ollama's \"Ollama is running\"")
        ("strict-requests", po::value<std::string>()->implicit_value("true"), "refuse (400) a request with fields this server would ignore, instead of naming them in the X-Ggufd-Ignored-Fields header (GGUFD_STRICT_REQUESTS=true, or strict-requests = true in a config file)")
        ("skip-bad-models", po::value<std::string>(), with_default("with several models, serve the others when one fails to load instead of exiting: true or false", c.skip_bad_models).c_str())
        ("log-format", po::value<std::string>(), with_default("text or json", to_string(c.log_format)).c_str())
        ("log-level", po::value<std::string>(), with_default("trace, debug, info, warn, error", c.log_level).c_str());
    // clang-format on
    return d;
}

po::options_description command_line_description() {
    po::options_description d = settings_description();
    d.add_options()("config", po::value<std::string>(), "read settings from this file")(
        "help,h", "print this help and exit")("version", "print the version and exit");
    return d;
}

std::string env_name(const std::string& option) {
    std::string out(kEnvPrefix);
    for (char c : option)
        out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

template <typename Int>
Int parse_int(const std::string& text, const std::string& setting, const std::string& source,
              long long min, long long max) {
    long long v = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || p != end || text.empty()) {
        throw ConfigError("invalid " + setting + " (from " + source + "): '" + text +
                          "' is not an integer");
    }
    if (v < min || v > max) {
        throw ConfigError("invalid " + setting + " (from " + source + "): " + text +
                          " is out of range " + std::to_string(min) + ".." + std::to_string(max));
    }
    return static_cast<Int>(v);
}

float parse_float(const std::string& text, const std::string& setting, const std::string& source,
                  float min, float max) {
    float v = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || p != end || text.empty() || !(v >= min && v <= max)) {
        throw ConfigError("invalid " + setting + " (from " + source + "): '" + text +
                          "' is not a number in " + std::to_string(min) + ".." +
                          std::to_string(max));
    }
    return v;
}

// Bytes, with an optional K, M, G or T suffix (powers of 1024; "KiB", "MB" and the like too).
uint64_t parse_bytes(const std::string& text, const std::string& setting,
                     const std::string& source) {
    auto refuse = [&](const std::string& why) {
        return ConfigError("invalid " + setting + " (from " + source + "): '" + text + "' " + why);
    };
    uint64_t v = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || p == text.data()) throw refuse("is not a number of bytes");
    std::string unit(p, end);
    for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
    if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
    int shift = 0;
    if (unit == "K") {
        shift = 10;
    } else if (unit == "M") {
        shift = 20;
    } else if (unit == "G") {
        shift = 30;
    } else if (unit == "T") {
        shift = 40;
    } else if (!unit.empty() && unit != "B") {
        throw refuse("has an unknown suffix (use K, M, G or T)");
    }
    if (shift > 0 && v > (UINT64_MAX >> shift)) throw refuse("is too large");
    return v << shift;
}

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

bool parse_bool(const std::string& text, const std::string& setting, const std::string& source) {
    if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "0" || text == "no" || text == "off") return false;
    throw ConfigError("invalid " + setting + " (from " + source + "): '" + text +
                      "' is not true or false");
}

// A whole file as text, for settings that name a file; `where` names the setting and source.
std::string read_text_file(const std::string& path, const std::string& where) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    if (!in || !(text << in.rdbuf())) {
        throw ConfigError("invalid " + where + ": cannot read '" + path + "'");
    }
    return text.str();
}

// One key per line; blank lines and lines starting with # are skipped, surrounding whitespace
// is not part of a key. The keys themselves never appear in a message.
std::vector<std::string> read_key_file(const std::string& path, const std::string& source) {
    const std::string where = "api-key-file (from " + source + ")";
    std::istringstream in(read_text_file(path, where));
    std::vector<std::string> keys;
    std::string line;
    while (std::getline(in, line)) {
        const size_t b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        const size_t e = line.find_last_not_of(" \t\r");
        keys.push_back(line.substr(b, e - b + 1));
    }
    if (keys.empty()) throw ConfigError("invalid " + where + ": '" + path + "' holds no key");
    return keys;
}

}  // namespace

std::string to_string(LogFormat format) {
    return format == LogFormat::json ? "json" : "text";
}

std::map<std::string, std::string> process_environment() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        const size_t eq = kv.find('=');
        if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return env;
}

namespace {

bool valid_name(const std::string& name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
               c == ':';
    });
}

// "[MODEL/]NAME" of a LoRA setting.
std::pair<std::string, std::string> lora_target(const std::string& text, const std::string& what) {
    const size_t slash = text.find('/');
    std::string model = slash == std::string::npos ? "" : text.substr(0, slash);
    std::string name = slash == std::string::npos ? text : text.substr(slash + 1);
    if ((slash != std::string::npos && !valid_name(model)) || !valid_name(name)) {
        throw ConfigError("invalid " + what +
                          ": expected [MODEL/]NAME with letters, digits and "
                          "- _ . : in each");
    }
    return {std::move(model), std::move(name)};
}

}  // namespace

ModelSpec parse_model_spec(const std::string& text) {
    if (text.empty()) throw ConfigError("invalid model: empty value");
    ModelSpec spec;
    const size_t eq = text.find('=');
    if (eq == std::string::npos) {
        spec.path = text;
        spec.name = std::filesystem::path(text).stem().string();
    } else {
        spec.name = text.substr(0, eq);
        spec.path = text.substr(eq + 1);
    }
    if (spec.name.empty() || spec.path.empty()) {
        throw ConfigError("invalid model '" + text + "': expected PATH or NAME=PATH");
    }
    if (!valid_name(spec.name)) {
        throw ConfigError("invalid model name '" + spec.name +
                          "': use letters, digits and - _ . : only");
    }
    return spec;
}

LoraSpec parse_lora_spec(const std::string& text) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq + 1 == text.size()) {
        throw ConfigError("invalid lora '" + text + "': expected [MODEL/]NAME=PATH");
    }
    LoraSpec spec;
    std::tie(spec.model, spec.name) = lora_target(text.substr(0, eq), "lora '" + text + "'");
    spec.path = text.substr(eq + 1);
    return spec;
}

void validate(const Config& c, const Sources& sources) {
    auto from = [&](const std::string& key) {
        auto it = sources.find(key);
        return it == sources.end() ? std::string("default") : it->second;
    };
    std::set<std::string> names;
    for (const ModelSpec& m : c.models) {
        if (!names.insert(m.name).second) {
            throw ConfigError("invalid model (from " + from("model") + "): the name '" + m.name +
                              "' is used twice; give each model its own NAME=PATH");
        }
    }
    if (c.host.empty()) throw ConfigError("invalid host (from " + from("host") + "): empty");
    if (c.threads < 0)
        throw ConfigError("invalid threads (from " + from("threads") + "): must be >= 0");
    if (c.parallel < 1)
        throw ConfigError("invalid parallel (from " + from("parallel") + "): must be >= 1");
    if (c.ctx_size < 0)
        throw ConfigError("invalid ctx-size (from " + from("ctx-size") + "): must be >= 0");
    if (c.batch_size < 1)
        throw ConfigError("invalid batch-size (from " + from("batch-size") + "): must be >= 1");
    auto check_model_names = [&](const std::map<std::string, std::string>& values,
                                 const char* setting) {
        for (const auto& [name, value] : values) {
            const bool known =
                name.empty() || std::any_of(c.models.begin(), c.models.end(),
                                            [&](const ModelSpec& m) { return m.name == name; });
            if (!known) {
                throw ConfigError(std::string("invalid ") + setting + " (from " + from(setting) +
                                  "): no model is named '" + name + "'");
            }
        }
    };
    check_model_names(c.chat_templates, "chat-template-file");
    check_model_names(c.tool_parsers, "tool-parser");
    if (c.models_dir.empty()) check_model_names(c.mmprojs, "mmproj");
    if (c.mmprojs.count("") && c.models.size() != 1) {
        throw ConfigError("invalid mmproj (from " + from("mmproj") + "): a projector for " +
                          (c.models.empty() ? std::string("no --model") : "one of several models") +
                          "; say which as NAME=PATH");
    }
    check_model_names(c.poolings, "pooling");
    check_model_names(c.spec_types, "spec-type");
    // A draft model may pair with a model of the models folder, whose names are known later.
    if (c.models_dir.empty()) check_model_names(c.model_drafts, "model-draft");
    if (c.draft_min > c.draft_max) {
        throw ConfigError("invalid draft-min (from " + from("draft-min") +
                          "): more than draft-max (" + std::to_string(c.draft_max) + ")");
    }
    for (size_t i = 0; i < c.loras.size(); ++i) {
        const LoraSpec& l = c.loras[i];
        const std::string where = "invalid lora (from " + from("lora") + "): ";
        if (c.models.empty()) {
            throw ConfigError(where + "adapter '" + l.name + "' needs a model: give --model");
        }
        if (l.model.empty() && c.models.size() > 1) {
            throw ConfigError(where + "adapter '" + l.name +
                              "': with several models, say which as MODEL/" + l.name + "=PATH");
        }
        if (!l.model.empty() &&
            std::none_of(c.models.begin(), c.models.end(),
                         [&](const ModelSpec& m) { return m.name == l.model; })) {
            throw ConfigError(where + "no model is named '" + l.model + "'");
        }
        for (size_t j = 0; j < i; ++j) {
            const std::string& mi = l.model.empty() ? c.models.front().name : l.model;
            const std::string& mj =
                c.loras[j].model.empty() ? c.models.front().name : c.loras[j].model;
            if (mi == mj && c.loras[j].name == l.name) {
                throw ConfigError(where + "model '" + mi + "' has two adapters named '" + l.name +
                                  "'");
            }
        }
    }
    // The value goes into a response header as it is: one origin or *, never a list.
    for (char ch : c.cors_origin) {
        if (ch == ',' || ch == ' ' || static_cast<unsigned char>(ch) < 0x21 || ch == 0x7f) {
            throw ConfigError("invalid cors-origin (from " + from("cors-origin") + "): '" +
                              c.cors_origin + "' must be one origin such as " +
                              "https://example.com, or *");
        }
    }
    static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                  "error", "critical", "off"};
    if (!kLevels.contains(c.log_level)) {
        throw ConfigError("invalid log-level (from " + from("log-level") + "): '" + c.log_level +
                          "' is not one of trace, debug, info, warn, error, critical, off");
    }
}

LoadResult load(int argc, const char* const* argv, const std::map<std::string, std::string>& env) {
    LoadResult result;
    po::variables_map vm;
    const po::options_description cli = command_line_description();
    const po::options_description settings = settings_description();

    // Highest precedence first: program_options keeps the first value stored for each option.
    po::parsed_options from_cli(&cli);
    try {
        from_cli = po::command_line_parser(argc, argv).options(cli).run();
        po::store(from_cli, vm);
    } catch (const po::error& e) {
        throw ConfigError(std::string("command line: ") + e.what());
    }
    if (vm.count("help")) {
        std::ostringstream out;
        out << "usage: ggufd [options]\n" << cli;
        result.exit_now = true;
        result.message = out.str();
        return result;
    }
    if (vm.count("version")) {
        result.exit_now = true;
        result.message = kVersion;
        return result;
    }
    for (const auto& opt : from_cli.options)
        result.sources.emplace(opt.string_key, "--" + opt.string_key);

    // Environment: GGUFD_<NAME> for each setting; other GGUFD_ variables belong to tools and tests.
    std::map<std::string, std::string> env_options;
    for (const auto& opt : settings.options()) {
        const std::string& name = opt->long_name();
        auto it = env.find(env_name(name));
        if (it == env.end()) continue;
        env_options.emplace(name, it->second);
    }
    if (auto it = env.find("GGUFD_CONFIG"); it != env.end())
        env_options.emplace("config", it->second);
    for (const auto& [name, value] : env_options) {
        if (vm.count(name)) continue;  // the command line wins
        if (name == "model" || name == "chat-template-file" || name == "tool-parser" ||
            name == "pooling" || name == "spec-type" || name == "model-draft" || name == "lora" ||
            name == "lora-scale" || name == "mmproj") {
            vm.emplace(name, po::variable_value(boost::any(split_commas(value)), false));
        } else {
            vm.emplace(name, po::variable_value(boost::any(value), false));
        }
        result.sources.emplace(name, env_name(name));
    }

    // Config file, lowest precedence above the defaults.
    if (vm.count("config")) {
        const std::string path = vm["config"].as<std::string>();
        result.config.config_file = path;
        std::ifstream in(path);
        if (!in) throw ConfigError("config: cannot read config file '" + path + "'");
        po::parsed_options from_file(&settings);
        try {
            from_file = po::parse_config_file(in, settings, false);
        } catch (const po::error& e) {
            throw ConfigError("config file '" + path + "': " + e.what());
        }
        // Settings already given on the command line or in the environment win over the file.
        std::erase_if(from_file.options,
                      [&](const po::option& opt) { return vm.count(opt.string_key) > 0; });
        for (const auto& opt : from_file.options)
            result.sources.emplace(opt.string_key, "config file " + path);
        try {
            po::store(from_file, vm);
        } catch (const po::error& e) {
            throw ConfigError("config file '" + path + "': " + e.what());
        }
    }

    Config& c = result.config;
    auto text = [&](const char* name) -> const std::string* {
        return vm.count(name) ? &vm[name].as<std::string>() : nullptr;
    };
    auto source = [&](const char* name) {
        return result.sources.count(name) ? result.sources.at(name) : "default";
    };
    if (vm.count("model")) {
        for (const std::string& m : vm["model"].as<std::vector<std::string>>()) {
            try {
                c.models.push_back(parse_model_spec(m));
            } catch (const ConfigError& e) {
                throw ConfigError(std::string(e.what()) + " (from " + source("model") + ")");
            }
        }
    }
    if (auto* v = text("models-dir")) c.models_dir = *v;
    if (auto* v = text("idle-unload"))
        c.idle_unload_s = parse_int<int>(*v, "idle-unload", source("idle-unload"), 0, 1 << 30);
    if (auto* v = text("memory-budget"))
        c.memory_budget = parse_bytes(*v, "memory-budget", source("memory-budget"));
    if (auto* v = text("load-timeout"))
        c.load_timeout_s = parse_int<int>(*v, "load-timeout", source("load-timeout"), 1, 86400);
    if (vm.count("lora")) {
        for (const std::string& l : vm["lora"].as<std::vector<std::string>>()) {
            try {
                c.loras.push_back(parse_lora_spec(l));
            } catch (const ConfigError& e) {
                throw ConfigError(std::string(e.what()) + " (from " + source("lora") + ")");
            }
        }
    }
    if (vm.count("lora-scale")) {
        for (const std::string& item : vm["lora-scale"].as<std::vector<std::string>>()) {
            const std::string where = "lora-scale (from " + source("lora-scale") + ")";
            const size_t eq = item.find('=');
            if (eq == std::string::npos) {
                throw ConfigError("invalid " + where + ": '" + item +
                                  "' is not [MODEL/]NAME=SCALE");
            }
            const auto [model, name] = lora_target(item.substr(0, eq), where);
            double scale = 0;
            const std::string value = item.substr(eq + 1);
            size_t used = 0;
            try {
                scale = std::stod(value, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != value.size() || !(std::abs(scale) <= 100.0)) {
                throw ConfigError("invalid " + where + ": '" + value +
                                  "' is not a number between -100 and 100");
            }
            auto it = std::find_if(c.loras.begin(), c.loras.end(), [&](const LoraSpec& l) {
                return l.name == name && (model.empty() || l.model == model);
            });
            if (it == c.loras.end()) {
                throw ConfigError("invalid " + where + ": no adapter '" + item.substr(0, eq) +
                                  "' was given with --lora");
            }
            it->scale = static_cast<float>(scale);
        }
    }
    if (auto* v = text("host")) c.host = *v;
    if (auto* v = text("port")) c.port = parse_int<uint16_t>(*v, "port", source("port"), 1, 65535);
    if (auto* v = text("threads"))
        c.threads = parse_int<int>(*v, "threads", source("threads"), 0, 1024);
    if (auto* v = text("threads-batch"))
        c.threads_batch = parse_int<int>(*v, "threads-batch", source("threads-batch"), 0, 1024);
    if (auto* v = text("parallel"))
        c.parallel = parse_int<int>(*v, "parallel", source("parallel"), 1, 1024);
    if (auto* v = text("ctx-size"))
        c.ctx_size = parse_int<int>(*v, "ctx-size", source("ctx-size"), 0, 1 << 24);
    if (auto* v = text("batch-size"))
        c.batch_size = parse_int<int>(*v, "batch-size", source("batch-size"), 1, 1 << 20);
    if (auto* v = text("kv-memory"))
        c.kv_memory_mib = parse_int<int>(*v, "kv-memory", source("kv-memory"), 0, 1 << 30);
    if (auto* v = text("cache-ram"))
        c.cache_ram_mib = parse_int<int>(*v, "cache-ram", source("cache-ram"), 0, 1 << 24);
    if (auto* v = text("checkpoint-interval")) {
        c.checkpoint_interval =
            parse_int<int>(*v, "checkpoint-interval", source("checkpoint-interval"), 0, 1 << 24);
    }
    if (auto* v = text("cache-dir")) c.cache_dir = *v;
    if (auto* v = text("queue-size"))
        c.queue_size = parse_int<int>(*v, "queue-size", source("queue-size"), 0, 1 << 20);
    if (auto* v = text("draft-max"))
        c.draft_max = parse_int<int>(*v, "draft-max", source("draft-max"), 0, 64);
    if (auto* v = text("draft-p-min"))
        c.draft_p_min = parse_float(*v, "draft-p-min", source("draft-p-min"), 0.0f, 1.0f);
    if (auto* v = text("draft-min"))
        c.draft_min = parse_int<int>(*v, "draft-min", source("draft-min"), 0, 64);
    if (auto* v = text("spec-ngram-size-n")) {
        c.spec_ngram_size_n =
            parse_int<int>(*v, "spec-ngram-size-n", source("spec-ngram-size-n"), 1, 32);
    }
    if (auto* v = text("reasoning-budget")) {
        c.reasoning_budget = parse_int<int>(*v, "reasoning-budget", source("reasoning-budget"), -1,
                                            std::numeric_limits<int>::max());
    }
    // Per-model settings: VALUE for every model or NAME=VALUE for one.
    auto per_model = [&](const char* setting, const char* plural, auto&& add) {
        if (!vm.count(setting)) return;
        for (const std::string& item : vm[setting].as<std::vector<std::string>>()) {
            const size_t eq = item.find('=');
            const std::string name = eq == std::string::npos ? "" : item.substr(0, eq);
            const std::string value = eq == std::string::npos ? item : item.substr(eq + 1);
            const std::string where = std::string(setting) + " (from " + source(setting) + ")";
            if (value.empty())
                throw ConfigError("invalid " + where + ": '" + item + "' has no value");
            if (!add(name, value, where)) {
                throw ConfigError(
                    "invalid " + where + ": two " + plural + " for " +
                    (name.empty() ? std::string("every model") : "model '" + name + "'"));
            }
        }
    };
    per_model("chat-template-file", "templates",
              [&](const std::string& name, const std::string& path, const std::string& where) {
                  return c.chat_templates.emplace(name, read_text_file(path, where)).second;
              });
    per_model("mmproj", "projectors",
              [&](const std::string& name, const std::string& path, const std::string&) {
                  return c.mmprojs.emplace(name, path).second;
              });
    per_model("tool-parser", "parsers",
              [&](const std::string& name, const std::string& parser, const std::string&) {
                  return c.tool_parsers.emplace(name, parser).second;
              });
    per_model("pooling", "poolings",
              [&](const std::string& name, const std::string& pooling, const std::string&) {
                  return c.poolings.emplace(name, pooling).second;
              });
    per_model(
        "spec-type", "draft sources",
        [&](const std::string& name, const std::string& type, const std::string& where) {
            if (type != "none" && type != "ngram" && type != "ngram-simple" && type != "draft") {
                throw ConfigError("invalid " + where + ": '" + type +
                                  "' is not none, ngram or draft");
            }
            return c.spec_types.emplace(name, type).second;
        });
    per_model("model-draft", "draft models",
              [&](const std::string& name, const std::string& path, const std::string&) {
                  return c.model_drafts.emplace(name, path).second;
              });
    if (auto* v = text("api-key")) c.api_keys = split_commas(*v);
    if (auto* v = text("api-key-file")) {
        for (std::string& key : read_key_file(*v, source("api-key-file"))) {
            c.api_keys.push_back(std::move(key));
        }
    }
    if (auto* v = text("metrics-public"))
        c.metrics_public = parse_bool(*v, "metrics-public", source("metrics-public"));
    if (auto* v = text("io-threads"))
        c.io_threads = parse_int<int>(*v, "io-threads", source("io-threads"), 1, 64);
    if (auto* v = text("idle-timeout"))
        c.idle_timeout_s = parse_int<int>(*v, "idle-timeout", source("idle-timeout"), 1, 86400);
    if (auto* v = text("header-timeout"))
        c.header_timeout_s =
            parse_int<int>(*v, "header-timeout", source("header-timeout"), 1, 3600);
    if (auto* v = text("cors-origin")) c.cors_origin = *v;
    if (auto* v = text("no-webui")) c.webui = !parse_bool(*v, "no-webui", source("no-webui"));
    if (auto* v = text("strict-requests"))
        c.strict_requests = parse_bool(*v, "strict-requests", source("strict-requests"));
    if (auto* v = text("skip-bad-models"))
        c.skip_bad_models = parse_bool(*v, "skip-bad-models", source("skip-bad-models"));
    if (auto* v = text("log-level")) c.log_level = *v;
    if (auto* v = text("attention-accumulator")) {
        if (*v == "f32" || *v == "f16") {
            c.f16_accumulator = *v == "f16";
        } else {
            throw ConfigError("invalid attention-accumulator (from " +
                              source("attention-accumulator") + "): '" + *v +
                              "' is not f32 or f16");
        }
    }
    for (auto [name, field] :
         {std::pair{"cache-type-k", &c.cache_type_k}, std::pair{"cache-type-v", &c.cache_type_v}}) {
        if (auto* v = text(name)) {
            if (*v != "f16" && *v != "q8_0" && *v != "q4_0") {
                throw ConfigError("invalid " + std::string(name) + " (from " + source(name) +
                                  "): '" + *v + "' is not f16, q8_0 or q4_0");
            }
            *field = *v;
        }
    }
    if (auto* v = text("log-format")) {
        if (*v == "text")
            c.log_format = LogFormat::text;
        else if (*v == "json")
            c.log_format = LogFormat::json;
        else
            throw ConfigError("invalid log-format (from " + source("log-format") + "): '" + *v +
                              "' is not text or json");
    }
    validate(c, result.sources);
    return result;
}

}  // namespace ggufd::config
