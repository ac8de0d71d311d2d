// Turns one position's logits into the next token, following a request's SamplingParams.
//
// The chain, in the order llama.cpp's default sampler chain uses (facts learned from its
// src/llama-sampling.cpp and common/sampling.cpp; the code here is our own):
//
//   0. grammar       with SamplingParams::grammar, tokens the grammar does not allow next get
//                    logit -inf before anything else looks at them (grammar/constraint.h), so
//                    every later step, greedy included, chooses among allowed tokens only.
//   1. logit bias    logit += bias; a bias <= -100 (OpenAI: "effectively a ban") bans the token
//                    outright (logit = -inf), so not even greedy decoding can pick it.
//   2. penalties     for tokens seen in the window of the last penalty_last_n accepted tokens
//                    (-1 = every accepted token): repeat penalty divides a positive logit and
//                    multiplies a non-positive one; then logit -= count * frequency_penalty
//                    + presence_penalty.
//   3. DRY           a token that would continue a repetition of n >= dry_allowed_length tokens
//                    (a suffix of the DRY window that also ends earlier in it, followed there by
//                    that token; never reaching back across a sequence breaker) loses
//                    dry_multiplier * dry_base^(n - dry_allowed_length), the exponent capped
//                    where the power would overflow a float. Tokens holding a breaker are exempt.
//   4. top-n-sigma   keep logits >= max - top_n_sigma * sigma, sigma the standard deviation of
//                    the finite logits of the whole vocabulary (after steps 0-3).
//   5. top-k         keep the k highest logits (ties broken by the lower token id).
//   6. typical-p     locally typical sampling: rank the kept tokens by |-log p - H| (H the
//                    entropy of the kept set) and keep the best ones until their probability
//                    mass exceeds typical_p.
//   7. top-p         keep the most probable tokens until their mass reaches top_p (the token that
//                    crosses the threshold is kept).
//   8. min-p         keep tokens whose probability is at least min_p times the best one's.
//   9. XTC           when a draw from the request's RNG falls below xtc_probability, of the
//                    tokens whose probability is >= xtc_threshold (when two or more are) only
//                    the least likely stays (among equal ones the higher id).
//  10. temperature   probabilities become softmax(logit / T) over what is left: T is
//                    `temperature`, or with dynatemp_range > 0 lo + (hi - lo) * (H / log n)
//                    ^ dynatemp_exponent, lo/hi = temperature -/+ dynatemp_range (lo >= 0), H the
//                    entropy (at temperature 1) of the n candidates left with a finite logit; a
//                    dynamic T of 0 takes the best candidate.
//  11. draw          one uniform number from the request's RNG picks the token.
//
// Steps 6-9 measure probabilities as the softmax (temperature 1) over the tokens that survived
// the previous steps, as llama.cpp does. Every filter keeps at least one token.
//
// mirostat 1 or 2 runs steps 0-3 (llama.cpp's mirostat chains run no penalties any more; ggufd
// keeps them and DRY, which a request turns off on its own), divides the logits by
// `temperature`, and replaces steps 4-9 and 11 with its own truncation and draw; its target
// surprise mu (2 * mirostat_tau at first) is the request's state across tokens:
//   v1: s = the Zipf exponent fitted to the 100 most likely tokens (least squares of
//       log(p_i / p_i+1) on log((i + 2) / (i + 1))), eps = s - 1; keep the top
//       k = (eps * 2^mu / (1 - N^-eps))^(1/s) tokens (N the vocabulary size; k >= 1);
//   v2: keep the tokens whose surprise -log2 p is <= mu (at least the best one);
// then one draw among the kept tokens, renormalized, and mu -= mirostat_eta * (-log2 p - tau),
// p the chosen token's renormalized probability.
//
// llama-server's `samplers` order list is read into these steps by the request reader
// (request_fields.h): a step left out is off, and steps 4-10 may come in another order
// (SamplingParams::order). Then every step works on what the steps before it left: top-k keeps
// the k best of the candidates, top-n-sigma's sigma is theirs, and temperature (fixed or
// dynamic) divides their logits, so the steps after it measure probabilities at that temperature
// (llama.cpp's chain in that order); the draw is then at temperature 1. Bias, penalties and DRY
// always come first: they change the logits every other step reads.
//
// temperature == 0 is greedy decoding: argmax of the logits after steps 1-3, computed in one pass
// without copying the vocabulary. Steps 4-11 and mirostat are skipped: top-n-sigma, top-k, top-p
// and min-p always keep the argmax anyway; typical-p and XTC could drop it, and llama.cpp (which
// runs them before its temperature step) would then return another token: we follow OpenAI, for
// whom temperature 0 means "the most likely token".
//
// Non-finite logits: NaN counts as -inf (never chosen); +inf counts as the largest finite float
// (such tokens share the probability mass). When no token has a finite-or-+inf logit after bias
// and penalties, sample() throws std::runtime_error: the scheduler should end that request with
// an error rather than invent a token.
//
// Precision: weights are computed in float (exp accurate to 1e-6 relative) and summed in float
// lanes or doubles; a token more than 87 (times the temperature) below the best one gets weight
// exactly 0, its true share being under 1.6e-38.
//
// Cost (bench/sampling): with top-k only the k best tokens are ever copied; without top-k, the
// whole-vocabulary work is a few vectorized passes over one float array, and top-p ranks only
// the best 64 tokens unless those do not carry the mass. DRY costs O(its window) per token (prompt
// included with -1), top-n-sigma three vectorized passes, mirostat one whole-vocabulary pass
// plus a walk over what it keeps (which, as its target grows, can be most of the vocabulary).
//
// Determinism: the RNG is a std::mt19937_64 seeded with params.seed (or from
// std::random_device when absent); each non-greedy sample() consumes exactly one 64-bit draw
// (two with XTC on: its coin first) and turns each into a double without library-specific
// distributions, so the same params, seed and logits sequence give the same tokens (across standard
// libraries too; a different compiler or vector width may round sums differently, which can move a
// draw that falls within ~1e-7 of a boundary).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/grammar/constraint.h"
#include "engine/sampling/params.h"

namespace ggufd::sampling {

// Whether a Sampler for these params needs the vocabulary's token bytes (a grammar, a reasoning
// budget, DRY's sequence breakers).
bool needs_vocabulary(const SamplingParams& params);

// Throws std::invalid_argument naming the offending field, e.g. "top_p must be in [0, 1], got
// 1.5", so the HTTP layer can answer 400 with the message. Does not need the vocabulary; the
// Sampler constructor additionally checks logit_bias token ids against n_vocab.
void validate(const SamplingParams& params);
// Also checks the request against a vocabulary of n_vocab tokens (logit_bias ids). Both throw
// InvalidParam (a std::invalid_argument) naming the request parameter.
void validate(const SamplingParams& params, int32_t n_vocab);

// A token and its log-probability under the model's raw distribution.
struct Logprob {
    int32_t token = 0;
    float logprob = 0.0f;  // <= 0; -inf for a token the model gives no chance (JSON writers must
                           // map it, OpenAI prints -9999)
};

// Log-probabilities as OpenAI reports them: log-softmax of the model's raw logits, before logit
// bias, penalties, temperature and truncation (what the model thinks, not what the sampler did;
// vLLM's default "raw_logprobs" makes the same choice). Returns the chosen token first, then the
// top_n most likely tokens in descending order (ties: lower id first); the chosen token appears
// again among them when it is one of the top_n, as in OpenAI's top_logprobs list.
// Throws std::invalid_argument when chosen is out of range or top_n < 0.
std::vector<Logprob> compute_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n);

class Sampler {
  public:
    // Validates params against the vocabulary (validate(params, n_vocab)). A grammar (and what
    // else needs_vocabulary() names) needs the vocabulary's token bytes (`vocabulary`, shared by
    // every sequence of a model); otherwise it is not used and may be null.
    Sampler(const SamplingParams& params, int32_t n_vocab,
            std::shared_ptr<const grammar::TokenVocabulary> vocabulary = nullptr);

    // Applies the chain to one position's logits (size must equal n_vocab) and returns the
    // token. Does not accept() it: the caller decides what enters the penalty window.
    int32_t sample(std::span<const float> logits);

    // Records a generated token: in the penalty window, and as the grammar's next token (which
    // throws std::invalid_argument for a token the grammar does not allow). Throws
    // std::out_of_range for an invalid id.
    void accept(int32_t token);
    // Records tokens that were not generated (the prompt, for penalties): the penalty and DRY
    // windows only.
    void accept(std::span<const int32_t> tokens);
    // With a grammar: whether the text generated so far is a whole sentence of it (a lazy
    // grammar that no trigger started owes nothing).
    bool grammar_complete() const { return !grammar_active_ || grammar_->complete(); }
    // Whether the grammar lets `token` come next (any token without one, or while a lazy one
    // waits): a speculative draft stops before a token it forbids.
    bool grammar_allows(int32_t token) { return !grammar_active_ || grammar_->allows(token); }
    // Whether the grammar constrains the next token (always, unless it is lazy and waiting).
    bool grammar_active() const { return grammar_active_; }
    // Whether the next token is the reasoning budget's (the block's closing markup, forced).
    bool forcing_reasoning_end() const { return budget_ == Budget::forcing; }

    // Diagnostics (and tests) of what sample() does, without consuming randomness:
    // the logits after logit bias and penalties (non-finite values sanitized as above) ...
    std::vector<float> adjusted_logits(std::span<const float> logits);
    // ... and the tokens the final draw would choose from (those with a -inf logit left out),
    // in ascending id order; the argmax alone when temperature == 0. XTC's coin is the one the
    // next sample() tosses.
    std::vector<int32_t> candidates(std::span<const float> logits);

    // compute_logprobs() with params.top_logprobs alternatives; empty when top_logprobs < 0.
    // With params.post_sampling_logprobs, of the distribution the last sample() drew from instead
    // (call it right after that sample(), with its token): the candidates the chain kept, at its
    // temperature, the chosen token first, then at most top_logprobs alternatives with a chance
    // (fewer when fewer are left); greedy decoding and a forced token are the chosen one alone,
    // at log 1 = 0. Reuses the sampler's scratch memory, hence not const.
    std::vector<Logprob> logprobs(std::span<const float> logits, int32_t chosen);

    const SamplingParams& params() const { return params_; }
    int32_t n_vocab() const { return n_vocab_; }
    uint64_t seed() const { return seed_; }  // the one in use, also when drawn at random

  private:
    struct Candidate {
        int32_t id;
        float logit;
        float prob;  // scratch: probability or weight, as the current step needs
        float key;   // scratch: the ordering key of the current filter
    };
    struct Adjusted {  // a token whose logit bias or penalties change
        int32_t id;
        float logit;
    };

    bool penalties_active() const;
    bool dry_active() const;
    void record(int32_t token);  // the penalty and DRY windows
    void record_dry(int32_t token);
    void collect_dry();  // dry_repeat_: the tokens DRY penalizes, with their repetition length
    float dry_penalty(int32_t token) const;
    std::span<const float> constrain(std::span<const float> logits);  // step 0
    void check_size(std::span<const float> logits) const;
    void run_filters(std::span<const float> logits);  // steps 1-6 into cand_
    void collect_adjusted(std::span<const float> logits);
    int32_t greedy(std::span<const float> logits) const;
    void gather_top_k(std::span<const float> logits, int32_t k);
    void gather_all(std::span<const float> logits);
    float sigma_floor(std::span<const float> logits);  // step 4's threshold
    void apply_top_n_sigma(std::span<const float> logits);
    void apply_top_n_sigma_to_candidates();
    void apply_typical();
    void apply_top_p();
    void apply_min_p();
    void apply_xtc();
    void run_in_order(std::span<const float> logits);  // steps 4-10 in params.order
    float dynamic_temperature() const;
    int32_t draw();
    // One draw among cand_ at temperature `temp`: the chosen index, and its probability in `prob`.
    size_t draw_from(float temp, double& prob);
    void mirostat_keep(std::span<const float> logits);  // cand_ = what mirostat draws from
    int32_t mirostat_draw();
    bool needs_candidates() const;  // any step beyond one fixed temperature (steps 4-10)
    int32_t draw_all(std::span<const float> logits);
    float load_logits(std::span<const float> logits);  // work_ = adjusted logits; their max
    bool top_p_from_the_top(std::span<const float> logits);
    double next_uniform();

    SamplingParams params_;
    int32_t n_vocab_ = 0;
    uint64_t seed_ = 0;
    std::mt19937_64 rng_;

    std::vector<std::pair<int32_t, float>> bias_;  // sorted by id, duplicates summed
    std::vector<int32_t> window_;                  // ring buffer of recent tokens
    size_t window_next_ = 0;                       // where the next token goes once full
    std::unordered_map<int32_t, int32_t> counts_;  // occurrences in window_

    // DRY: the accepted tokens (the last dry_penalty_last_n once trimmed), whether a sequence
    // breaker ends in each, and the text that may hold a breaker's beginning.
    std::vector<int32_t> dry_tokens_;
    std::vector<unsigned char> dry_breaks_;
    std::string dry_text_;
    std::vector<int32_t> dry_z_;                           // scratch: matches of the suffix
    std::vector<std::pair<int32_t, int32_t>> dry_repeat_;  // token -> repetition, sorted by id

    double mirostat_mu_ = 0.0;  // mirostat's target surprise, learned across tokens

    // What the last sample() drew from, for the logprobs after the chain: one token, the whole
    // vocabulary (weights_, at the temperature) or cand_ (each one's weight in `prob`).
    enum class Drawn : unsigned char { one, vocabulary, candidates };
    Drawn drawn_ = Drawn::one;
    std::vector<Logprob> drawn_logprobs(int32_t chosen, int32_t top_n);

    // Scratch reused across calls so sampling does not allocate per token.
    std::vector<Adjusted> adjusted_;  // sorted by id
    std::vector<Candidate> cand_;
    std::vector<float> work_;         // whole-vocabulary paths: adjusted, sanitized logits
    std::vector<float> weights_;      // whole-vocabulary paths: e^(logit - max) per token
    std::vector<double> block_sums_;  // draw_all: the weights summed per block
    bool sorted_desc_ = false;        // cand_ is ordered by logit, best first

    std::unique_ptr<grammar::Constraint> grammar_;  // null: no grammar
    std::vector<float> masked_;                     // the logits with the grammar's mask
    // A lazy grammar (grammar_triggers) waits for a trigger in the generated text.
    void watch_triggers(int32_t token);
    // The reasoning budget: waiting for the block to open, counting, forcing its closer.
    enum class Budget : unsigned char { done, watching, counting, forcing };
    void follow_budget(int32_t token);
    Budget budget_ = Budget::done;
    int32_t budget_used_ = 0;
    size_t budget_forced_ = 0;  // closing tokens written
    std::string budget_text_;   // the block's recent text
    std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
    bool grammar_active_ = false;
    std::string trigger_tail_;
};

}  // namespace ggufd::sampling
