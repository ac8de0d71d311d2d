#include "engine/sampling/sampler.h"

#include "engine/sampling/fast_exp.h"
#include "text/utf8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <iterator>
#include <limits>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ggufd::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// OpenAI documents logit_bias values in [-100, 100] and says -100 should ban the token.
constexpr float kBanBias = -100.0f;

// NaN is treated as "impossible" and +inf as "the most likely there is" (see sampler.h).
inline float sanitize(float v) {
    if (std::isnan(v)) return kNegInf;
    return std::min(v, FLT_MAX);
}

template <class T>
[[noreturn]] void invalid(const char* field, const char* rule, T got, const char* param = nullptr) {
    std::ostringstream msg;
    msg << field << " must be " << rule << ", got " << got;
    throw InvalidParam(param ? param : field, msg.str());
}

// Orders candidates best first; the id decides ties so every selection is deterministic. A
// function object rather than a function pointer, so the standard algorithms inline it.
struct Better {
    template <class C>
    bool operator()(const C& a, const C& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};
constexpr Better better;

// A min-heap (worst on top) keeping the k best of what is offered.
template <class C>
class BestK {
  public:
    BestK(std::vector<C>& out, size_t k) : out_(out), k_(k) {
        out_.clear();
        out_.reserve(k);
    }

    void offer(const C& c) {
        if (out_.size() < k_) {
            out_.push_back(c);
            std::push_heap(out_.begin(), out_.end(), better);
        } else if (better(c, out_.front())) {
            std::pop_heap(out_.begin(), out_.end(), better);
            out_.back() = c;
            std::push_heap(out_.begin(), out_.end(), better);
        }
    }

    // Offers logits[begin, end) unchanged. The ids grow along the walk, so once the heap is
    // full a token needs a strictly larger logit than the worst kept one to get in: the hot
    // loop is one comparison per token (a NaN compares false and is skipped).
    template <class Make>
    void offer_range(std::span<const float> logits, size_t begin, size_t end, Make make) {
        size_t i = begin;
        for (; i < end && out_.size() < k_; ++i)
            offer(make(static_cast<int32_t>(i), sanitize(logits[i])));
        for (; i < end; ++i) {
            const float v = logits[i];
            if (v > out_.front().logit) offer(make(static_cast<int32_t>(i), sanitize(v)));
        }
    }

    void sort_best_first() { std::sort_heap(out_.begin(), out_.end(), better); }

  private:
    std::vector<C>& out_;
    size_t k_;
};

// Moves the `count` elements of [first, last) that come first under `less` (a strict total
// order) to the front, in no particular order. For small counts one pass with a heap of the
// best so far finds the count-th element and a partition moves the few winners forward: much
// cheaper than nth_element shuffling the whole vocabulary.
template <class It, class Less>
void select_front(It first, It last, size_t count, Less less) {
    const auto n = static_cast<size_t>(last - first);
    if (count == 0 || count >= n) return;
    if (count > 1024) {
        std::nth_element(first, first + static_cast<std::ptrdiff_t>(count), last, less);
        return;
    }
    const It mid = first + static_cast<std::ptrdiff_t>(count);
    std::vector<typename std::iterator_traits<It>::value_type> best(first, mid);
    std::make_heap(best.begin(), best.end(), less);  // the worst kept one on top
    for (It it = mid; it != last; ++it) {
        if (less(*it, best.front())) {
            std::pop_heap(best.begin(), best.end(), less);
            best.back() = *it;
            std::push_heap(best.begin(), best.end(), less);
        }
    }
    const auto pivot = best.front();
    std::partition(first, last, [&](const auto& x) { return !less(pivot, x); });
}

// Moves the candidates that come first under `less` to the front, in order, until their
// accumulated mass passes `target` (>= target, or > target when `strict`), and returns how many
// that took (at least 1, at most all). Sorting grows in chunks so the common case, where a few
// hundred tokens carry the mass, never sorts the whole vocabulary.
template <class C, class Less, class Mass>
size_t take_until(std::vector<C>& cand, Less less, Mass mass, double target, bool strict) {
    const size_t n = cand.size();
    size_t done = 0;
    size_t chunk = 64;
    double cum = 0.0;
    while (done < n) {
        const size_t end = std::min(n, done + chunk);
        if (end < n) select_front(cand.begin() + done, cand.end(), end - done, less);
        std::sort(cand.begin() + done, cand.begin() + end, less);
        for (size_t i = done; i < end; ++i) {
            cum += mass(cand[i]);
            if (strict ? cum > target : cum >= target) return i + 1;
        }
        done = end;
        chunk *= 4;
    }
    return n;
}

// The max logit and sum(exp(logit - max)) of the candidates. Probabilities are formed as
// exp(logit - max) / sum, never as exp(logit - log_z): with logits near FLT_MAX (+inf inputs)
// max + log(sum) rounds away the log(sum).
// Raises (best, best_id) to the largest sanitized logit in [begin, end), ties to the lowest id;
// every id in the range is above best_id. Eight independent lanes: a single running maximum
// would chain every comparison to the previous one and run at the compare-and-select latency.
inline void argmax_range(std::span<const float> logits, size_t begin, size_t end, float& best,
                         int32_t& best_id) {
    constexpr size_t kLanes = 8;
    float lane_best[kLanes];
    size_t lane_id[kLanes];
    for (size_t j = 0; j < kLanes; ++j) {
        lane_best[j] = kNegInf;
        lane_id[j] = end;
    }
    size_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
        for (size_t j = 0; j < kLanes; ++j) {
            const float v = std::min(logits[i + j], FLT_MAX);  // NaN stays NaN, never wins
            if (v > lane_best[j]) {
                lane_best[j] = v;
                lane_id[j] = i + j;
            }
        }
    }
    for (; i < end; ++i) {
        const float v = std::min(logits[i], FLT_MAX);
        if (v > lane_best[0]) {  // the tail's ids are above lane 0's: ties stay put
            lane_best[0] = v;
            lane_id[0] = i;
        }
    }
    for (size_t j = 0; j < kLanes; ++j) {
        if (lane_id[j] == end) continue;  // the lane saw nothing above -inf
        if (lane_best[j] > best ||
            (lane_best[j] == best && static_cast<int32_t>(lane_id[j]) < best_id)) {
            best = lane_best[j];
            best_id = static_cast<int32_t>(lane_id[j]);
        }
    }
}

// Reductions over a contiguous array in eight independent float lanes: a single accumulator
// would chain every step to the previous one, and lanes let the compiler use vector registers
// without changing the rounding it must preserve. f maps each element first.
constexpr size_t kLanes = 8;

template <class F>
float lane_max(const float* v, size_t n, F f) {
    float acc[kLanes];
    std::fill(acc, acc + kLanes, kNegInf);
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) acc[j] = std::max(acc[j], f(v[i + j]));
    for (; i < n; ++i) acc[0] = std::max(acc[0], f(v[i]));
    return *std::max_element(acc, acc + kLanes);
}

template <class F>
double lane_sum(const float* v, size_t n, F f) {
    float acc[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (size_t j = 0; j < kLanes; ++j) acc[j] += f(v[i + j]);
    for (; i < n; ++i) acc[0] += f(v[i]);
    double sum = 0.0;
    for (float a : acc) sum += a;
    return sum;
}

// out[i] = e^((sanitize(v[i]) - max) / temp), exactly 0 below kExpFloor. Two plain loops
// rather than one with a branch, so that both vectorize.
void exp_weights(const float* v, float* out, size_t n, float max, float temp) {
    for (size_t i = 0; i < n; ++i) {
        const float x = (sanitize(v[i]) - max) / temp;
        out[i] = x > kExpFloor ? x : kExpFloor;
    }
    for (size_t i = 0; i < n; ++i) {
        const float alive = out[i] > kExpFloor ? 1.0f : 0.0f;  // a multiply, not a branch
        out[i] = exp_in_range(out[i]) * alive;
    }
}

double sum_of(const float* v, size_t n) {
    return lane_sum(v, n, [](float x) { return x; });
}

struct Partition {
    double max;
    double sum;
};

template <class C>
Partition partition(const std::vector<C>& cand) {
    float max = kNegInf;
    for (const C& c : cand) max = std::max(max, c.logit);
    double sum = 0.0;
    for (const C& c : cand) sum += fast_exp_nonpositive(c.logit - max);
    return {max, sum};
}

bool dry_on(const SamplingParams& p) {
    return p.dry_multiplier > 0.0f && p.dry_penalty_last_n != 0;
}

}  // namespace

bool needs_vocabulary(const SamplingParams& p) {
    return p.grammar || p.reasoning_budget.tokens >= 0 ||
           (dry_on(p) && !p.dry_sequence_breakers.empty());
}

void validate(const SamplingParams& p) {
    if (!(std::isfinite(p.temperature) && p.temperature >= 0.0f))
        invalid("temperature", "a finite number >= 0", p.temperature);
    if (p.top_k < 0) invalid("top_k", ">= 0 (0 disables it)", p.top_k);
    // OpenAI accepts top_p = 0; the smallest prefix reaching 0 is the most likely token alone.
    if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) invalid("top_p", "in [0, 1]", p.top_p);
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) invalid("min_p", "in [0, 1]", p.min_p);
    if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f))
        invalid("typical_p", "in (0, 1]", p.typical_p);
    if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f))
        invalid("repeat_penalty", "a finite number > 0", p.repeat_penalty);
    if (p.penalty_last_n < -1)
        invalid("repeat_last_n (penalty_last_n)", ">= -1 (-1 means every token)", p.penalty_last_n,
                "repeat_last_n");
    if (!std::isfinite(p.presence_penalty))
        invalid("presence_penalty", "a finite number", p.presence_penalty);
    if (!std::isfinite(p.frequency_penalty))
        invalid("frequency_penalty", "a finite number", p.frequency_penalty);
    for (const auto& [token, bias] : p.logit_bias) {
        if (token < 0) invalid("logit_bias token id", ">= 0", token, "logit_bias");
        if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity())
            invalid("logit_bias value", "a finite number (or -inf to ban)", bias, "logit_bias");
    }
    if (!(std::isfinite(p.dry_multiplier) && p.dry_multiplier >= 0.0f))
        invalid("dry_multiplier", "a finite number >= 0 (0 disables DRY)", p.dry_multiplier);
    if (!(std::isfinite(p.dry_base) && p.dry_base >= 1.0f))
        invalid("dry_base", "a finite number >= 1", p.dry_base);
    if (p.dry_allowed_length < 0) invalid("dry_allowed_length", ">= 0", p.dry_allowed_length);
    if (p.dry_penalty_last_n < -1)
        invalid("dry_penalty_last_n", ">= -1 (-1 means every token, 0 disables DRY)",
                p.dry_penalty_last_n);
    for (const std::string& breaker : p.dry_sequence_breakers) {
        if (breaker.empty())
            throw InvalidParam("dry_sequence_breakers",
                               "dry_sequence_breakers must not hold an empty string");
    }
    if (!(p.xtc_probability >= 0.0f && p.xtc_probability <= 1.0f))
        invalid("xtc_probability", "in [0, 1]", p.xtc_probability);
    if (!(p.xtc_threshold >= 0.0f && p.xtc_threshold <= 1.0f))
        invalid("xtc_threshold", "in [0, 1]", p.xtc_threshold);
    if (!std::isfinite(p.top_n_sigma))
        invalid("top_n_sigma", "a finite number (<= 0 disables it)", p.top_n_sigma);
    if (!(std::isfinite(p.dynatemp_range) && p.dynatemp_range >= 0.0f))
        invalid("dynatemp_range", "a finite number >= 0 (0 disables it)", p.dynatemp_range);
    if (!(std::isfinite(p.dynatemp_exponent) && p.dynatemp_exponent >= 0.0f))
        invalid("dynatemp_exponent", "a finite number >= 0", p.dynatemp_exponent);
    if (p.mirostat < 0 || p.mirostat > 2) invalid("mirostat", "0 (off), 1 or 2", p.mirostat);
    if (!(std::isfinite(p.mirostat_tau) && p.mirostat_tau >= 0.0f))
        invalid("mirostat_tau", "a finite number >= 0", p.mirostat_tau);
    if (!(std::isfinite(p.mirostat_eta) && p.mirostat_eta >= 0.0f))
        invalid("mirostat_eta", "a finite number >= 0", p.mirostat_eta);
    if (p.top_logprobs < -1)
        invalid("top_logprobs", ">= -1 (-1 disables logprobs)", p.top_logprobs);
    if (!p.grammar_triggers.empty() && !p.grammar)
        throw InvalidParam("grammar_triggers", "grammar triggers need a grammar");
    for (const std::string& trigger : p.grammar_triggers) {
        if (trigger.empty()) throw InvalidParam("grammar_triggers", "a grammar trigger is empty");
    }
    const SamplingParams::ReasoningBudget& b = p.reasoning_budget;
    if (b.tokens < -1) invalid("reasoning_budget_tokens", ">= -1 (-1: no budget)", b.tokens);
    if (b.tokens >= 0 && (b.close.empty() || b.close_text.empty()))
        throw InvalidParam("reasoning_budget_tokens",
                           "a reasoning budget needs the closing markup");
}

void validate(const SamplingParams& p, int32_t n_vocab) {
    validate(p);
    if (n_vocab <= 0) invalid("n_vocab", "> 0", n_vocab);
    for (int32_t token : p.reasoning_budget.close) {
        if (token < 0 || token >= n_vocab)
            invalid("reasoning budget closing token", "a token id of the vocabulary", token,
                    "reasoning_budget_tokens");
    }
    for (const auto& [token, bias] : p.logit_bias) {
        if (token >= n_vocab) {
            std::ostringstream msg;
            msg << "logit_bias token id must be < " << n_vocab << " (the vocabulary size), got "
                << token;
            throw InvalidParam("logit_bias", msg.str());
        }
    }
}

namespace {

// compute_logprobs with a caller-owned buffer for the per-token weights.
std::vector<Logprob> logprobs_with(std::span<const float> logits, int32_t chosen, int32_t top_n,
                                   std::vector<float>& weights) {
    const size_t n = logits.size();
    if (n == 0) throw std::invalid_argument("logprobs: the logits are empty");
    if (chosen < 0 || static_cast<size_t>(chosen) >= n)
        invalid("logprobs: chosen token", "a valid token id", chosen);
    if (top_n < 0) invalid("logprobs: top_n", ">= 0", top_n);

    const float max = lane_max(logits.data(), n, sanitize);
    weights.resize(n);
    exp_weights(logits.data(), weights.data(), n, max, 1.0f);
    const double log_sum = std::log(sum_of(weights.data(), n));
    // With every logit -inf there is no distribution: every token is reported impossible.
    auto logprob_of = [&](float v) {
        v = sanitize(v);
        if (v == kNegInf) return kNegInf;
        return static_cast<float>(std::min(0.0, (static_cast<double>(v) - max) - log_sum));
    };

    // top_n may exceed the vocabulary (the engine does not cap it; the HTTP layer does).
    const size_t listed = std::min(n, static_cast<size_t>(top_n));
    std::vector<Logprob> out;
    out.reserve(listed + 1);
    out.push_back({chosen, logprob_of(logits[chosen])});

    struct Scored {
        int32_t id;
        float logit;
    };
    std::vector<Scored> best;
    BestK<Scored> heap(best, listed);
    if (top_n > 0) {
        heap.offer_range(logits, 0, n, [](int32_t id, float v) { return Scored{id, v}; });
        heap.sort_best_first();
    }
    for (const Scored& s : best) out.push_back({s.id, logprob_of(s.logit)});
    return out;
}

}  // namespace

std::vector<Logprob> compute_logprobs(std::span<const float> logits, int32_t chosen,
                                      int32_t top_n) {
    std::vector<float> weights;
    return logprobs_with(logits, chosen, top_n, weights);
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab,
                 std::shared_ptr<const grammar::TokenVocabulary> vocabulary)
    : params_(params), n_vocab_(n_vocab) {
    validate(params_, n_vocab_);
    const bool budget = params_.reasoning_budget.tokens >= 0;
    if (needs_vocabulary(params_)) {
        if (!vocabulary) {
            throw InvalidParam(params_.grammar ? "grammar"
                               : budget        ? "reasoning_budget_tokens"
                                               : "dry_sequence_breakers",
                               "needs the model's token vocabulary");
        }
        vocabulary_ = vocabulary;
    }
    mirostat_mu_ = 2.0 * params_.mirostat_tau;
    if (budget) {
        budget_ = params_.reasoning_budget.starts_open         ? Budget::counting
                  : params_.reasoning_budget.open_text.empty() ? Budget::done
                                                               : Budget::watching;
        if (budget_ == Budget::counting && params_.reasoning_budget.tokens == 0) {
            budget_ = Budget::forcing;
        }
    }
    if (params_.grammar) {
        if (vocabulary->size() != n_vocab_) {
            throw std::invalid_argument("the grammar's vocabulary has " +
                                        std::to_string(vocabulary->size()) + " tokens, the model " +
                                        std::to_string(n_vocab_));
        }
        grammar_ = std::make_unique<grammar::Constraint>(params_.grammar, vocabulary);
        vocabulary_ = std::move(vocabulary);
        grammar_active_ = params_.grammar_triggers.empty();
    }
    for (const auto& [token, bias] : params_.logit_bias) {
        // A copy, not the binding: lambdas may capture structured bindings only from clang 16.
        const int32_t id = token;
        auto it =
            std::find_if(bias_.begin(), bias_.end(), [&](const auto& b) { return b.first == id; });
        if (it == bias_.end())
            bias_.emplace_back(token, bias);
        else
            it->second += bias;
    }
    std::sort(bias_.begin(), bias_.end());

    if (params_.seed) {
        seed_ = *params_.seed;
    } else {
        std::random_device rd;
        seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
    rng_.seed(seed_);
}

bool Sampler::dry_active() const {
    return dry_on(params_);
}

bool Sampler::penalties_active() const {
    return params_.penalty_last_n != 0 &&
           (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
            params_.frequency_penalty != 0.0f);
}

void Sampler::accept(int32_t token) {
    record(token);
    if (grammar_) {
        if (grammar_active_) {
            grammar_->accept(token);
        } else {
            watch_triggers(token);
        }
    }
    // After the grammar: whether the closer may be written next depends on its new position.
    if (budget_ != Budget::done) follow_budget(token);
}

// The reasoning budget's state after a token: the block opening, its tokens counted, its end
// (on its own, or forced).
void Sampler::follow_budget(int32_t token) {
    const SamplingParams::ReasoningBudget& b = params_.reasoning_budget;
    switch (budget_) {
        case Budget::watching: {
            budget_text_ += vocabulary_->bytes(token);
            const size_t first = budget_text_.find_first_not_of(" \t\r\n");
            const std::string_view text = first == std::string::npos
                                              ? std::string_view()
                                              : std::string_view(budget_text_).substr(first);
            if (text.starts_with(b.open_text)) {
                budget_text_ = std::string(text.substr(b.open_text.size()));
                budget_ = b.tokens == 0 ? Budget::forcing : Budget::counting;
            } else if (!std::string_view(b.open_text).starts_with(text)) {
                budget_ = Budget::done;  // the reply does not begin with reasoning
            }
            return;
        }
        case Budget::counting:
            ++budget_used_;
            budget_text_ += vocabulary_->bytes(token);
            if (budget_text_.find(b.close_text) != std::string::npos) {
                budget_ = Budget::done;
                return;
            }
            // Not inside a character, and where a grammar takes the closer (a call grammar's
            // reasoning text cannot end inside the beginning of its markup, `</th` or `<tool_ca`):
            // else the model writes on until it can be closed.
            if (budget_used_ >= b.tokens &&
                text::complete_prefix_length(budget_text_) == budget_text_.size() &&
                (!grammar_ || !grammar_active_ || grammar_->allows(b.close[0]))) {
                budget_ = Budget::forcing;
            }
            // What may still hold the start of the closer, or of a character being written.
            if (budget_text_.size() > b.close_text.size() + 4) {
                budget_text_.erase(0, budget_text_.size() - b.close_text.size() - 4);
            }
            return;
        case Budget::forcing:
            if (++budget_forced_ == b.close.size()) budget_ = Budget::done;
            return;
        case Budget::done:
            return;
    }
}

// A lazy grammar's search for its triggers in the text generated so far (the tail that may
// still hold the start of one).
void Sampler::watch_triggers(int32_t token) {
    trigger_tail_ += vocabulary_->bytes(token);
    size_t longest = 0;
    for (;;) {
        size_t at = std::string::npos;
        for (const std::string& t : params_.grammar_triggers) {
            at = std::min(at, trigger_tail_.find(t));
            longest = std::max(longest, t.size());
        }
        if (at == std::string::npos) break;
        if (grammar_->accept_bytes(std::string_view(trigger_tail_).substr(at))) {
            grammar_active_ = true;
            trigger_tail_.clear();
            return;
        }
        trigger_tail_.erase(0, at + 1);
    }
    if (trigger_tail_.size() >= longest) trigger_tail_.erase(0, trigger_tail_.size() - longest + 1);
}

void Sampler::record(int32_t token) {
    if (token < 0 || token >= n_vocab_) {
        std::ostringstream msg;
        msg << "Sampler::accept: token id " << token << " outside the vocabulary of " << n_vocab_;
        throw std::out_of_range(msg.str());
    }
    if (dry_active()) record_dry(token);
    if (!penalties_active()) return;
    if (params_.penalty_last_n > 0) {
        const size_t cap = static_cast<size_t>(params_.penalty_last_n);
        if (window_.size() < cap) {
            window_.push_back(token);
        } else {
            const int32_t old = window_[window_next_];
            if (--counts_[old] == 0) counts_.erase(old);
            window_[window_next_] = token;
            window_next_ = (window_next_ + 1) % cap;
        }
    }
    ++counts_[token];  // with penalty_last_n == -1 the window is everything, only counts matter
}

void Sampler::record_dry(int32_t token) {
    bool breaks = false;
    if (vocabulary_ && !params_.dry_sequence_breakers.empty()) {
        const size_t before = dry_text_.size();
        dry_text_ += vocabulary_->bytes(token);
        size_t longest = 0;
        for (const std::string& b : params_.dry_sequence_breakers) {
            longest = std::max(longest, b.size());
            // Only an occurrence that ends in this token's bytes: earlier ones were seen before.
            const size_t from = before + 1 >= b.size() ? before + 1 - b.size() : 0;
            if (dry_text_.find(b, from) != std::string::npos) breaks = true;
        }
        if (dry_text_.size() >= longest) dry_text_.erase(0, dry_text_.size() + 1 - longest);
    }
    dry_tokens_.push_back(token);
    dry_breaks_.push_back(breaks ? 1 : 0);
    // Trimmed in halves, so that a token costs O(1) on average.
    if (params_.dry_penalty_last_n > 0) {
        const auto cap = static_cast<size_t>(params_.dry_penalty_last_n);
        if (dry_tokens_.size() >= 2 * cap) {
            const auto cut = static_cast<std::ptrdiff_t>(dry_tokens_.size() - cap);
            dry_tokens_.erase(dry_tokens_.begin(), dry_tokens_.begin() + cut);
            dry_breaks_.erase(dry_breaks_.begin(), dry_breaks_.begin() + cut);
        }
    }
}

// DRY's repetitions: for every earlier position of the window, how many tokens ending there
// equal the window's last ones (the Z-function of the window read backwards, in O(window)), so
// the token that followed them would extend the repetition; per token, the longest.
void Sampler::collect_dry() {
    dry_repeat_.clear();
    const auto allowed = static_cast<size_t>(params_.dry_allowed_length);
    size_t len = dry_tokens_.size();
    if (params_.dry_penalty_last_n > 0)
        len = std::min(len, static_cast<size_t>(params_.dry_penalty_last_n));
    if (len <= allowed || len < 2) return;
    const size_t first = dry_tokens_.size() - len;
    const int32_t* w = dry_tokens_.data() + first;
    // A repetition does not reach back across a sequence breaker.
    size_t limit = len;
    for (size_t i = len; i-- > 0;) {
        if (dry_breaks_[first + i]) {
            limit = len - 1 - i;
            break;
        }
    }
    if (limit < allowed) return;
    auto back = [&](size_t r) { return w[len - 1 - r]; };  // the r-th token from the end
    dry_z_.assign(len, 0);
    size_t box_l = 0, box_r = 0;  // the match reaching furthest so far: [box_l, box_r)
    for (size_t k = 1; k < len; ++k) {
        size_t n = 0;
        if (k < box_r) n = std::min(box_r - k, static_cast<size_t>(dry_z_[k - box_l]));
        while (k + n < len && back(n) == back(k + n)) ++n;
        dry_z_[k] = static_cast<int32_t>(n);
        if (k + n > box_r) {
            box_l = k;
            box_r = k + n;
        }
        const size_t repeat = std::min(n, limit);
        if (repeat >= allowed) dry_repeat_.emplace_back(w[len - k], static_cast<int32_t>(repeat));
    }
    // By id, the longest repetition first; then one entry per token.
    std::sort(dry_repeat_.begin(), dry_repeat_.end(), [](const auto& a, const auto& b) {
        return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    dry_repeat_.erase(std::unique(dry_repeat_.begin(), dry_repeat_.end(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; }),
                      dry_repeat_.end());
}

void Sampler::accept(std::span<const int32_t> tokens) {
    for (int32_t t : tokens) record(t);
}

std::vector<Logprob> Sampler::logprobs(std::span<const float> logits, int32_t chosen) {
    if (params_.top_logprobs < 0) return {};
    if (params_.post_sampling_logprobs) return drawn_logprobs(chosen, params_.top_logprobs);
    return logprobs_with(logits, chosen, params_.top_logprobs, weights_);
}

std::vector<Logprob> Sampler::drawn_logprobs(int32_t chosen, int32_t top_n) {
    if (chosen < 0 || chosen >= n_vocab_)
        invalid("logprobs: chosen token", "a valid token id", chosen);
    std::vector<Logprob> out;
    if (drawn_ == Drawn::one) {
        out.push_back({chosen, 0.0f});
        if (top_n > 0) out.push_back({chosen, 0.0f});
        return out;
    }
    struct Weighed {
        int32_t id;
        float logit;  // the token's weight: BestK ranks by this field
    };
    std::vector<Weighed> best;
    BestK<Weighed> heap(best, static_cast<size_t>(std::max(top_n, 0)));
    double sum = 0.0;
    float chosen_weight = 0.0f;
    if (drawn_ == Drawn::vocabulary) {
        sum = sum_of(weights_.data(), weights_.size());
        chosen_weight = weights_[static_cast<size_t>(chosen)];
        if (top_n > 0) {
            heap.offer_range(weights_, 0, weights_.size(), [](int32_t id, float w) {
                return Weighed{id, w};
            });
        }
    } else {
        for (const Candidate& c : cand_) {
            sum += c.prob;
            if (c.id == chosen) chosen_weight = c.prob;
            if (top_n > 0) heap.offer({c.id, c.prob});
        }
    }
    heap.sort_best_first();
    auto logprob_of = [sum](float weight) {
        return weight > 0.0f ? static_cast<float>(std::min(0.0, std::log(weight / sum))) : kNegInf;
    };
    out.push_back({chosen, logprob_of(chosen_weight)});
    for (const Weighed& w : best)
        if (w.logit > 0.0f) out.push_back({w.id, logprob_of(w.logit)});
    return out;
}

// The few tokens whose logit the bias or the penalties change, with their new logits.
void Sampler::collect_adjusted(std::span<const float> logits) {
    adjusted_.clear();
    for (const auto& b : bias_) adjusted_.push_back({b.first, 0.0f});
    const bool penalize = penalties_active();
    const bool dry = dry_active();
    if (penalize) {
        for (const auto& c : counts_) adjusted_.push_back({c.first, 0.0f});
    }
    if (dry) {
        collect_dry();
        for (const auto& d : dry_repeat_) adjusted_.push_back({d.first, 0.0f});
    }
    if (penalize || dry) {
        std::sort(adjusted_.begin(), adjusted_.end(),
                  [](const Adjusted& a, const Adjusted& b) { return a.id < b.id; });
        adjusted_.erase(
            std::unique(adjusted_.begin(), adjusted_.end(),
                        [](const Adjusted& a, const Adjusted& b) { return a.id == b.id; }),
            adjusted_.end());
    }
    for (Adjusted& a : adjusted_) {
        float v = logits[a.id];
        auto b = std::lower_bound(bias_.begin(), bias_.end(), std::make_pair(a.id, kNegInf));
        if (b != bias_.end() && b->first == a.id)
            v = b->second <= kBanBias ? kNegInf : v + b->second;
        if (penalize) {
            auto c = counts_.find(a.id);
            if (c != counts_.end()) {
                v = v <= 0.0f ? v * params_.repeat_penalty : v / params_.repeat_penalty;
                v -= static_cast<float>(c->second) * params_.frequency_penalty +
                     params_.presence_penalty;
            }
        }
        if (dry) v -= dry_penalty(a.id);
        a.logit = sanitize(v);
    }
}

float Sampler::dry_penalty(int32_t token) const {
    auto d = std::lower_bound(dry_repeat_.begin(), dry_repeat_.end(), std::make_pair(token, 0),
                              [](const auto& a, const auto& b) { return a.first < b.first; });
    if (d == dry_repeat_.end() || d->first != token) return 0.0f;
    if (vocabulary_) {
        const std::string_view text = vocabulary_->bytes(token);
        for (const std::string& b : params_.dry_sequence_breakers)
            if (text.find(b) != std::string_view::npos) return 0.0f;
    }
    double exponent = d->second - params_.dry_allowed_length;
    // Capped where base^exponent would leave the floats (ln FLT_MAX = 88.72).
    if (params_.dry_base > 1.000001f)
        exponent = std::min(exponent, std::floor(88.7228391 / std::log(double(params_.dry_base))));
    return static_cast<float>(params_.dry_multiplier *
                              std::pow(double(params_.dry_base), exponent));
}

int32_t Sampler::greedy(std::span<const float> logits) const {
    int32_t best_id = -1;
    float best = kNegInf;
    // Walk the ids in order: plain stretches read the logits directly, adjusted tokens use their
    // new value. Strict comparisons keep the lowest id among equal logits.
    size_t next = 0;
    auto scan = [&](size_t end) { argmax_range(logits, next, end, best, best_id); };
    for (const Adjusted& a : adjusted_) {
        scan(static_cast<size_t>(a.id));
        if (a.logit > best) {
            best = a.logit;
            best_id = a.id;
        }
        next = static_cast<size_t>(a.id) + 1;
    }
    scan(logits.size());
    if (best_id < 0)
        throw std::runtime_error("sampling: every logit is NaN or -inf, no token can be chosen");
    return best_id;
}

void Sampler::gather_top_k(std::span<const float> logits, int32_t k) {
    BestK<Candidate> heap(cand_, static_cast<size_t>(k));
    auto make = [](int32_t id, float v) { return Candidate{id, v, 0.0f, 0.0f}; };
    size_t next = 0;
    for (const Adjusted& a : adjusted_) {
        heap.offer_range(logits, next, static_cast<size_t>(a.id), make);
        heap.offer(make(a.id, a.logit));
        next = static_cast<size_t>(a.id) + 1;
    }
    heap.offer_range(logits, next, logits.size(), make);
    heap.sort_best_first();
    sorted_desc_ = true;
}

void Sampler::gather_all(std::span<const float> logits) {
    cand_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)
        cand_[i] = Candidate{static_cast<int32_t>(i), sanitize(logits[i]), 0.0f, 0.0f};
    for (const Adjusted& a : adjusted_) cand_[static_cast<size_t>(a.id)].logit = a.logit;
    sorted_desc_ = false;
}

void Sampler::apply_typical() {
    if (params_.typical_p >= 1.0f || cand_.size() < 2) return;
    const Partition z = partition(cand_);
    const float max = static_cast<float>(z.max);
    const double log_sum = std::log(z.sum);
    double entropy = 0.0;
    for (Candidate& c : cand_) {
        const float shifted = c.logit - max;
        c.prob = static_cast<float>(fast_exp_nonpositive(shifted) / z.sum);
        c.key = static_cast<float>(shifted - log_sum);  // log p, for the ranking below
        if (c.logit != kNegInf) entropy -= c.prob * static_cast<double>(c.key);
    }
    // Rank by how far a token's information content is from the expected one.
    for (Candidate& c : cand_) {
        c.key = c.logit == kNegInf ? std::numeric_limits<float>::infinity()
                                   : static_cast<float>(std::abs(-c.key - entropy));
    }
    auto by_typicality = [](const Candidate& a, const Candidate& b) {
        return a.key < b.key || (a.key == b.key && a.id < b.id);
    };
    const size_t keep = take_until(
        cand_, by_typicality, [](const Candidate& c) { return double(c.prob); }, params_.typical_p,
        /*strict=*/true);
    cand_.resize(keep);
    sorted_desc_ = false;
}

void Sampler::apply_top_p() {
    if (params_.top_p >= 1.0f || cand_.size() < 2) return;
    const Partition z = partition(cand_);
    const float max = static_cast<float>(z.max);
    auto prob = [max, z](const Candidate& c) {
        return fast_exp_nonpositive(c.logit - max) / z.sum;
    };
    size_t keep = cand_.size();
    if (sorted_desc_) {
        double cum = 0.0;
        for (size_t i = 0; i < cand_.size(); ++i) {
            cum += prob(cand_[i]);
            if (cum >= params_.top_p) {
                keep = i + 1;
                break;
            }
        }
    } else {
        keep = take_until(cand_, better, prob, params_.top_p, /*strict=*/false);
    }
    cand_.resize(keep);
    sorted_desc_ = true;
}

void Sampler::apply_min_p() {
    if (params_.min_p <= 0.0f || cand_.size() < 2) return;
    float max = kNegInf;
    for (const Candidate& c : cand_) max = std::max(max, c.logit);
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p); the best token always passes.
    const float threshold = max + std::log(params_.min_p);
    auto end = std::stable_partition(cand_.begin(), cand_.end(),
                                     [&](const Candidate& c) { return c.logit >= threshold; });
    cand_.erase(end, cand_.end());
}

float Sampler::sigma_floor(std::span<const float> logits) {
    const float max = load_logits(logits);
    const float* w = work_.data();
    const size_t n = work_.size();
    auto finite = [](float v) { return v != kNegInf ? 1.0f : 0.0f; };
    const double count = lane_sum(w, n, finite);
    const auto mean =
        static_cast<float>(lane_sum(w, n, [](float v) { return v != kNegInf ? v : 0.0f; }) / count);
    const double var = lane_sum(w, n,
                                [mean](float v) {
                                    const float d = v != kNegInf ? v - mean : 0.0f;
                                    return d * d;
                                }) /
                       count;
    return static_cast<float>(max - params_.top_n_sigma * std::sqrt(var));
}

// Keeping a prefix by logit, it commutes with top-k: run after it, on the k it gathered.
void Sampler::apply_top_n_sigma(std::span<const float> logits) {
    if (params_.top_n_sigma <= 0.0f) return;
    const float floor = sigma_floor(logits);
    std::erase_if(cand_, [floor](const Candidate& c) { return c.logit < floor; });
}

// Top-n-sigma over the candidates left by the steps before it (a reordered chain).
void Sampler::apply_top_n_sigma_to_candidates() {
    if (params_.top_n_sigma <= 0.0f) return;
    double count = 0.0, mean = 0.0;
    float max = kNegInf;
    for (const Candidate& c : cand_) {
        if (c.logit == kNegInf) continue;
        count += 1.0;
        mean += c.logit;
        max = std::max(max, c.logit);
    }
    if (count == 0.0) return;
    mean /= count;
    double var = 0.0;
    for (const Candidate& c : cand_)
        if (c.logit != kNegInf) var += (c.logit - mean) * (c.logit - mean);
    const auto floor = static_cast<float>(max - params_.top_n_sigma * std::sqrt(var / count));
    std::erase_if(cand_, [floor](const Candidate& c) { return c.logit < floor; });
}

void Sampler::run_in_order(std::span<const float> logits) {
    gather_all(logits);
    float max = kNegInf;
    for (const Candidate& c : cand_) max = std::max(max, c.logit);
    if (max == kNegInf)
        throw std::runtime_error("sampling: every logit is NaN or -inf, no token can be chosen");
    for (SamplerStep step : params_.order) {
        switch (step) {
            case SamplerStep::top_n_sigma:
                apply_top_n_sigma_to_candidates();
                break;
            case SamplerStep::top_k:
                if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < cand_.size()) {
                    const auto k = static_cast<size_t>(params_.top_k);
                    select_front(cand_.begin(), cand_.end(), k, better);
                    cand_.resize(k);
                    sorted_desc_ = false;
                }
                break;
            case SamplerStep::typical_p:
                apply_typical();
                break;
            case SamplerStep::top_p:
                apply_top_p();
                break;
            case SamplerStep::min_p:
                apply_min_p();
                break;
            case SamplerStep::xtc:
                apply_xtc();
                break;
            case SamplerStep::temperature: {
                const float temp = dynamic_temperature();
                if (temp <= 0.0f) {  // a dynamic temperature of 0: the best candidate alone
                    const auto best = std::min_element(cand_.begin(), cand_.end(), better);
                    cand_ = {*best};
                } else {
                    for (Candidate& c : cand_) c.logit /= temp;
                }
                break;
            }
        }
    }
}

void Sampler::apply_xtc() {
    if (params_.xtc_probability <= 0.0f || params_.xtc_threshold > 0.5f) return;
    // The coin is tossed whatever the candidates, so that the draws a request consumes do not
    // depend on its logits.
    if (next_uniform() >= params_.xtc_probability || cand_.size() < 2) return;
    const Partition z = partition(cand_);
    const float max = static_cast<float>(z.max);
    size_t above = 0;
    const Candidate* last = nullptr;  // the least likely of those above the threshold
    for (Candidate& c : cand_) {
        c.prob = static_cast<float>(fast_exp_nonpositive(c.logit - max) / z.sum);
        if (c.prob >= params_.xtc_threshold) {
            ++above;
            if (!last || better(*last, c)) last = &c;
        }
    }
    if (above < 2) return;
    const int32_t keep = last->id;
    const float threshold = params_.xtc_threshold;
    std::erase_if(cand_, [&](const Candidate& c) { return c.prob >= threshold && c.id != keep; });
}

float Sampler::dynamic_temperature() const {
    const float temp = params_.temperature;
    if (params_.dynatemp_range <= 0.0f) return temp;
    size_t n = 0;
    for (const Candidate& c : cand_) n += c.logit != kNegInf ? 1 : 0;
    if (n < 2) return temp;
    const Partition z = partition(cand_);
    const float max = static_cast<float>(z.max);
    double entropy = 0.0;
    for (const Candidate& c : cand_) {
        const double p = fast_exp_nonpositive(c.logit - max) / z.sum;
        if (p > 0.0) entropy -= p * std::log(p);
    }
    const double lo = std::max(0.0f, temp - params_.dynatemp_range);
    const double hi = temp + params_.dynatemp_range;
    const double spread = std::min(1.0, entropy / std::log(static_cast<double>(n)));
    return static_cast<float>(lo + (hi - lo) * std::pow(spread, params_.dynatemp_exponent));
}

// Mirostat's truncation of the whole vocabulary into cand_, its logits divided by the
// temperature. The weights come from the vectorized whole-vocabulary pass; only the kept tokens
// (and v1's 100 best) become candidates.
void Sampler::mirostat_keep(std::span<const float> logits) {
    const size_t n = logits.size();
    const float max = load_logits(logits);
    const float temp = params_.temperature;
    weights_.resize(n);
    exp_weights(work_.data(), weights_.data(), n, max, temp);
    const double sum = sum_of(weights_.data(), n);
    auto candidate = [&](size_t i) {
        return Candidate{static_cast<int32_t>(i), work_[i] / temp, 0.0f, 0.0f};
    };
    cand_.clear();
    sorted_desc_ = false;
    if (params_.mirostat == 2) {
        // Surprise -log2 p <= mu  <=>  weight >= sum * 2^-mu; the best token always stays.
        const double floor = sum * std::exp2(-mirostat_mu_);
        for (size_t i = 0; i < n; ++i)
            if (weights_[i] > 0.0f && weights_[i] >= floor) cand_.push_back(candidate(i));
        if (cand_.empty()) {
            const auto best = std::find(work_.begin(), work_.end(), max) - work_.begin();
            cand_.push_back(candidate(static_cast<size_t>(best)));
        }
        return;
    }
    constexpr size_t kFitted = 100;  // llama.cpp's m
    BestK<Candidate> heap(cand_, std::min(n, kFitted));
    heap.offer_range(work_, 0, n, [](int32_t id, float v) { return Candidate{id, v, 0.0f, 0.0f}; });
    heap.sort_best_first();
    double sum_tb = 0.0, sum_tt = 0.0;
    for (size_t i = 0; i + 1 < cand_.size() && cand_[i + 1].logit != kNegInf; ++i) {
        const double t = std::log((i + 2.0) / (i + 1.0));
        const double b = (static_cast<double>(cand_[i].logit) - cand_[i + 1].logit) / temp;
        sum_tb += t * b;  // b = ln(p_i / p_i+1)
        sum_tt += t * t;
    }
    size_t k = 1;
    const double zipf = sum_tt > 0.0 ? sum_tb / sum_tt : 0.0;
    if (zipf > 0.0 && std::isfinite(zipf)) {
        const double eps = zipf - 1.0;
        const auto size = static_cast<double>(n);
        // eps / (1 - n^-eps) tends to 1 / ln n as eps -> 0.
        const double ratio =
            std::abs(eps) < 1e-9 ? 1.0 / std::log(size) : eps / (1.0 - std::pow(size, -eps));
        const double log_k = (std::log(ratio) + mirostat_mu_ * std::numbers::ln2) / zipf;
        if (log_k >= std::log(size))
            k = n;
        else if (log_k > 0.0)
            k = std::max<size_t>(1, static_cast<size_t>(std::exp(log_k)));
    }
    if (k <= cand_.size()) {
        cand_.resize(k);
        sorted_desc_ = true;
    } else {  // more than the fitted ones: rank the whole vocabulary
        cand_.resize(n);
        for (size_t i = 0; i < n; ++i)
            cand_[i] = Candidate{static_cast<int32_t>(i), work_[i], 0, 0};
        select_front(cand_.begin(), cand_.end(), k, better);
        cand_.resize(k);
    }
    for (Candidate& c : cand_) c.logit /= temp;
}

int32_t Sampler::mirostat_draw() {
    double prob = 0.0;
    const int32_t token = cand_[draw_from(1.0f, prob)].id;
    mirostat_mu_ -= params_.mirostat_eta * (-std::log2(prob) - params_.mirostat_tau);
    return token;
}

double Sampler::next_uniform() {
    // 53 random bits scaled into [0, 1): the same on every standard library.
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::draw() {
    double prob = 0.0;
    return cand_[draw_from(dynamic_temperature(), prob)].id;
}

size_t Sampler::draw_from(float temp, double& prob) {
    const double u = next_uniform();
    size_t best = 0;
    for (size_t i = 1; i < cand_.size(); ++i)
        if (better(cand_[i], cand_[best])) best = i;
    if (temp <= 0.0f) {  // a dynamic temperature of 0
        for (Candidate& c : cand_) c.prob = 0.0f;
        cand_[best].prob = 1.0f;
        prob = 1.0;
        return best;
    }
    const float max = cand_[best].logit;
    // Divide rather than multiply by 1/T: a denormal temperature would make 1/T infinite.
    double sum = 0.0;
    for (Candidate& c : cand_) {
        c.prob = fast_exp_nonpositive((c.logit - max) / temp);
        sum += c.prob;
    }
    const double target = u * sum;
    double cum = 0.0;
    size_t chosen = best;
    for (size_t i = 0; i < cand_.size(); ++i) {
        if (cand_[i].prob <= 0.0f) continue;
        cum += cand_[i].prob;
        chosen = i;  // past the end only through rounding: the last possible token
        if (cum > target) break;
    }
    prob = cand_[chosen].prob / sum;
    return chosen;
}

void Sampler::check_size(std::span<const float> logits) const {
    if (logits.size() != static_cast<size_t>(n_vocab_)) {
        std::ostringstream msg;
        msg << "Sampler: got " << logits.size() << " logits for a vocabulary of " << n_vocab_;
        throw std::invalid_argument(msg.str());
    }
}

void Sampler::run_filters(std::span<const float> logits) {
    const bool top_k = params_.top_k > 0 && params_.top_k < n_vocab_;
    if (!top_k && params_.top_n_sigma <= 0.0f && params_.typical_p >= 1.0f &&
        params_.top_p < 1.0f && top_p_from_the_top(logits)) {
        apply_min_p();
        apply_xtc();
        return;
    }
    if (top_k)
        gather_top_k(logits, params_.top_k);
    else
        gather_all(logits);

    float max = kNegInf;
    for (const Candidate& c : cand_) max = std::max(max, c.logit);
    if (max == kNegInf)
        throw std::runtime_error("sampling: every logit is NaN or -inf, no token can be chosen");

    apply_top_n_sigma(logits);
    apply_typical();
    apply_top_p();
    apply_min_p();
    apply_xtc();
}

float Sampler::load_logits(std::span<const float> logits) {
    const size_t n = logits.size();
    work_.resize(n);
    float* w = work_.data();
    for (size_t i = 0; i < n; ++i) w[i] = sanitize(logits[i]);
    for (const Adjusted& a : adjusted_) w[a.id] = a.logit;
    const float max = lane_max(w, n, [](float v) { return v; });
    if (max == kNegInf)
        throw std::runtime_error("sampling: every logit is NaN or -inf, no token can be chosen");
    return max;
}

// Top-p straight from the whole vocabulary: the normalizer from vectorized weights, then only
// the best few tokens are ranked. Usually a few dozen tokens carry the mass; when the first
// kFirst do not, returns false and the general path ranks as many as needed.
bool Sampler::top_p_from_the_top(std::span<const float> logits) {
    constexpr size_t kFirst = 64;
    const size_t n = logits.size();
    const float max = load_logits(logits);
    weights_.resize(n);
    exp_weights(work_.data(), weights_.data(), n, max, 1.0f);
    const double sum = sum_of(weights_.data(), n);

    BestK<Candidate> heap(cand_, std::min(n, kFirst));
    heap.offer_range(work_, 0, n, [](int32_t id, float v) { return Candidate{id, v, 0.0f, 0.0f}; });
    heap.sort_best_first();
    double cum = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i) {
        cum += weights_[static_cast<size_t>(cand_[i].id)] / sum;
        if (cum >= params_.top_p) {
            cand_.resize(i + 1);
            sorted_desc_ = true;
            return true;
        }
    }
    return cand_.size() == n;  // the whole vocabulary was within the first kFirst
}

bool Sampler::needs_candidates() const {
    return (params_.top_k > 0 && params_.top_k < n_vocab_) || params_.typical_p < 1.0f ||
           params_.top_p < 1.0f || params_.min_p > 0.0f || params_.top_n_sigma > 0.0f ||
           (params_.xtc_probability > 0.0f && params_.xtc_threshold <= 0.5f) ||
           params_.dynatemp_range > 0.0f;
}

// Temperature alone over the whole vocabulary (OpenAI's defaults have no top-k): the weights
// go into one float array, so the max, the exps and the sums run as vector loops, and per-block
// sums let the draw skip to the right block instead of walking token by token.
int32_t Sampler::draw_all(std::span<const float> logits) {
    const size_t n = logits.size();
    const float max = load_logits(logits);
    weights_.resize(n);
    float* w = weights_.data();
    exp_weights(work_.data(), w, n, max, params_.temperature);

    constexpr size_t kBlock = 256;
    const size_t n_blocks = (n + kBlock - 1) / kBlock;
    block_sums_.resize(n_blocks);
    double total = 0.0;
    for (size_t b = 0; b < n_blocks; ++b) {
        const size_t begin = b * kBlock;
        block_sums_[b] = sum_of(w + begin, std::min(kBlock, n - begin));
        total += block_sums_[b];
    }

    const double target = next_uniform() * total;
    double cum = 0.0;
    for (size_t b = 0; b < n_blocks; ++b) {
        if (cum + block_sums_[b] <= target) {
            cum += block_sums_[b];
            continue;
        }
        // The block holds the target. Walking it adds in another order than its lane sum did,
        // so rounding may leave the walk just short: then its last possible token is the one.
        const size_t begin = b * kBlock, end = std::min(n, begin + kBlock);
        size_t last = begin;
        for (size_t i = begin; i < end; ++i) {
            if (w[i] <= 0.0f) continue;
            last = i;
            cum += w[i];
            if (cum > target) break;
        }
        return static_cast<int32_t>(last);
    }
    // Rounding pushed the target past every block: the last token with any weight.
    for (size_t i = n; i-- > 0;)
        if (w[i] > 0.0f) return static_cast<int32_t>(i);
    return static_cast<int32_t>(n - 1);  // unreachable: the max token has weight 1
}

std::span<const float> Sampler::constrain(std::span<const float> logits) {
    check_size(logits);
    if (!grammar_active_) return logits;
    masked_.resize(logits.size());
    grammar_->apply(logits, masked_);
    return masked_;
}

int32_t Sampler::sample(std::span<const float> logits) {
    drawn_ = Drawn::one;
    if (budget_ == Budget::forcing) {
        check_size(logits);
        return params_.reasoning_budget.close[budget_forced_];
    }
    logits = constrain(logits);
    collect_adjusted(logits);
    if (params_.temperature == 0.0f) return greedy(logits);
    drawn_ = Drawn::candidates;
    if (params_.mirostat != 0) {
        mirostat_keep(logits);
        return mirostat_draw();
    }
    if (!params_.order.empty()) {
        run_in_order(logits);
        double prob = 0.0;
        return cand_[draw_from(1.0f, prob)].id;  // the temperature step, when listed, is done
    }
    if (!needs_candidates()) {
        drawn_ = Drawn::vocabulary;
        return draw_all(logits);
    }
    run_filters(logits);
    return draw();
}

std::vector<float> Sampler::adjusted_logits(std::span<const float> logits) {
    logits = constrain(logits);
    collect_adjusted(logits);
    std::vector<float> out(logits.size());
    std::transform(logits.begin(), logits.end(), out.begin(), sanitize);
    for (const Adjusted& a : adjusted_) out[static_cast<size_t>(a.id)] = a.logit;
    return out;
}

std::vector<int32_t> Sampler::candidates(std::span<const float> logits) {
    logits = constrain(logits);
    collect_adjusted(logits);
    if (params_.temperature == 0.0f) return {greedy(logits)};
    if (params_.mirostat != 0) {
        mirostat_keep(logits);
    } else {
        const std::mt19937_64 saved = rng_;  // XTC's coin, as the next sample() will toss it
        if (params_.order.empty())
            run_filters(logits);
        else
            run_in_order(logits);
        rng_ = saved;
    }
    std::vector<int32_t> ids;
    ids.reserve(cand_.size());
    for (const Candidate& c : cand_)
        if (c.logit != kNegInf) ids.push_back(c.id);  // weightless: the draw never picks them
    std::sort(ids.begin(), ids.end());
    return ids;
}

}  // namespace ggufd::sampling
