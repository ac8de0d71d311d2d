// Tokenizers: small SentencePiece, byte-level BPE and WordPiece vocabularies are written as GGUF
// files in memory (gguf::Writer) and loaded the way a model's are, one per variant (every
// pre-tokenizer family, with and without byte tokens). Arbitrary bytes, invalid UTF-8 included,
// are encoded with and without special-token parsing, the result decoded, and random ids decoded
// and streamed.
//
// Invariants checked: encode never throws and gives valid ids; decode gives valid UTF-8 (or throws
// tokenizer::Error exactly when an id is out of range); decode(encode(text)) == text for valid
// UTF-8 where the vocabulary can spell everything; WordPiece, which normalises, gives the same ids
// again for its decoded text when no word was unknown; the stream decoder's output joined equals
// decode().
//
// Input layout: byte 0 picks the vocabulary, byte 1 the options, the rest is the text; the text's
// bytes, read in pairs, are also the ids decoded.
#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "fuzz/fuzz_support.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "text/utf8.h"

namespace ggufd::fuzz {
namespace {

using tokenizer::Tokenizer;

const std::string kSpace = "\xE2\x96\x81";  // SentencePiece's ▁

template <typename T>
gguf::Value array_of(std::vector<T> items) {
    gguf::Array a;
    a.items = std::move(items);
    return gguf::Value(std::move(a));
}

Tokenizer load(const gguf::Writer& writer) {
    return Tokenizer(
        tokenizer::Vocab::from_gguf(gguf::File::from_bytes(writer.to_bytes(), "vocab")));
}

// Token types as tokenizer.ggml.token_type numbers them.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

struct TokenList {
    std::vector<std::string> texts;
    std::vector<float> scores;
    std::vector<int32_t> types;
    int32_t add(std::string text, int32_t type, float score = 0.0f) {
        texts.push_back(std::move(text));
        types.push_back(type);
        scores.push_back(score);
        return static_cast<int32_t>(texts.size() - 1);
    }
};

// SentencePiece: pieces scored so that merges go through intermediate tokens; byte fallback tokens
// unless `with_bytes` is false (unknown characters then become <unk>).
Tokenizer make_spm(bool with_bytes) {
    TokenList t;
    t.add("<unk>", kUnknown);
    t.add("<s>", kControl);
    t.add("</s>", kControl);
    if (with_bytes) {
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            t.add(name, kByte);
        }
    }
    const char* pieces[] = {"e",  "h",  "l",   "o",  "t",        "a",           "n",  "i",   "g",
                            "w",  "r",  "d",   "1",  "2",        "3",           "\n", ".",   ",",
                            "he", "ll", "llo", "in", "ng",       "ing",         "th", "the", "wo",
                            "or", "rl", "ld",  "12", "\xC3\xA9", "\xE4\xB8\xAD"};
    float score = -1.0f;
    for (const char* p : pieces) t.add(p, kNormal, score -= 0.5f);
    for (const char* p : {"", "h", "he", "hello", "the", "w", "world", "in", "a", "1"}) {
        t.add(kSpace + p, kNormal, score -= 0.25f);
    }
    t.add(kSpace + kSpace, kNormal, -2.0f);
    t.add("<|im_start|>", kControl);
    t.add("<|im_end|>", kNormal);  // an end marker mistyped as normal, as some converters write it
    t.add("<tool>", kUserDefined);
    t.add("<unused0>", kUnused);

    gguf::Writer w;
    w.set("general.architecture", "llama");
    w.set("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.tokens", array_of(t.texts));
    w.set("tokenizer.ggml.scores", array_of(t.scores));
    w.set("tokenizer.ggml.token_type", array_of(t.types));
    w.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
    w.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    w.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    return load(w);
}

std::string stand_ins(std::string_view bytes) {
    std::string s;
    for (char c : bytes) {
        text::append_utf8(s, tokenizer::unicode::byte_to_code_point(static_cast<uint8_t>(c)));
    }
    return s;
}

// Byte-level BPE with the given pre-tokenizer. Words are spelt by merging left to right, one byte
// at a time, so every prefix of a word is a token. `all_bytes` false leaves out the stand-ins of
// bytes >= 0x80 (the reference drops text it cannot spell).
Tokenizer make_bpe(const std::string& pre, bool all_bytes) {
    TokenList t;
    for (int b = 0; b < (all_bytes ? 256 : 128); ++b) {
        t.add(stand_ins(std::string(1, static_cast<char>(b))), kNormal);
    }
    std::vector<std::string> merges;
    const char* words[] = {"hello",
                           " hello",
                           " world",
                           "ing",
                           " the",
                           "123",
                           "  ",
                           "\n\n",
                           "\xC3\xA9t\xC3\xA9",
                           " \xE4\xB8\xAD\xE6\x96\x87",
                           "'s",
                           "!!"};
    for (std::string_view word : words) {
        if (!all_bytes && std::any_of(word.begin(), word.end(), [](char c) { return c & 0x80; })) {
            continue;
        }
        std::string left = stand_ins(word.substr(0, 1));
        for (size_t i = 1; i < word.size(); ++i) {
            const std::string right = stand_ins(word.substr(i, 1));
            const std::string merged = left + right;
            if (std::find(t.texts.begin(), t.texts.end(), merged) == t.texts.end()) {
                t.add(merged, kNormal);
                merges.push_back(left + " " + right);
            }
            left = merged;
        }
    }
    const int32_t eot = t.add("<|endoftext|>", kControl);
    t.add("<|im_start|>", kControl);
    t.add("<|im_end|>", kControl);
    t.add("<tool>", kUserDefined);
    t.add("hello", kUserDefined);  // a user-defined token that is also a word of the text

    gguf::Writer w;
    w.set("general.architecture", "gpt2");
    w.set("tokenizer.ggml.model", "gpt2");
    w.set("tokenizer.ggml.pre", pre);
    w.set("tokenizer.ggml.tokens", array_of(t.texts));
    w.set("tokenizer.ggml.token_type", array_of(t.types));
    w.set("tokenizer.ggml.merges", array_of(merges));
    w.set("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(eot));
    w.set("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eot));
    return load(w);
}

// WordPiece as the converter stores a bert vocabulary: word-initial pieces with "▁", continuation
// pieces bare; every ASCII letter and digit both ways, so only other characters make [UNK].
Tokenizer make_wpm() {
    TokenList t;
    const int32_t unk = t.add("[UNK]", kControl);
    const int32_t cls = t.add("[CLS]", kControl);
    const int32_t sep = t.add("[SEP]", kControl);
    t.add("[PAD]", kControl);
    for (char c = 'a'; c <= 'z'; ++c) {
        t.add(kSpace + c, kNormal);
        t.add(std::string(1, c), kNormal);
    }
    for (char c = '0'; c <= '9'; ++c) {
        t.add(kSpace + c, kNormal);
        t.add(std::string(1, c), kNormal);
    }
    for (char c : std::string_view(".,!?'\"$<>()[]{}-_")) t.add(kSpace + c, kNormal);
    for (const char* w : {"hello", "world", "un", "the", "\xE4\xB8\xAD", "\xC2\xBF"}) {
        t.add(kSpace + w, kNormal);  // 中, ¿
    }
    for (const char* p : {"ing", "able", "ll", "ed"}) t.add(p, kNormal);
    t.add("<tool>", kUserDefined);

    gguf::Writer w;
    w.set("general.architecture", "bert");
    w.set("tokenizer.ggml.model", "bert");
    w.set("tokenizer.ggml.tokens", array_of(t.texts));
    w.set("tokenizer.ggml.token_type", array_of(t.types));
    w.set("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
    w.set("tokenizer.ggml.cls_token_id", static_cast<uint32_t>(cls));
    w.set("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(sep));
    return load(w);
}

constexpr const char* kWordPiece = "(wordpiece)";

struct Variant {
    const char* pre;  // nullptr: SentencePiece; kWordPiece: WordPiece
    bool complete;    // byte tokens for every byte (WordPiece: false, it normalises)
};
constexpr std::array kVariants = {
    Variant{nullptr, true},          Variant{nullptr, false},      Variant{"default", true},
    Variant{"gpt-2", true},          Variant{"llama-bpe", true},   Variant{"qwen2", true},
    Variant{"starcoder", true},      Variant{"falcon", true},      Variant{"deepseek-llm", true},
    Variant{"deepseek-coder", true}, Variant{"deepseek-v3", true}, Variant{"chatglm-bpe", true},
    Variant{"no-such-pre", true},    Variant{"gpt-2", false},      Variant{kWordPiece, false},
};

const Tokenizer& tokenizer_for(size_t variant) {
    static std::array<std::unique_ptr<Tokenizer>, kVariants.size()> cache;
    std::unique_ptr<Tokenizer>& slot = cache[variant];
    if (!slot) {
        const Variant& v = kVariants[variant];
        slot = std::make_unique<Tokenizer>(v.pre == kWordPiece ? make_wpm()
                                           : v.pre             ? make_bpe(v.pre, v.complete)
                                                               : make_spm(v.complete));
    }
    return *slot;
}

bool valid_utf8(std::string_view s) {
    return text::sanitize_utf8(s) == s;
}

}  // namespace

bool fuzz_tokenizer_one(const uint8_t* data, size_t size) {
    Input in(data, size);
    const size_t variant = in.byte() % kVariants.size();
    const uint8_t flags = in.byte();
    const std::string_view text = in.rest();
    const Tokenizer& t = tokenizer_for(variant);
    const bool spm = kVariants[variant].pre == nullptr;

    tokenizer::EncodeOptions enc;
    enc.parse_special = flags & 1;
    enc.add_bos = (flags & 2) != 0;
    // Asked for, the end token comes from the vocabulary's defaults where it has no EOS
    // (WordPiece: [SEP]); requesting an EOS that does not exist is an error by contract.
    if (!(flags & 4)) {
        enc.add_eos = false;
    } else if (t.eos() != tokenizer::kNoToken) {
        enc.add_eos = true;
    }
    const std::vector<int32_t> ids = t.encode(text, enc);
    for (int32_t id : ids) check(t.vocab().valid(id), "encode gives valid ids");

    tokenizer::DecodeOptions dec;
    dec.render_special = flags & 8;
    dec.remove_special = flags & 16;
    dec.clean_spaces = flags & 32;
    dec.strip_leading_space = !(flags & 64);
    const std::string decoded = t.decode(ids, dec);
    check(valid_utf8(decoded), "decode gives valid UTF-8");

    // Plain text round-trips where the vocabulary can spell it. SentencePiece turns its own space
    // marker into a space, and puts its dummy space after a user-defined token as after any
    // special one, so text holding either cannot come back.
    // From the flags: add_bos and add_eos are optionals, engaged whatever their value.
    const bool plain = !enc.parse_special && !(flags & 2) && !(flags & 4);
    const bool user_defined = std::any_of(ids.begin(), ids.end(), [&](int32_t id) {
        return (t.vocab().token(id).attrs & tokenizer::attr::kUserDefined) != 0;
    });
    if (plain && kVariants[variant].complete && valid_utf8(text) &&
        !(spm && (user_defined || text.find(kSpace) != std::string_view::npos))) {
        check(t.decode(ids) == text, "decode(encode(text)) == text");
    }
    if (plain && kVariants[variant].pre == kWordPiece &&
        std::find(ids.begin(), ids.end(), t.vocab().special().unk) == ids.end()) {
        check(t.encode(t.decode(ids), enc) == ids, "WordPiece: encode(decode(ids)) == ids");
    }

    // Ids from the input bytes, some out of range on purpose.
    std::vector<int32_t> raw;
    const int32_t span = t.n_vocab() + 8;
    for (size_t i = 0; i + 1 < text.size() && raw.size() < 256; i += 2) {
        const int v = (static_cast<uint8_t>(text[i]) << 8) | static_cast<uint8_t>(text[i + 1]);
        raw.push_back(v % span - 4);
    }
    const bool all_valid =
        std::all_of(raw.begin(), raw.end(), [&](int32_t id) { return t.vocab().valid(id); });
    try {
        const std::string s = t.decode(raw, dec);
        check(all_valid, "decode rejects out-of-range ids");
        check(valid_utf8(s), "decode of any ids gives valid UTF-8");
    } catch (const tokenizer::Error&) {
        check(!all_valid, "decode throws only for out-of-range ids");
    }

    // Streaming: the joined pieces equal a one-shot decode with the same settings.
    tokenizer::StreamDecoder::Options so;
    so.render_special = dec.render_special;
    tokenizer::StreamDecoder stream(t, so);
    std::string streamed;
    std::vector<int32_t> accepted;
    for (int32_t id : raw) {
        try {
            const std::string piece = stream.push(id);
            check(valid_utf8(piece), "stream pieces are valid UTF-8");
            streamed += piece;
            accepted.push_back(id);
        } catch (const tokenizer::Error&) {
            check(!t.vocab().valid(id), "push throws only for out-of-range ids");
        }
    }
    streamed += stream.flush();
    check(stream.pending() == 0, "flush empties the decoder");
    tokenizer::DecodeOptions same;
    same.render_special = so.render_special;
    same.strip_leading_space = false;
    check(streamed == t.decode(accepted, same), "streamed text == decode()");
    return true;
}

}  // namespace ggufd::fuzz

GGUFD_FUZZ_ENTRY(fuzz_tokenizer_one)
