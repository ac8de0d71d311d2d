#include "engine/scheduler/draft.h"

#include <algorithm>
#include <cmath>

#include "engine/sampling/params.h"

namespace ggufd::scheduler {

const char* draft_type_name(DraftType type) {
    switch (type) {
        case DraftType::none:
            return "none";
        case DraftType::ngram:
            return "ngram";
        case DraftType::model:
            return "draft";
    }
    return "none";
}

DraftType parse_draft_type(const std::string& name, const std::string& param) {
    if (name == "none") return DraftType::none;
    if (name == "ngram" || name == "ngram-simple") return DraftType::ngram;
    if (name == "draft") return DraftType::model;
    throw sampling::InvalidParam(param, "'" + param + "' is '" + name +
                                            "'; the draft sources are 'none', 'ngram' and 'draft'");
}

void validate(const SpeculativeParams& p) {
    auto range = [](const char* name, int32_t v, int32_t lo, int32_t hi) {
        if (v < lo || v > hi) {
            throw sampling::InvalidParam(name, std::string("'") + name + "' must be in [" +
                                                   std::to_string(lo) + ", " + std::to_string(hi) +
                                                   "], got " + std::to_string(v));
        }
    };
    range("speculative.n_max", p.n_max, 0, kMaxDraftTokens);
    range("speculative.n_min", p.n_min, 0, p.n_max);
    range("speculative.ngram", p.ngram, 1, kMaxNgram);
    if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) {
        throw sampling::InvalidParam("speculative.p_min", "'speculative.p_min' must be in [0, 1]");
    }
}

void ngram_draft(std::span<const int32_t> history, int32_t ngram, int32_t max_tokens,
                 std::vector<int32_t>& out) {
    const size_t len = history.size();
    if (max_tokens <= 0 || len < 2) return;
    const size_t shortest = ngram == 1 ? 1 : 2;
    for (size_t n = std::min<size_t>(static_cast<size_t>(ngram), len - 1); n >= shortest; --n) {
        const std::span<const int32_t> key = history.subspan(len - n);
        // Occurrences ending before the last token, the most recent first: it is the likeliest
        // to go on as the text does now.
        for (size_t start = len - n; start-- > 0;) {
            if (!std::equal(key.begin(), key.end(),
                            history.begin() + static_cast<ptrdiff_t>(start)))
                continue;
            const size_t from = start + n;
            const size_t take = std::min(len - from, static_cast<size_t>(max_tokens));
            out.insert(out.end(), history.begin() + static_cast<ptrdiff_t>(from),
                       history.begin() + static_cast<ptrdiff_t>(from + take));
            return;
        }
    }
}

void ReplayDraft::draft(int, std::span<const int32_t> history, int32_t max_tokens,
                        std::vector<int32_t>& out) {
    for (const std::vector<int32_t>& t : texts_) {
        if (t.size() <= history.size() || !std::equal(history.begin(), history.end(), t.begin()))
            continue;
        const size_t first = out.size();
        const size_t take = std::min(t.size() - history.size(), static_cast<size_t>(max_tokens));
        out.insert(out.end(), t.begin() + static_cast<ptrdiff_t>(history.size()),
                   t.begin() + static_cast<ptrdiff_t>(history.size() + take));
        auto spoil = [&](size_t i) { out[i] = (out[i] + 1) % n_vocab_; };
        ++drafts_;
        if (spoil_all) {
            for (size_t i = first; i < out.size(); ++i) spoil(i);
        } else if (spoil_every > 0 && drafts_ % spoil_every == 0 && out.size() > first + 1) {
            spoil(first + 1);
        }
        return;
    }
}

int32_t DraftPolicy::next_length() {
    if (paused_ > 0) {
        --paused_;
        return 0;
    }
    return length_;
}

void DraftPolicy::record(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;
    const float share = static_cast<float>(accepted) / static_cast<float>(drafted);
    rate_ = 0.7f * rate_ + 0.3f * share;
    // A draft taken whole suggests a longer copy; a rejection ends where the copy broke off.
    length_ = accepted == drafted ? std::min(n_max_, std::max(length_, drafted) * 2)
                                  : std::max(1, accepted + 1);
    if (rate_ < kMinAcceptance) {
        paused_ = pause_;
        pause_ = std::min(pause_ * 2, kLongestPause);
        // After the pause one draft decides: a rejection pauses again, longer.
        rate_ = kMinAcceptance + 0.05f;
        length_ = std::max(1, n_max_ / 4);
    } else if (share >= 0.5f) {
        pause_ = kFirstPause;
    }
}

}  // namespace ggufd::scheduler
