// A draft model: a smaller model of the same vocabulary that guesses the target's next tokens
// greedily, for speculative decoding (draft.h says how drafts are sized, scheduler.h how they
// are verified). It keeps its own cache of each slot's sequence beside the target's and follows
// the slot lazily: each draft first cuts its cache back to what it shares with the slot's
// history (a rejected draft's tail, another request's prompt) and feeds what it lacks, so a
// rejection rolls it back as the target's cache is, and a paused sequence costs it nothing.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/model/context.h"
#include "engine/model/model.h"
#include "engine/scheduler/draft.h"
#include "engine/tokenizer/vocab.h"

namespace ggufd::scheduler {

// Throws std::invalid_argument naming what differs when a draft model's vocabulary is not the
// target's: the token count (of the vocabulary and of the output head), the first token whose
// text differs, or a special token's id. Drafts are token ids, so they must mean the same.
void check_draft_vocabulary(const tokenizer::Vocab& target, int64_t target_n_vocab,
                            const tokenizer::Vocab& draft, int64_t draft_n_vocab);

class DraftModel : public DraftSource {
  public:
    // Tokens of slots' histories fed to catch up in one call at most: a long prompt enters the
    // draft's cache over several steps (its sequence drafts once it is in), so one step never
    // waits for a whole prompt's prefill of the draft.
    static constexpr int32_t kCatchUpPerCall = 256;

    // params.n_seq and n_ctx as the target's scheduler (slots, context). Throws
    // std::invalid_argument for a model whose state cannot be cut back (recurrent, hybrid) or
    // without an output head.
    DraftModel(std::shared_ptr<const model::Model> model, const model::ContextParams& params);

    void draft(int slot, std::span<const int32_t> history, int32_t max_tokens,
               std::vector<int32_t>& out) override;
    // Every job's draft grows by one token per evaluation of the draft model, all sequences in
    // one batch; a sequence stops at max_tokens or at a token whose probability is below p_min.
    void draft_all(std::span<const DraftJob> jobs) override;

    const model::Model& model() const { return context_.model(); }

  private:
    model::Context context_;
    std::vector<std::vector<int32_t>> held_;  // per slot: the tokens its cells hold
    std::vector<model::BatchToken> batch_;
    std::vector<float> logits_;
};

}  // namespace ggufd::scheduler
