// A model's vocabulary as its GGUF metadata describes it (`tokenizer.ggml.*`): token texts, scores
// and types, BPE merges, special token ids and the flags that steer encoding. Loading validates it
// all, so the tokenizer can trust every id and merge it finds here.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"

namespace gguf {
class File;
class Metadata;
}  // namespace gguf

namespace ggufd::tokenizer {

// Every error of the tokenizer module: bad vocabulary metadata, unusable ids.
class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

inline constexpr int32_t kNoToken = -1;

enum class VocabType {
    Spm,  // tokenizer.ggml.model = "llama": SentencePiece-style, merges by score
    Bpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE, merges by rank
    Wpm,  // tokenizer.ggml.model = "bert": WordPiece, greedy longest match per word
};

// Values of tokenizer.ggml.token_type.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// What a token is, as a set: loading may add Control to a token whose type says otherwise
// (end-of-turn markers converted as normal tokens).
namespace attr {
inline constexpr uint32_t kUndefined = 0;
inline constexpr uint32_t kUnknown = 1u << 0;
inline constexpr uint32_t kUnused = 1u << 1;
inline constexpr uint32_t kNormal = 1u << 2;
inline constexpr uint32_t kControl = 1u << 3;
inline constexpr uint32_t kUserDefined = 1u << 4;
inline constexpr uint32_t kByte = 1u << 5;
}  // namespace attr

struct TokenData {
    std::string text;
    float score = 0.0f;
    uint32_t attrs = attr::kNormal;
    int16_t byte = -1;  // the byte a <0xNN> byte token stands for, else -1
};

// Special token ids; kNoToken when the vocabulary has none.
struct SpecialTokens {
    int32_t bos = kNoToken;
    int32_t eos = kNoToken;
    int32_t eot = kNoToken;  // end of turn
    int32_t eom = kNoToken;  // end of message (tool call pending)
    int32_t unk = kNoToken;
    int32_t sep = kNoToken;
    int32_t pad = kNoToken;
    int32_t mask = kNoToken;
    int32_t fim_pre = kNoToken;
    int32_t fim_suf = kNoToken;
    int32_t fim_mid = kNoToken;
    int32_t fim_pad = kNoToken;
    int32_t fim_rep = kNoToken;
    int32_t fim_sep = kNoToken;
};

class Vocab {
  public:
    // Reads and validates the tokenizer metadata; throws Error naming the key and the problem.
    static Vocab from_gguf(const gguf::File& file);
    static Vocab from_metadata(const gguf::Metadata& metadata);

    // Large: moved, never copied by accident.
    Vocab(Vocab&&) noexcept = default;
    Vocab& operator=(Vocab&&) noexcept = default;
    Vocab(const Vocab&) = delete;
    Vocab& operator=(const Vocab&) = delete;

    VocabType type() const { return type_; }
    PreTokenizer pre_tokenizer() const { return pre_; }

    int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
    bool valid(int32_t id) const { return id >= 0 && id < size(); }
    // Throws Error when `id` is out of range.
    const TokenData& token(int32_t id) const;
    // The id whose text is exactly `text` (the first one, should the vocabulary repeat a text),
    // or kNoToken.
    int32_t find(std::string_view text) const;

    // BPE: the merge of two adjacent tokens, or nullptr when they do not merge.
    struct Merge {
        int32_t rank;    // position in tokenizer.ggml.merges: lower merges first
        int32_t result;  // the token the pair becomes
    };
    const Merge* merge(int32_t left, int32_t right) const;

    // The token that stands for one raw byte: SPM "<0xNN>" (or the byte itself as a token), BPE
    // the byte's printable stand-in; kNoToken when the vocabulary has none.
    int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

    const SpecialTokens& special() const { return special_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    // WordPiece: [SEP] (special().sep) goes after the text (tokenizer.ggml.add_sep_token).
    bool add_sep() const { return add_sep_; }
    // SPM: a space is put before the text (and taken off the first piece when decoding). WPM:
    // the first word's start marker decodes to a space, which decoding takes off likewise.
    bool add_space_prefix() const { return add_space_prefix_; }
    // Bytes of the longest token text: WordPiece tries no longer match than this.
    size_t max_token_length() const { return max_token_length_; }
    bool ignore_merges() const { return ignore_merges_; }
    // Whether the reference tidies " ," " 's" etc. when detokenizing
    // (clean_up_tokenization_spaces).
    bool clean_spaces() const { return clean_spaces_; }

    // End of generation: EOS, EOT, EOM and the other end markers the vocabulary has.
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

    // Tokens looked for in raw text before tokenizing it, longest text first: user-defined ones
    // always, control and unknown ones only when special tokens are parsed.
    const std::vector<int32_t>& literal_tokens() const { return literal_tokens_; }

    // Non-fatal problems found while loading (unknown pre-tokenizer, repeated token texts, ...).
    const std::vector<std::string>& warnings() const { return warnings_; }

  private:
    Vocab() = default;
    void load_tokens(const gguf::Metadata& md);
    void load_merges(const gguf::Metadata& md);
    void load_special_ids(const gguf::Metadata& md);
    void detect_end_markers();
    void finish();
    void warn(std::string message);

    // Open-addressing hash tables: loading a 100k-token vocabulary does some 400k lookups, and
    // node-based maps spend most of that time chasing pointers.
    class TextIndex {
      public:
        void build(const std::vector<TokenData>& tokens, std::vector<std::string>& repeats);
        int32_t find(std::string_view text) const;

      private:
        // The text is reached through the slot itself (no detour through the token table): it
        // points into the tokens' strings, which stay put when the Vocab moves.
        struct Slot {
            uint64_t hash = 0;
            const char* text = nullptr;
            uint32_t length = 0;
            int32_t id = kNoToken;  // kNoToken: empty
        };
        std::vector<Slot> slots_;
    };
    class MergeIndex {
      public:
        void reserve(size_t n);
        // Keeps the first merge of a pair.
        void insert(uint64_t key, Merge merge);
        const Merge* find(uint64_t key) const;

      private:
        void grow();
        std::vector<uint64_t> keys_;
        std::vector<Merge> merges_;  // rank -1: empty slot
        size_t size_ = 0;
    };

    VocabType type_ = VocabType::Spm;
    PreTokenizer pre_ = PreTokenizer::Default;

    std::vector<TokenData> tokens_;
    TextIndex ids_by_text_;
    MergeIndex merges_;
    size_t max_token_length_ = 0;
    int32_t byte_tokens_[256];

    SpecialTokens special_;
    bool add_bos_ = false;
    bool add_eos_ = false;
    bool add_sep_ = false;
    bool add_space_prefix_ = false;
    bool ignore_merges_ = false;
    bool clean_spaces_ = false;
    bool bos_default_none_ = false;

    std::vector<int32_t> eog_ids_;
    std::vector<int32_t> literal_tokens_;
    std::vector<std::string> warnings_;
};

}  // namespace ggufd::tokenizer
