// When a request's generation ends, and how much of the generated text may be shown so far.
//
// StopMatcher watches the text for stop strings. Text that could still turn out to be the start
// of a stop string is held back until the next piece decides it; a matched stop string and
// everything after it is never emitted. Matching is on bytes, so it does not care how the text
// was cut into tokens. Given complete UTF-8 (the detokenizer's job), the text it emits is
// complete UTF-8 too: a held-back suffix equals the start of a (valid UTF-8) stop string, so it
// begins on a character boundary.
//
// When several stop strings match, the one that ends first wins (ties: the longer one), i.e.
// the one a character-by-character stream would have seen first. So the outcome never depends
// on how the text was split into pieces. (llama.cpp picks the match that starts first, which
// can differ when one piece completes two stop strings, e.g. "xabc" with stops "ab", "xabc".)
//
// StopChecker adds the other reasons to finish: end-of-generation tokens (EOS/EOT, from the
// tokenizer) unless ignore_eos, and max_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling/params.h"

namespace ggufd::sampling {

// Throws InvalidParam (a std::invalid_argument) naming the field: max_tokens < -1, or an empty
// stop string (it would match before any text).
void validate(const StopParams& params);

class StopMatcher {
  public:
    // Throws std::invalid_argument for an empty stop string. No stop strings: every piece is
    // emitted as it comes.
    explicit StopMatcher(std::vector<std::string> stops);

    struct Output {
        std::string text;      // safe to show now
        int32_t matched = -1;  // index of the stop string that ended the text, or -1
        bool stopped() const { return matched >= 0; }
    };

    // Appends a piece of generated text. Once a stop string matched, further pieces are
    // ignored (empty output, matched stays reported).
    Output push(std::string_view piece);

    // Generation ended for another reason: the held-back text was not a stop string after all.
    std::string flush();

    bool stopped() const { return matched_ >= 0; }
    const std::string& held() const { return held_; }
    const std::vector<std::string>& stops() const { return stops_; }

  private:
    size_t longest_partial_suffix() const;

    std::vector<std::string> stops_;
    size_t longest_stop_ = 0;
    std::string held_;
    int32_t matched_ = -1;
};

// Why a generation finished. The scheduler maps end_of_generation and stop_string to
// FinishReason::stop and max_tokens to FinishReason::length.
enum class StopReason { none, end_of_generation, stop_string, max_tokens };

class StopChecker {
  public:
    using EogPredicate = std::function<bool(int32_t)>;

    // is_eog says whether a token ends generation (the tokenizer's EOS/EOT/EOM set).
    StopChecker(const StopParams& params, EogPredicate is_eog);
    StopChecker(const StopParams& params, std::vector<int32_t> eog_tokens);

    struct Step {
        std::string text;  // show this now (may be empty)
        StopReason reason = StopReason::none;
        std::string stop_string;  // the matched one when reason == stop_string
        bool finished() const { return reason != StopReason::none; }
    };

    // Feeds one generated token and the complete UTF-8 text it produced (may be empty while the
    // detokenizer waits for the rest of a character). An end-of-generation token's own text is
    // not shown. When a step finishes the generation, its text already includes whatever was
    // held back (except a matched stop string). Throws std::logic_error once finished.
    Step on_token(int32_t token, std::string_view text);

    // The generation ends for the caller's own reason (context full, cancelled): returns the
    // held-back text. Further on_token calls throw.
    std::string finish();

    // Whether `token` ends the generation (an end-of-generation token, unless ignore_eos): the
    // one such check, which on_token applies and the caller asks before decoding the token.
    bool ends_generation(int32_t token) const;

    // True when max_tokens allows no (further) token, e.g. max_tokens == 0: ask before sampling.
    bool budget_exhausted() const;
    bool finished() const { return finished_; }
    int32_t generated() const { return generated_; }

  private:
    StopParams params_;
    EogPredicate is_eog_;
    StopMatcher matcher_;
    int32_t generated_ = 0;
    bool finished_ = false;
};

}  // namespace ggufd::sampling
