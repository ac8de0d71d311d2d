// Speculative decoding's drafts: guesses of a sequence's next tokens that the scheduler checks
// in one step beside the other sequences' work (scheduler.h says how a draft is verified, and
// why the output is the one generation without a draft gives). Here: what a request may ask of
// drafting, the n-gram lookup that drafts from the sequence's own text, the interface another
// draft source (a draft model) plugs into, and the per-sequence policy that sizes each draft
// from the recent acceptance and stops drafting while it does not pay.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ggufd::scheduler {

enum class DraftType {
    none,   // no drafts
    ngram,  // n-gram lookup over the prompt and the generated text
    model,  // the model's DraftSource (a draft model: draft_model.h)
};

// "none", "ngram", "draft"; parse_draft_type accepts llama-server's "ngram-simple" too and throws
// sampling::InvalidParam naming `param` for anything else.
const char* draft_type_name(DraftType type);
DraftType parse_draft_type(const std::string& name, const std::string& param);

// What drafting does for one request: a model's default (SchedulerParams::speculative), which a
// request may override field by field (llama-server's speculative.n_max / n_min / p_min).
struct SpeculativeParams {
    DraftType type = DraftType::none;
    int32_t n_max = 16;  // most tokens of one draft (llama-server's --draft-max)
    int32_t n_min = 0;   // a draft shorter than this is not verified (--draft-min)
    // A draft model's confidence below which it stops drafting (--draft-p-min); n-gram lookup
    // has no probabilities and ignores it.
    float p_min = 0.75f;
    int32_t ngram = 3;  // the longest suffix the lookup matches (it tries down to 2, or to 1)
};

inline constexpr int32_t kMaxDraftTokens = 64;
inline constexpr int32_t kMaxNgram = 32;

// Throws sampling::InvalidParam naming the request field ("speculative.n_max", ...).
void validate(const SpeculativeParams& params);

// The tokens that followed the most recent earlier occurrence of history's last n tokens (n from
// `ngram` down to 2, or 1 when ngram is 1), at most `max_tokens` of them, appended to `out`;
// nothing when no suffix recurs. O(history * ngram).
void ngram_draft(std::span<const int32_t> history, int32_t ngram, int32_t max_tokens,
                 std::vector<int32_t>& out);

// One sequence's draft request of a step: its slot, its whole history (prompt, generated tokens,
// and last the token the step feeds), the most tokens to guess, the draft model's confidence
// below which it stops (SpeculativeParams::p_min), and where the guesses go (appended).
struct DraftJob {
    int slot = 0;
    std::span<const int32_t> history;
    int32_t max_tokens = 0;
    float p_min = 0.0f;
    std::vector<int32_t>* out = nullptr;
};

// A source of drafts other than the lookup (a draft model; tests' scripted drafts), for requests
// of DraftType::model. Called on the scheduler's thread; draft appends at most max_tokens
// guesses of what follows the history. `slot` lets a source keep per-sequence state; it must
// tolerate a history that is not a continuation of the last one. draft_all takes a step's
// drafting sequences together (a draft model evaluates them in one batch); by default one by
// one.
class DraftSource {
  public:
    virtual ~DraftSource() = default;
    virtual void draft(int slot, std::span<const int32_t> history, int32_t max_tokens,
                       std::vector<int32_t>& out) = 0;
    virtual void draft_all(std::span<const DraftJob> jobs) {
        for (const DraftJob& j : jobs) draft(j.slot, j.history, j.max_tokens, *j.out);
    }
};

// Drafts from known texts: a history that is a prefix of one of them gets what follows it there.
// For measuring the mechanism (the target's own greedy output: a draft that always agrees; with
// every token spoiled, one that never does) and for tests (every n-th draft spoiled at its
// second token, so rejections at every place happen). A spoiled token is (token + 1) % n_vocab.
class ReplayDraft : public DraftSource {
  public:
    ReplayDraft(std::vector<std::vector<int32_t>> texts, int32_t n_vocab)
        : texts_(std::move(texts)), n_vocab_(n_vocab) {}
    int spoil_every = 0;     // 0: no draft spoiled
    bool spoil_all = false;  // every token of every draft
    void draft(int slot, std::span<const int32_t> history, int32_t max_tokens,
               std::vector<int32_t>& out) override;

  private:
    std::vector<std::vector<int32_t>> texts_;
    int32_t n_vocab_;
    int drafts_ = 0;
};

// One sequence's draft length, adapted to how its drafts fare: after a draft taken whole the next
// may be longer (up to n_max), after a rejection it is cut to one more than what was accepted.
// When the recent acceptance (a moving average of accepted / drafted) falls below
// kMinAcceptance, drafting pauses for a number of steps that doubles with each pause in a row:
// a rejected draft costs its tokens' share of a step, which copies rarely repay.
class DraftPolicy {
  public:
    static constexpr float kMinAcceptance = 0.2f;
    static constexpr int32_t kFirstPause = 8;
    static constexpr int32_t kLongestPause = 256;

    explicit DraftPolicy(int32_t n_max = 0) : length_(n_max), n_max_(n_max) {}
    // Tokens the next draft may have: 0 while paused (each call counts a step of the pause).
    int32_t next_length();
    // The outcome of a verified draft.
    void record(int32_t drafted, int32_t accepted);
    float acceptance() const { return rate_; }

  private:
    int32_t length_, n_max_;
    float rate_ = 1.0f;
    int32_t paused_ = 0;  // steps left of the pause
    int32_t pause_ = kFirstPause;
};

}  // namespace ggufd::scheduler
