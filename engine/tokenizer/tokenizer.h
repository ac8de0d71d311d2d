// Text to token ids and back, exactly as the model's own tokenizer (llama.cpp being the reference)
// would, from the vocabulary in the GGUF metadata alone.
//
// A Tokenizer is immutable once built: encode/decode are const and keep no shared caches, so one
// instance serves any number of threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/vocab.h"
#include "text/utf8.h"

namespace ggufd::tokenizer {

struct EncodeOptions {
    std::optional<bool> add_bos;  // default: the vocabulary's tokenizer.ggml.add_bos_token
    std::optional<bool> add_eos;  // default: the vocabulary's tokenizer.ggml.add_eos_token
    // A separator (WordPiece's [SEP]) after the text. Default: the vocabulary's
    // tokenizer.ggml.add_sep_token, unless add_eos is set to false: a caller that turns the end
    // token off ("no special tokens") gets no separator either without asking for one.
    std::optional<bool> add_sep;
    // Recognise the text of control tokens (e.g. "<|im_start|>") in the input and emit their ids.
    // Only for text the caller trusts (a rendered chat template), never for raw user content.
    // User-defined tokens are recognised either way, as the reference does.
    bool parse_special = false;
    // Byte ranges [begin, end) of the text that are untrusted (e.g. user messages inside a
    // rendered chat template): control-token text there stays plain text even with
    // parse_special.
    std::vector<std::pair<size_t, size_t>> plain_ranges;
};

struct DecodeOptions {
    // Render control (and unknown) tokens as their text instead of dropping them.
    bool render_special = false;
    // Drop a leading BOS and a trailing EOS (or separator) when the vocabulary adds them.
    bool remove_special = false;
    // Take one leading space off the first piece when the vocabulary adds a space prefix (SPM),
    // so that decode(encode(text)) gives text back. A leading BOS consumes this, as in the
    // reference.
    bool strip_leading_space = true;
    // Tidy " ?", " !", " .", " ," and " 's"-style contractions like Hugging Face's
    // clean_up_tokenization_spaces. Off by default; pass vocab().clean_spaces() for the reference's
    // llama_detokenize behaviour.
    bool clean_spaces = false;
    // Replace ill-formed UTF-8 (a byte-fallback sequence cut short, ...) with U+FFFD.
    bool validate_utf8 = true;
};

class Tokenizer {
  public:
    explicit Tokenizer(Vocab vocab);
    // Opens a GGUF file and builds the tokenizer from its metadata.
    static Tokenizer from_file(const std::filesystem::path& path);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    const Vocab& vocab() const { return vocab_; }
    int32_t n_vocab() const { return vocab_.size(); }
    const SpecialTokens& special() const { return vocab_.special(); }
    int32_t bos() const { return vocab_.special().bos; }
    int32_t eos() const { return vocab_.special().eos; }
    int32_t eot() const { return vocab_.special().eot; }
    int32_t pad() const { return vocab_.special().pad; }
    bool is_eog(int32_t id) const { return vocab_.is_eog(id); }

    // Never throws for any input bytes (invalid UTF-8 included), except when BOS/EOS is requested
    // but the vocabulary has none.
    std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

    // The bytes one token stands for: SPM and WordPiece "▁" -> " ", byte tokens -> their byte, BPE
    // byte stand-ins -> their bytes, user-defined tokens -> their text, control/unknown tokens ->
    // "" unless `render_special`. May be an incomplete UTF-8 sequence. Throws Error for a bad id.
    std::string token_to_piece(int32_t id, bool render_special = false) const;

    // Throws Error when an id is out of range.
    std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  private:
    struct Fragment {
        int32_t token;  // kNoToken for raw text
        size_t begin, length;
    };
    std::vector<Fragment> partition(std::string_view text, const EncodeOptions& options) const;
    std::vector<int32_t> literal_tokens_in(std::string_view text, bool parse_special) const;
    void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
    void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
    void encode_wpm(std::string_view text, std::vector<int32_t>& out) const;
    void encode_wpm_word(std::string& word, std::vector<int32_t>& out) const;
    void push_byte(uint8_t byte, std::vector<int32_t>& out) const;

    Vocab vocab_;
    // Decoded bytes of every token (control tokens as their text), built once.
    std::vector<std::string> pieces_;
    // A byte trie over the texts of vocab_.literal_tokens(), to find which of them occur in a text
    // without searching for each in turn.
    struct TrieNode {
        std::unordered_map<uint8_t, uint32_t> next;
        std::vector<int32_t> tokens;  // tokens whose text ends here
    };
    std::vector<TrieNode> trie_;
    std::vector<uint32_t> literal_rank_;  // id -> position in literal_tokens() (or UINT32_MAX)
};

// Incremental detokenizer for streamed generation: feed ids one at a time and get back only text
// that is complete UTF-8. A character whose bytes span several tokens is held back until whole;
// bytes that can never form a character become U+FFFD. Not thread-safe (one per stream); the
// Tokenizer must outlive it.
class StreamDecoder {
  public:
    struct Options {
        bool render_special = false;
        // Control tokens rendered as their text even without render_special (sorted ids): a chat
        // family's markup, which its output parser must see.
        std::vector<int32_t> render_ids;
        // Strip one leading space from the first piece (SPM space prefix), as decode() does.
        // Off by default: a generated continuation keeps its leading space.
        bool strip_leading_space = false;
    };
    explicit StreamDecoder(const Tokenizer& tokenizer) : StreamDecoder(tokenizer, Options{}) {}
    StreamDecoder(const Tokenizer& tokenizer, Options options);

    // Appends the token's bytes; returns the text that became complete. Throws Error for a bad
    // id (the decoder's state is then unchanged).
    std::string push(int32_t id);
    // Ends the stream: returns what is held back, an incomplete sequence as U+FFFD.
    std::string flush();
    // Bytes held back waiting for the rest of a character.
    size_t pending() const { return joiner_.pending(); }
    void reset();

  private:
    const Tokenizer* tokenizer_;
    Options options_;
    text::Utf8Joiner joiner_;
    bool first_ = true;
};

}  // namespace ggufd::tokenizer
