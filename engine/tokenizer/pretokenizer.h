// Pre-tokenizers of byte-level BPE vocabularies: the regex sets that cut text into words before
// merges run, one per `tokenizer.ggml.pre` family. Each regex is a hand-written matcher with the
// regex's exact semantics (leftmost match, alternation order, greedy repeats, lookahead), and each
// set applies its regexes in turn, every regex refining the pieces left by the previous one (text
// between matches stays a piece of its own), as the reference tokenizer does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace ggufd::tokenizer {

enum class PreTokenizer {
    Default,        // BPE vocabulary with pre "default" or none
    Gpt2,           // GPT-2 regex alone: gpt-2, mpt, gpt-neox, olmo, phi-2, ...
    Llama3,         // Llama 3 regex (numbers in groups of up to 3): llama-bpe, dbrx, glm4, ...
    Qwen2,          // Llama 3 regex with single-digit numbers: qwen2, stablelm2, ...
    Starcoder,      // single digits, then GPT-2: starcoder, refact, command-r, smollm, ...
    Falcon,         // punctuation runs, GPT-2, digit triples
    DeepseekLlm,    // deepseek-llm's six regexes
    DeepseekCoder,  // deepseek-coder's five regexes
    Deepseek3,      // deepseek-v3 / R1
};

// How a `tokenizer.ggml.pre` name configures the BPE tokenizer besides its regexes (flags the
// reference sets per family; the metadata's own add_bos_token etc. still override them).
struct PreTokenizerConfig {
    PreTokenizer kind = PreTokenizer::Gpt2;
    bool known = true;              // false: unknown name, GPT-2 used as a fallback
    bool ignore_merges = false;     // a word that is itself a token is emitted without merging
    bool clean_spaces = true;       // decode may clean " ," etc. (clean_up_tokenization_spaces)
    bool add_bos = false;           // default for add_bos_token when the metadata has none
    bool bos_default_none = false;  // no default BOS id (the metadata may still name one)
};

// The configuration for a pre-tokenizer name; empty or "default" selects Default. Unknown names
// fall back to GPT-2 with known = false.
PreTokenizerConfig pre_tokenizer_config(std::string_view name);

std::string_view pre_tokenizer_name(PreTokenizer kind);

struct Span {
    uint32_t begin;  // code point indices, end exclusive
    uint32_t end;
};

// Cuts `cps` (code points) into words: consecutive, non-empty spans covering all of it.
std::vector<Span> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cps);

}  // namespace ggufd::tokenizer
