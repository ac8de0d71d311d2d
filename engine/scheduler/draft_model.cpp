#include "engine/scheduler/draft_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ggufd::scheduler {

void check_draft_vocabulary(const tokenizer::Vocab& target, int64_t target_n_vocab,
                            const tokenizer::Vocab& draft, int64_t draft_n_vocab) {
    auto refuse = [](const std::string& what) {
        throw std::invalid_argument("the draft model's vocabulary is not the target's: " + what);
    };
    if (target.size() != draft.size()) {
        refuse("it has " + std::to_string(draft.size()) + " tokens, the target " +
               std::to_string(target.size()));
    }
    if (target_n_vocab != draft_n_vocab) {
        refuse("its output head has " + std::to_string(draft_n_vocab) + " rows, the target's " +
               std::to_string(target_n_vocab));
    }
    for (int32_t id = 0; id < target.size(); ++id) {
        if (target.token(id).text != draft.token(id).text) {
            refuse("token " + std::to_string(id) + " is '" + draft.token(id).text +
                   "', the target's '" + target.token(id).text + "'");
        }
    }
    const tokenizer::SpecialTokens& t = target.special();
    const tokenizer::SpecialTokens& d = draft.special();
    const std::pair<const char*, int32_t tokenizer::SpecialTokens::*> ids[] = {
        {"bos", &tokenizer::SpecialTokens::bos},
        {"eos", &tokenizer::SpecialTokens::eos},
        {"eot", &tokenizer::SpecialTokens::eot},
        {"eom", &tokenizer::SpecialTokens::eom},
        {"unk", &tokenizer::SpecialTokens::unk},
        {"sep", &tokenizer::SpecialTokens::sep},
        {"pad", &tokenizer::SpecialTokens::pad},
        {"mask", &tokenizer::SpecialTokens::mask},
        {"fim_pre", &tokenizer::SpecialTokens::fim_pre},
        {"fim_suf", &tokenizer::SpecialTokens::fim_suf},
        {"fim_mid", &tokenizer::SpecialTokens::fim_mid},
        {"fim_pad", &tokenizer::SpecialTokens::fim_pad},
        {"fim_rep", &tokenizer::SpecialTokens::fim_rep},
        {"fim_sep", &tokenizer::SpecialTokens::fim_sep},
    };
    for (const auto& [name, member] : ids) {
        if (t.*member != d.*member) {
            refuse(std::string("its ") + name + " token is " + std::to_string(d.*member) +
                   ", the target's " + std::to_string(t.*member));
        }
    }
}

DraftModel::DraftModel(std::shared_ptr<const model::Model> model,
                       const model::ContextParams& params)
    : context_(std::move(model), params) {
    if (context_.cache().recurrent()) {
        throw std::invalid_argument(
            "a recurrent or hybrid model cannot draft: its state cannot be cut back to the "
            "tokens the target accepts");
    }
    if (!context_.model().weights().output) {
        throw std::invalid_argument("the draft model has no output head (an encoder)");
    }
    held_.resize(static_cast<size_t>(params.n_seq));
}

void DraftModel::draft(int slot, std::span<const int32_t> history, int32_t max_tokens,
                       std::vector<int32_t>& out) {
    const DraftJob job{.slot = slot, .history = history, .max_tokens = max_tokens, .out = &out};
    draft_all(std::span<const DraftJob>(&job, 1));
}

void DraftModel::draft_all(std::span<const DraftJob> jobs) {
    model::SequenceCache& cache = context_.cache();
    const int32_t n_ctx = cache.n_ctx();
    // The jobs still drafting (in the batch order of their logits' tokens), and their guesses.
    struct Live {
        const DraftJob* job;
        int32_t drafted;
    };
    std::vector<Live> live;
    // First evaluation: each sequence's cache cut back to what it shares with its history, and
    // the rest of the history fed (within the catch-up budget); its last token's logits give the
    // first guess.
    batch_.clear();
    int32_t catch_up = kCatchUpPerCall;
    for (const DraftJob& j : jobs) {
        if (j.max_tokens <= 0 || j.history.empty() || j.slot < 0 ||
            static_cast<size_t>(j.slot) >= held_.size())
            continue;
        // The draft's cells hold history and guesses but the last, so at most n_ctx - 1 tokens.
        if (static_cast<int64_t>(j.history.size()) + j.max_tokens > n_ctx) continue;
        std::vector<int32_t>& held = held_[static_cast<size_t>(j.slot)];
        size_t keep = static_cast<size_t>(
            std::mismatch(held.begin(), held.end(), j.history.begin(), j.history.end()).first -
            held.begin());
        // The last token is fed again when the cells hold it already: its logits are needed.
        keep = std::min(keep, j.history.size() - 1);
        if (keep < held.size()) {
            const auto n =
                static_cast<int32_t>(cache.longest_keepable(j.slot, static_cast<int32_t>(keep)));
            cache.truncate(j.slot, n);
            held.resize(static_cast<size_t>(n));
        }
        const size_t missing = j.history.size() - held.size();
        const size_t take = std::min(missing, static_cast<size_t>(catch_up));
        if (take == 0) continue;
        catch_up -= static_cast<int32_t>(take);
        const bool complete = take == missing;
        for (size_t i = 0; i < take; ++i) {
            const size_t at = held.size();
            const bool last = complete && i + 1 == take;
            if (last) live.push_back({&j, 0});
            batch_.push_back({j.slot, j.history[at], static_cast<int32_t>(at), last});
            held.push_back(j.history[at]);
        }
    }
    const size_t V = static_cast<size_t>(context_.n_vocab());
    while (!batch_.empty()) {
        try {
            context_.eval(batch_, logits_);
        } catch (...) {
            // The draft's cache no longer matches what held_ says: start those sequences over.
            for (const model::BatchToken& t : batch_) {
                cache.clear(t.seq);
                held_[static_cast<size_t>(t.seq)].clear();
            }
            throw;
        }
        batch_.clear();
        std::vector<Live> next;
        for (size_t r = 0; r < live.size(); ++r) {
            const DraftJob& j = *live[r].job;
            const float* row = logits_.data() + r * V;
            const size_t best = static_cast<size_t>(std::max_element(row, row + V) - row);
            if (j.p_min > 0.0f) {
                double sum = 0.0;
                for (size_t v = 0; v < V; ++v) sum += std::exp(double{row[v]} - row[best]);
                if (1.0 / sum < j.p_min) continue;
            }
            const auto token = static_cast<int32_t>(best);
            j.out->push_back(token);
            const int32_t drafted = live[r].drafted + 1;
            if (drafted >= j.max_tokens) continue;
            std::vector<int32_t>& held = held_[static_cast<size_t>(j.slot)];
            next.push_back({&j, drafted});
            batch_.push_back({j.slot, token, static_cast<int32_t>(held.size()), true});
            held.push_back(token);
        }
        live = std::move(next);
    }
}

}  // namespace ggufd::scheduler
