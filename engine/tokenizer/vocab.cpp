// Loading follows the semantics of llama.cpp's llama_vocab::load (read, not copied): the same
// defaults per tokenizer model and pre-tokenizer, the same special-token keys, the same detection
// of end-of-turn markers by their text. It is stricter where the reference silently carries on
// with inconsistent metadata (see the errors thrown below).
#include "engine/tokenizer/vocab.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <iterator>

#include <spdlog/spdlog.h>

#include "engine/tokenizer/unicode.h"
#include "gguf/file.h"
#include "text/utf8.h"

namespace ggufd::tokenizer {

namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string key(std::string_view name) {
    return std::string(kPrefix) + std::string(name);
}

// The attributes of a token of GGUF type v, indexed by TokenType; any other v is Undefined.
uint32_t attrs_of_type(int32_t v) {
    constexpr uint32_t kByType[] = {attr::kUndefined, attr::kNormal,      attr::kUnknown,
                                    attr::kControl,   attr::kUserDefined, attr::kUnused,
                                    attr::kByte};
    static_assert(std::size(kByType) == static_cast<size_t>(TokenType::Byte) + 1);
    return v >= 0 && v < static_cast<int32_t>(std::size(kByType)) ? kByType[v] : attr::kUndefined;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// "<0xNN>" -> NN, else -1.
int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string byte_token_text(uint8_t b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    return buf;
}

uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
}

// A quoted token text for messages, cut short and with control bytes escaped.
std::string quote_text(std::string_view text) {
    std::string out = "'";
    for (size_t i = 0; i < text.size() && i < 40; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (text.size() > 40) out += "...";
    return out + "'";
}

}  // namespace

Vocab Vocab::from_gguf(const gguf::File& file) {
    return from_metadata(file.metadata());
}

Vocab Vocab::from_metadata(const gguf::Metadata& md) {
    Vocab v;
    try {
        const std::string model_name = md.get<std::string>(key("model"));
        if (model_name == "llama") {
            v.type_ = VocabType::Spm;
            v.add_space_prefix_ = true;
            v.add_bos_ = true;
            v.add_eos_ = false;
            v.clean_spaces_ = false;
        } else if (model_name == "gpt2") {
            v.type_ = VocabType::Bpe;
            const std::string pre_name = md.get_or<std::string>(key("pre"), "");
            const PreTokenizerConfig cfg = pre_tokenizer_config(pre_name);
            if (!cfg.known) {
                v.warn("unknown pre-tokenizer '" + pre_name +
                       "'; using the GPT-2 pre-tokenizer instead (token ids may differ from the "
                       "model's own tokenizer)");
            } else if (pre_name.empty()) {
                v.warn("no tokenizer.ggml.pre in the metadata; using the 'default' pre-tokenizer");
            }
            v.pre_ = cfg.kind;
            v.ignore_merges_ = cfg.ignore_merges;
            v.clean_spaces_ = cfg.clean_spaces;
            v.add_bos_ = cfg.add_bos;
            v.bos_default_none_ = cfg.bos_default_none;
            v.add_space_prefix_ = false;
        } else if (model_name == "bert") {
            v.type_ = VocabType::Wpm;
            v.add_bos_ = true;  // [CLS]
            v.add_eos_ = false;
            v.add_sep_ = true;
            // The reference leaves this off for WordPiece and so decodes "hello" as " hello"; on,
            // decoding takes off the first word's marker as it does SPM's dummy prefix.
            v.add_space_prefix_ = true;
            v.clean_spaces_ = true;
        } else {
            throw Error("tokenizer model '" + model_name +
                        "' is not supported (supported: 'llama' SentencePiece, 'gpt2' BPE, "
                        "'bert' WordPiece)");
        }
        v.add_space_prefix_ = md.get_or<bool>(key("add_space_prefix"), v.add_space_prefix_);

        v.load_tokens(md);
        if (v.type_ == VocabType::Bpe) v.load_merges(md);
        v.load_special_ids(md);
        v.add_bos_ = md.get_or<bool>(key("add_bos_token"), v.add_bos_);
        v.add_eos_ = md.get_or<bool>(key("add_eos_token"), v.add_eos_);
        v.add_sep_ = md.get_or<bool>(key("add_sep_token"), v.add_sep_);
        if (v.add_bos_ && v.special_.bos == kNoToken) {
            throw Error("tokenizer.ggml.add_bos_token is true but the vocabulary has no BOS token");
        }
        if (v.add_eos_ && v.special_.eos == kNoToken) {
            throw Error("tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token");
        }
        if (v.add_sep_ && v.special_.sep == kNoToken) {
            // A warning, not an error: files that loaded before add_sep_token was read still do.
            v.warn(
                "tokenizer.ggml.add_sep_token is set but the vocabulary has no separator token; "
                "no separator is added");
            v.add_sep_ = false;
        }
        if (v.type_ == VocabType::Wpm && v.special_.unk == kNoToken) {
            throw Error(
                "a WordPiece vocabulary needs an unknown token for the words it cannot "
                "spell, and this one has none (tokenizer.ggml.unknown_token_id)");
        }
        v.detect_end_markers();
        v.finish();
    } catch (const gguf::Error& e) {
        throw Error(std::string("bad tokenizer metadata: ") + e.what());
    }
    for (const std::string& w : v.warnings_) spdlog::warn("tokenizer: {}", w);
    return v;
}

void Vocab::warn(std::string message) {
    warnings_.push_back(std::move(message));
}

const TokenData& Vocab::token(int32_t id) const {
    if (!valid(id)) {
        throw Error("token id " + std::to_string(id) + " is out of range (vocabulary of " +
                    std::to_string(size()) + " tokens)");
    }
    return tokens_[static_cast<size_t>(id)];
}

int32_t Vocab::find(std::string_view text) const {
    return ids_by_text_.find(text);
}

const Vocab::Merge* Vocab::merge(int32_t left, int32_t right) const {
    return merges_.find(pair_key(left, right));
}

namespace {

size_t table_size_for(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;  // at most half full
    return cap;
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: spreads consecutive ids over the table
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

}  // namespace

void Vocab::TextIndex::build(const std::vector<TokenData>& tokens,
                             std::vector<std::string>& repeats) {
    slots_.assign(table_size_for(tokens.size()), Slot{});
    const size_t mask = slots_.size() - 1;
    for (size_t id = 0; id < tokens.size(); ++id) {
        const std::string& text = tokens[id].text;
        const uint64_t h = std::hash<std::string_view>{}(text);
        size_t i = h & mask;
        bool repeated = false;
        while (slots_[i].id != kNoToken) {
            const Slot& s = slots_[i];
            if (s.hash == h && std::string_view(s.text, s.length) == text) {
                repeated = true;
                if (repeats.size() < 5) {
                    repeats.push_back("token " + std::to_string(id) + " repeats the text " +
                                      quote_text(text) + " of token " + std::to_string(s.id) +
                                      "; the first id is used");
                }
                break;
            }
            i = (i + 1) & mask;
        }
        if (!repeated) {
            slots_[i] =
                Slot{h, text.data(), static_cast<uint32_t>(text.size()), static_cast<int32_t>(id)};
        }
    }
}

int32_t Vocab::TextIndex::find(std::string_view text) const {
    if (slots_.empty()) return kNoToken;
    const uint64_t h = std::hash<std::string_view>{}(text);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask; slots_[i].id != kNoToken; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.hash == h && std::string_view(s.text, s.length) == text) return s.id;
    }
    return kNoToken;
}

void Vocab::MergeIndex::reserve(size_t n) {
    keys_.assign(table_size_for(n), 0);
    merges_.assign(keys_.size(), Merge{-1, kNoToken});
    size_ = 0;
}

void Vocab::MergeIndex::grow() {
    std::vector<uint64_t> keys = std::move(keys_);
    std::vector<Merge> merges = std::move(merges_);
    reserve(keys.size());  // table_size_for doubles it
    for (size_t i = 0; i < keys.size(); ++i) {
        if (merges[i].rank >= 0) insert(keys[i], merges[i]);
    }
}

void Vocab::MergeIndex::insert(uint64_t key, Merge merge) {
    if (keys_.empty() || (size_ + 1) * 2 > keys_.size()) grow();
    const size_t mask = keys_.size() - 1;
    size_t i = mix(key) & mask;
    while (merges_[i].rank >= 0) {
        if (keys_[i] == key) return;
        i = (i + 1) & mask;
    }
    keys_[i] = key;
    merges_[i] = merge;
    ++size_;
}

const Vocab::Merge* Vocab::MergeIndex::find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix(key) & mask; merges_[i].rank >= 0; i = (i + 1) & mask) {
        if (keys_[i] == key) return &merges_[i];
    }
    return nullptr;
}

bool Vocab::is_eog(int32_t id) const {
    return id != kNoToken && std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

void Vocab::load_tokens(const gguf::Metadata& md) {
    std::vector<std::string> texts = md.get_array<std::string>(key("tokens"));
    if (texts.empty()) throw Error("tokenizer.ggml.tokens is empty");
    if (texts.size() > static_cast<size_t>(INT32_MAX)) {
        throw Error("tokenizer.ggml.tokens has more tokens than ids can address");
    }
    const size_t n = texts.size();

    std::vector<float> scores;
    if (const gguf::Value* sv = md.find(key("scores"))) {
        if (!sv->is_array()) throw Error("tokenizer.ggml.scores is not an array");
        const gguf::Array& arr = sv->as_array();
        // The reference also accepts integer scores.
        if (arr.element_type() == gguf::ValueType::INT32) {
            for (int32_t s : arr.to_vector<int32_t>(key("scores"))) {
                scores.push_back(static_cast<float>(s));
            }
        } else {
            scores = arr.to_vector<float>(key("scores"));
        }
        if (scores.size() != n) {
            throw Error("tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                        " entries for " + std::to_string(n) + " tokens");
        }
    }
    std::vector<int32_t> types;
    if (md.contains(key("token_type"))) {
        types = md.get_array<int32_t>(key("token_type"));
        if (types.size() != n) {
            throw Error("tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                        " entries for " + std::to_string(n) + " tokens");
        }
    }

    tokens_.resize(n);
    max_token_length_ = 0;
    for (size_t i = 0; i < n; ++i) {
        TokenData& t = tokens_[i];
        t.text = std::move(texts[i]);
        if (t.text.empty()) {
            // An empty text could never be matched nor told apart; the reference names it so.
            t.text = "[EMPTY_" + std::to_string(i) + "]";
        }
        t.score = scores.empty() ? 0.0f : scores[i];
        t.attrs = types.empty() ? attr::kNormal : attrs_of_type(types[i]);
        if (t.attrs & attr::kByte) t.byte = static_cast<int16_t>(parse_byte_token(t.text));
        max_token_length_ = std::max(max_token_length_, t.text.size());
    }
    std::vector<std::string> repeats;
    ids_by_text_.build(tokens_, repeats);
    for (std::string& r : repeats) warn(std::move(r));

    for (int b = 0; b < 256; ++b) {
        const auto byte = static_cast<uint8_t>(b);
        int32_t id = kNoToken;
        if (type_ == VocabType::Spm) {
            id = find(byte_token_text(byte));
            if (id == kNoToken) id = find(std::string(1, static_cast<char>(byte)));
        } else if (type_ == VocabType::Bpe) {
            std::string s;
            text::append_utf8(s, unicode::byte_to_code_point(byte));
            id = find(s);
        }  // WordPiece has no byte fallback: what it cannot spell becomes [UNK]
        byte_tokens_[b] = id;
    }
}

void Vocab::load_merges(const gguf::Metadata& md) {
    const std::vector<std::string> merges = md.get_array<std::string>(key("merges"));
    merges_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& m = merges[i];
        // The separator is the first space after the first byte (a merge never starts with one).
        const size_t sep = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
        auto fail = [&](const std::string& why) {
            throw Error("tokenizer.ggml.merges[" + std::to_string(i) + "] " + quote_text(m) + ": " +
                        why);
        };
        if (sep == std::string::npos) fail("not two tokens separated by a space");
        const std::string_view left(m.data(), sep);
        const std::string_view right(m.data() + sep + 1, m.size() - sep - 1);
        const int32_t l = find(left), r = find(right);
        if (l == kNoToken) fail("left part " + quote_text(left) + " is not a token");
        if (r == kNoToken) fail("right part " + quote_text(right) + " is not a token");
        const int32_t result = find(std::string(left) + std::string(right));
        if (result == kNoToken) fail("the merged text is not a token");
        // A repeated pair keeps its first (best) rank.
        merges_.insert(pair_key(l, r), Merge{static_cast<int32_t>(i), result});
    }
}

void Vocab::load_special_ids(const gguf::Metadata& md) {
    if (type_ == VocabType::Spm) {
        special_.bos = 1;
        special_.eos = 2;
        special_.unk = 0;
    } else if (type_ == VocabType::Wpm) {
        // bert-base's ids: [PAD] 0, [UNK] 100, [CLS] 101 (the BOS), [SEP] 102, [MASK] 103.
        special_.bos = 101;
        special_.unk = 100;
        special_.sep = 102;
        special_.pad = 0;
        special_.mask = 103;
    } else {
        // The reference's BPE defaults (Falcon's <|endoftext|>), used only without the keys.
        special_.bos = bos_default_none_ ? kNoToken : 11;
        special_.eos = 11;
    }
    for (int32_t* id : {&special_.bos, &special_.eos, &special_.unk, &special_.sep, &special_.pad,
                        &special_.mask}) {
        if (!valid(*id)) *id = kNoToken;
    }

    struct Key {
        std::string_view name;
        int32_t* id;
        bool required_valid;  // an out-of-range value is an error, not a warning
    };
    const Key keys[] = {
        // Converters name BERT's [CLS] so. The reference ignores the key and keeps its default BOS
        // (101, [CLS] in bert-base vocabularies); reading it agrees there and stays right for a
        // vocabulary with [CLS] elsewhere. Before bos_token_id, which wins when a file has both.
        {"cls_token_id", &special_.bos, false},
        {"bos_token_id", &special_.bos, true},
        {"eos_token_id", &special_.eos, true},
        {"eot_token_id", &special_.eot, false},
        {"eom_token_id", &special_.eom, false},
        {"unknown_token_id", &special_.unk, false},
        {"seperator_token_id", &special_.sep, false},  // sic: the key as GGUF spells it
        {"padding_token_id", &special_.pad, false},
        {"mask_token_id", &special_.mask, false},
        {"fim_pre_token_id", &special_.fim_pre, false},
        {"fim_suf_token_id", &special_.fim_suf, false},
        {"fim_mid_token_id", &special_.fim_mid, false},
        {"fim_pad_token_id", &special_.fim_pad, false},
        {"fim_rep_token_id", &special_.fim_rep, false},
        {"fim_sep_token_id", &special_.fim_sep, false},
        {"prefix_token_id", &special_.fim_pre, false},  // older names of the FIM keys
        {"suffix_token_id", &special_.fim_suf, false},
        {"middle_token_id", &special_.fim_mid, false},
    };
    for (const Key& k : keys) {
        const std::optional<int64_t> value = md.get_optional<int64_t>(key(k.name));
        if (!value) continue;
        // -1 (or its uint32 form) is how converters write "none": keep the default.
        if (*value == -1 || *value == 0xFFFFFFFF) continue;
        if (*value < 0 || *value >= size()) {
            const std::string msg = "tokenizer.ggml." + std::string(k.name) + " = " +
                                    std::to_string(*value) + " is outside the vocabulary of " +
                                    std::to_string(size()) + " tokens";
            if (k.required_valid) throw Error(msg);
            warn(msg + "; ignored");
            continue;
        }
        *k.id = static_cast<int32_t>(*value);
    }
}

void Vocab::detect_end_markers() {
    // Marks a token found by its text as a control token: converters sometimes leave end-of-turn
    // markers as normal tokens, which would make them plain text to the tokenizer.
    auto mark_control = [&](int32_t id) {
        TokenData& t = tokens_[static_cast<size_t>(id)];
        if (!(t.attrs & attr::kControl)) {
            warn("token " + std::to_string(id) + " " + quote_text(t.text) +
                 " looks like a control token but is not typed so; treating it as control");
            t.attrs |= attr::kControl;
        }
    };
    auto detect = [&](int32_t& slot, std::initializer_list<std::string_view> texts) {
        if (slot != kNoToken) return;
        for (std::string_view text : texts) {
            const int32_t id = find(text);
            if (id != kNoToken) {
                slot = id;
                mark_control(id);
                return;
            }
        }
    };
    // Names in the order they are preferred when a vocabulary has several.
    detect(special_.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                          "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                          "<\xEF\xBD\x9C"
                          "end\xE2\x96\x81"
                          "of\xE2\x96\x81"
                          "sentence\xEF\xBD\x9C>",
                          "<end_of_utterance>"});
    detect(special_.eom, {"<|eom_id|>"});
    detect(special_.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                              "<\xEF\xBD\x9C"
                              "fim\xE2\x96\x81"
                              "begin\xEF\xBD\x9C>",
                              "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>"});
    detect(special_.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                              "<\xEF\xBD\x9C"
                              "fim\xE2\x96\x81"
                              "hole\xEF\xBD\x9C>",
                              "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>"});
    detect(special_.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                              "<\xEF\xBD\x9C"
                              "fim\xE2\x96\x81"
                              "end\xEF\xBD\x9C>",
                              "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"});
    detect(special_.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
    detect(special_.fim_rep,
           {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(special_.fim_sep, {"<|file_sep|>"});

    std::vector<int32_t> eog;
    auto add = [&](int32_t id) {
        if (id != kNoToken && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    add(special_.fim_pad);
    add(special_.fim_rep);
    add(special_.fim_sep);
    for (std::string_view text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
                                  "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
                                  "<|end_of_text|>", "<end_of_utterance>"}) {
        const int32_t id = find(text);
        if (id != kNoToken) {
            add(id);
            mark_control(id);
        }
    }
    add(special_.eos);
    add(special_.eot);
    add(special_.eom);

    // gpt-oss (harmony format) ends a message with <|end|> but generation with <|return|> or
    // <|call|>; there <|end|> must not stop generation.
    const int32_t end = find("<|end|>");
    if (end != kNoToken && find("<|return|>") != kNoToken && find("<|call|>") != kNoToken) {
        eog.erase(std::remove(eog.begin(), eog.end(), end), eog.end());
    }
    std::sort(eog.begin(), eog.end());
    eog_ids_ = std::move(eog);
}

void Vocab::finish() {
    literal_tokens_.clear();
    for (int32_t id = 0; id < size(); ++id) {
        if (tokens_[static_cast<size_t>(id)].attrs &
            (attr::kControl | attr::kUserDefined | attr::kUnknown)) {
            literal_tokens_.push_back(id);
        }
    }
    std::stable_sort(literal_tokens_.begin(), literal_tokens_.end(), [&](int32_t a, int32_t b) {
        return tokens_[static_cast<size_t>(a)].text.size() >
               tokens_[static_cast<size_t>(b)].text.size();
    });
}

}  // namespace ggufd::tokenizer
