// Fill-in-the-middle (code infill): the prompt a FIM-trained model reads, built from its FIM
// tokens and the code around the cursor, trimmed to fit the context, and the requests of
// llama-server's POST /infill and /completion (their routes and answer: infill_api.cpp).
// /v1/completions with `suffix` (and any dialect that sets CompletionRequest::suffix) builds its
// prompt here too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/limits.h"
#include "server/model_backend.h"
#include "server/requests.h"

namespace ggufd::server {

// Another file of the project, given as context (llama-server's `input_extra` chunk).
struct FimFile {
    std::string filename;
    std::string text;
};

struct FimParts {
    std::string prefix;          // the code before the cursor
    std::string suffix;          // the code after it
    std::string middle;          // what the user typed of the middle so far (/infill's `prompt`)
    std::vector<FimFile> extra;  // most relevant last
    const char* suffix_param = "suffix";  // the request's field, for errors
    const char* middle_param = "prompt";
};

struct FimPrompt {
    std::vector<int32_t> tokens;
    bool truncated = false;  // some of the prefix, the suffix or the extra files was left out
};

// The prompt, prefix-suffix-middle:
//   [BOS] [extra files] <fim_pre> prefix <fim_suf> suffix <fim_mid> middle
// Extra files, with the model's repository tokens: <fim_rep>project\n, then <fim_sep>name\ntext\n
// per file and <fim_sep>current\n before <fim_pre>; without them, each file's text alone.
// Text is tokenized without special tokens: code that contains "<|fim_prefix|>" stays text.
// At most `budget` tokens: BOS, the FIM tokens and the middle are always kept (a 400 naming the
// middle's field when they alone do not fit); of the rest the suffix gets up to a quarter, the
// prefix what the suffix leaves, the suffix then what the prefix leaves, keeping the end of the
// prefix and the start of the suffix (the code nearest the cursor); the extra files get what
// remains, whole, the last ones that fit. A model without prefix, suffix and middle tokens is a
// 400 naming `parts.suffix_param`.
FimPrompt fim_prompt(const ModelBackend& model, const FimParts& parts, int64_t budget);

// The tokens a FIM prompt may take for a reply of up to `max_tokens`: the context less room for
// the reply (max_tokens, at most a quarter of the context), within the server's prompt cap.
int64_t fim_prompt_budget(ModelBackend& model, const ApiLimits& limits, int32_t max_tokens);

// llama-server's own completion request (POST /completion, and the generation fields of
// /infill): its names (`n_predict`, `n_probs`) onto a completion request, every generation field
// of /v1/completions checked there; a refusal names the client's field. One prompt, one choice.
struct LlamaCompletionRequest : CompletionRequest {
    // llama.vscode's `n_predict: 0` asks only to evaluate (and cache) the prompt: one token is
    // generated and not answered.
    bool predict = true;
    // `n_probs`: each generated token's `completion_probabilities`, the top n of the model's
    // distribution before sampling (sampling.top_logprobs = n); 0: none. With
    // `post_sampling_probs` (sampling.post_sampling_logprobs), of the distribution the token was
    // drawn from, as probabilities (`prob`, `top_probs`).
    int32_t n_probs = 0;
};
LlamaCompletionRequest parse_llama_completion_request(const RequestJson& body,
                                                      const ApiLimits& limits);

// POST /infill: llama-server's FIM fields (`input_prefix`, `input_suffix`, `input_extra`,
// `prompt`) beside /completion's.
struct InfillRequest : LlamaCompletionRequest {
    FimParts fim;
};
InfillRequest parse_infill_request(const RequestJson& body, const ApiLimits& limits);

}  // namespace ggufd::server
