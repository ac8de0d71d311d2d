// The daemon's one typed configuration. Sources, lowest to highest precedence: built-in defaults,
// a config file (`--config FILE`, INI-style `key = value` with the long flag names), environment
// variables GGUFD_<FLAG_NAME>, and command-line flags. Plain data: no behaviour beyond parsing
// and validation. The defaults are stated here (the scheduler's in serving_defaults.h, which the
// engine reads too) and --help prints them from a default Config.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/serving_defaults.h"

namespace ggufd::config {

// A bad setting: the message names the setting, where it came from and why it is wrong.
class ConfigError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

enum class LogFormat { text, json };

struct ModelSpec {
    std::string name;  // what clients put in "model"; defaults to the file's stem
    std::string path;
    bool operator==(const ModelSpec&) const = default;
};

// A LoRA adapter of a model (--lora [MODEL/]NAME=PATH, --lora-scale [MODEL/]NAME=SCALE).
struct LoraSpec {
    std::string model;  // the model it adapts; empty: the only model
    std::string name;   // what requests put in lora[].id (or its index among the model's)
    std::string path;
    // Applied to requests that do not say (no `lora` field); 0: only when a request asks.
    float scale = 0.0f;
    bool operator==(const LoraSpec&) const = default;
};

struct Config {
    std::vector<ModelSpec> models;  // pinned: loaded at start, kept until asked to unload
    // A folder whose .gguf files are served too, each loaded when first named; empty: none.
    std::string models_dir;
    int idle_unload_s = 300;      // a folder model idle this long is unloaded; 0: never
    uint64_t memory_budget = 0;   // bytes all loaded models may hold; 0: no limit
    int load_timeout_s = 120;     // a request waits this long for its model to load
    std::vector<LoraSpec> loras;  // in the order given: each model's ids number its own
    std::string host = "127.0.0.1";
    uint16_t port = 8080;
    int threads = 0;                  // inference threads; 0 = one per physical core
    int threads_batch = 0;            // threads of steps with prompt tokens; 0 = threads
    int parallel = defaults::kSlots;  // concurrent sequences (slots) per model
    int ctx_size = 0;  // most tokens of one request; 0 = the model's, as far as the KV pool holds
    // The KV pool per model, shared by its slots, in MiB (0: half the memory available at load).
    int kv_memory_mib = defaults::kKvMemoryMiB;
    int batch_size = defaults::kBatchSize;  // token budget of one engine step
    int queue_size = defaults::kMaxQueue;   // waiting for a slot; beyond it 503
    // Attention's output accumulated in fp16, cell by cell, as llama.cpp's CPU flash attention
    // does with an F16 cache: greedy text then follows llama.cpp's where two logits nearly tie,
    // at 2-3x the attention time. false: F32 (ggufd's default).
    bool f16_accumulator = false;
    // KV cache storage of keys and values: f16, q8_0 or q4_0 (as llama-server's names them).
    std::string cache_type_k = "f16";
    std::string cache_type_v = "f16";
    // The prefix cache beyond the slots, per model: host memory in MiB (0: off), the prompt
    // tokens between two checkpoints of a sliding-window or recurrent sequence (0: only at
    // prompts' ends), and a folder its entries are written to and warmed from (empty: none).
    int cache_ram_mib = defaults::kCacheRamMiB;
    int checkpoint_interval = defaults::kCheckpointInterval;
    std::string cache_dir;
    // Chat templates replacing the models' own tokenizer.chat_template: model name -> Jinja
    // source; the key "" applies to every model without an entry of its own.
    std::map<std::string, std::string> chat_templates;
    // Projector (mmproj) files letting a model take images: model name -> path, "" for the only
    // --model.
    std::map<std::string, std::string> mmprojs;
    // Output parsers (chat::family_names()) replacing the family detected from each model's
    // template: model name -> parser name, "" for every model. Checked by the daemon, which knows
    // the names.
    std::map<std::string, std::string> tool_parsers;
    // Embedding pooling (none, mean, cls, last, rank) replacing each model's pooling_type: model
    // name -> pooling, "" for every model. Checked by the daemon.
    std::map<std::string, std::string> poolings;
    // Speculative decoding: the draft source (none, ngram) per model name, "" for every model;
    // and the drafts' sizes, which a request may override (speculative.n_max, ...).
    std::map<std::string, std::string> spec_types;
    // Draft models (--model-draft): model name -> path, "" for every model.
    std::map<std::string, std::string> model_drafts;
    float draft_p_min = 0.75f;  // a draft model stops at a token it gives less probability
    int draft_max = 16;         // most tokens of one draft
    int draft_min = 0;          // a shorter draft is not verified
    int spec_ngram_size_n = 3;  // the longest suffix the n-gram lookup matches
    // Reasoning tokens before a thinking model's block is closed for it, when a request does not
    // say (reasoning_budget_tokens); -1: no budget.
    int reasoning_budget = -1;
    std::vector<std::string> api_keys;  // none = no authentication; never logged
    bool metrics_public = false;        // serve /metrics without a key
    int io_threads = 2;                 // HTTP threads, apart from the inference threads
    int idle_timeout_s = 60;            // keep-alive connection waiting for its next request
    int header_timeout_s = 10;          // first byte of a request to the end of its headers
    std::string cors_origin;            // Access-Control-Allow-Origin; empty = no CORS at all
    bool webui = true;                  // the chat page at / (--no-webui turns it off)
    bool strict_requests = false;       // a request with fields ggufd ignores is a 400
    bool skip_bad_models = false;       // a model that fails to load is logged and left out
    std::string config_file;            // the file the settings were read from, if any
    LogFormat log_format = LogFormat::text;
    std::string log_level = "info";
};

// Where each setting's value came from, for messages: "--port", "GGUFD_PORT", "config file x".
using Sources = std::map<std::string, std::string>;

struct LoadResult {
    Config config;
    Sources sources;
    bool exit_now = false;  // --help or --version was asked for; `message` holds the text
    std::string message;
};

// Builds the configuration. `env` holds the environment (name -> value); only GGUFD_* names that
// match a setting are read, others are ignored. Throws ConfigError.
LoadResult load(int argc, const char* const* argv, const std::map<std::string, std::string>& env);

// The process environment as a map, for load().
std::map<std::string, std::string> process_environment();

// Checks ranges and combinations; the message names the first bad setting. Throws ConfigError.
void validate(const Config& config, const Sources& sources = {});

// "NAME=PATH" or "PATH" (name = file stem) -> ModelSpec. Throws ConfigError.
ModelSpec parse_model_spec(const std::string& text);

// "[MODEL/]NAME=PATH" -> LoraSpec (scale 0). Throws ConfigError.
LoraSpec parse_lora_spec(const std::string& text);

std::string to_string(LogFormat format);

}  // namespace ggufd::config
