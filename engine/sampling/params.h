// What a request asks of sampling and stopping: plain data shared by the HTTP layer (which fills
// it from JSON) and the engine (which obeys it). Defaults follow OpenAI's API.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ggufd::grammar {
class Grammar;
}

namespace ggufd::sampling {

// A request parameter the engine refuses. param() is its name in a request (the API's name,
// e.g. "repeat_last_n" for penalty_last_n) so the HTTP layer can answer 400 naming it; what()
// says why.
class InvalidParam : public std::invalid_argument {
  public:
    InvalidParam(std::string param, const std::string& message)
        : std::invalid_argument(message), param_(std::move(param)) {}
    const std::string& param() const { return param_; }

  private:
    std::string param_;
};

// The steps of the chain after the logit changes (sampler.h), which llama-server's `samplers`
// list may put in another order.
enum class SamplerStep : unsigned char {
    top_n_sigma,
    top_k,
    typical_p,
    top_p,
    min_p,
    xtc,
    temperature
};

struct SamplingParams {
    float temperature = 1.0f;        // 0 = greedy (argmax)
    int32_t top_k = 0;               // 0 = off
    float top_p = 1.0f;              // 1 = off; 0 = the most likely token only
    float min_p = 0.0f;              // 0 = off
    float typical_p = 1.0f;          // 1 = off
    float repeat_penalty = 1.0f;     // 1 = off; divides positive / multiplies negative logits
    int32_t penalty_last_n = 64;     // "repeat_last_n": window of recent tokens the penalties look
                                     // at; -1 = all (the whole context), 0 = penalties off
    float presence_penalty = 0.0f;   // subtracted once from tokens present in the window
    float frequency_penalty = 0.0f;  // subtracted per occurrence in the window
    std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> added to its logit

    // llama-server's samplers beyond OpenAI's, with its names and defaults (sampler.h says where
    // each runs in the chain).
    // DRY: a token that would extend a repetition of n >= dry_allowed_length earlier tokens loses
    // dry_multiplier * dry_base^(n - dry_allowed_length) from its logit. The repetition is looked
    // for in the last dry_penalty_last_n accepted tokens (-1: all of them, the whole context;
    // 0: off) and never reaches back across a sequence breaker (a text that ends it: a token
    // holding one is never penalized). Breakers need the vocabulary's token bytes.
    float dry_multiplier = 0.0f;  // 0 = off
    float dry_base = 1.75f;
    int32_t dry_allowed_length = 2;
    int32_t dry_penalty_last_n = -1;
    std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
    // XTC ("exclude top choices"): with probability xtc_probability per token, every candidate
    // whose probability is at least xtc_threshold is removed but the least likely of them (when
    // two or more are; a threshold above 0.5 never finds two).
    float xtc_probability = 0.0f;  // 0 = off
    float xtc_threshold = 0.1f;
    float top_n_sigma = -1.0f;  // <= 0 = off; keeps logits >= max - top_n_sigma * their std dev
    // Dynamic temperature: the temperature moves within temperature +- dynatemp_range (not below
    // 0) with the candidates' normalized entropy raised to dynatemp_exponent.
    float dynatemp_range = 0.0f;  // 0 = off
    float dynatemp_exponent = 1.0f;
    // Mirostat 1 or 2 replaces the truncation filters and the draw by a feedback loop that keeps
    // the surprise (-log2 p) of the chosen tokens near mirostat_tau, learning at mirostat_eta.
    int32_t mirostat = 0;  // 0 = off
    float mirostat_tau = 5.0f;
    float mirostat_eta = 0.1f;
    // These steps in this order instead of the chain's own (sampler.h), each once; empty: the
    // chain's order. Mirostat and greedy decoding ignore it.
    std::vector<SamplerStep> order;
    std::optional<uint64_t> seed;  // same seed + same request = same output
    int32_t top_logprobs = -1;  // -1 = no logprobs; N >= 0 = chosen token's and top N alternatives'
    // Logprobs of the distribution the draw used (after truncation and temperature: llama-server's
    // post_sampling_probs) rather than of the model's raw logits.
    bool post_sampling_logprobs = false;
    // Constrained sampling: only tokens that keep the generated text a prefix of a sentence of
    // this grammar, and end-of-generation only once it is a whole one. Null: unconstrained.
    std::shared_ptr<const grammar::Grammar> grammar;
    // A lazy grammar: sampling is free until the generated text contains one of these texts;
    // from that trigger's first byte on, the text must follow the grammar (whose sentences start
    // with a trigger), to its end. A trigger the grammar refuses there (the text after it leaves
    // the grammar within the same token) does not count, and the search goes on after it. Empty:
    // the grammar holds from the first token.
    std::vector<std::string> grammar_triggers;

    // A budget for a thinking model's reasoning block: once `tokens` tokens were generated inside
    // the block without it closing, the block's closing markup (`close`, as tokens) is written
    // next, one token per step whatever the logits (a character being written is finished
    // first), and sampling goes on after it. The block is open from the start when the prompt
    // opened it, else when the output begins (after blanks) with `open_text`; it closes on its
    // own when `close_text` appears. Needs the vocabulary's token bytes, as a grammar does.
    struct ReasoningBudget {
        int32_t tokens = -1;  // -1: no budget
        std::vector<int32_t> close;
        std::string open_text;
        std::string close_text;
        bool starts_open = false;
    };
    ReasoningBudget reasoning_budget;
};

struct StopParams {
    int32_t max_tokens = -1;        // -1 = until the context is full or a stop condition
    std::vector<std::string> stop;  // stop strings; the matched text is not emitted
    bool ignore_eos = false;        // keep going past end-of-generation tokens
};

}  // namespace ggufd::sampling
