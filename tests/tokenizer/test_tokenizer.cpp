// Tokenizer behaviour on small vocabularies built here (every expected id worked out from the
// merge rules) and on the real conformance vocabularies (round trips, special tokens, bad input).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "gguf/file.h"
#include "tests/support/conformance.h"
#include "text/utf8.h"

namespace {

using ggufd::tokenizer::DecodeOptions;
using ggufd::tokenizer::EncodeOptions;
using ggufd::tokenizer::Error;
using ggufd::tokenizer::kNoToken;
using ggufd::tokenizer::StreamDecoder;
using ggufd::tokenizer::Tokenizer;
using ggufd::tokenizer::Vocab;
using Ids = std::vector<int32_t>;

const std::string kSp = "\xE2\x96\x81";  // ▁

gguf::Value strings(std::vector<std::string> v) {
    gguf::Array a;
    a.items = std::move(v);
    return gguf::Value(std::move(a));
}
gguf::Value floats(std::vector<float> v) {
    gguf::Array a;
    a.items = std::move(v);
    return gguf::Value(std::move(a));
}
gguf::Value ints(std::vector<int32_t> v) {
    gguf::Array a;
    a.items = std::move(v);
    return gguf::Value(std::move(a));
}

// --- a small SentencePiece vocabulary
// -------------------------------------------------------------

struct SpmSpec {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    int32_t add(std::string text, float score, int32_t type) {
        tokens.push_back(std::move(text));
        scores.push_back(score);
        types.push_back(type);
        return static_cast<int32_t>(tokens.size() - 1);
    }
};

struct SmallSpm {
    SpmSpec spec;
    int32_t sp, h, e, l, o, ll, he, llo, sp_he, sp_hello, im_start, tool, im_end;
    int32_t byte(uint8_t b) const { return 3 + b; }

    SmallSpm() {
        spec.add("<unk>", 0, 2);
        spec.add("<s>", 0, 3);
        spec.add("</s>", 0, 3);
        for (int b = 0; b < 256; ++b) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", b);
            spec.add(buf, 0, 6);
        }
        sp = spec.add(kSp, -5, 1);
        h = spec.add("h", -6, 1);
        e = spec.add("e", -6, 1);
        l = spec.add("l", -6, 1);
        o = spec.add("o", -6, 1);
        ll = spec.add("ll", -1, 1);
        he = spec.add("he", -2, 1);
        llo = spec.add("llo", -3, 1);
        sp_he = spec.add(kSp + "he", -4, 1);
        sp_hello = spec.add(kSp + "hello", -0.5f, 1);
        im_start = spec.add("<|im_start|>", 0, 3);
        tool = spec.add("<tool>", 0, 4);
        im_end = spec.add("<|im_end|>", 0, 1);  // mistyped as normal on purpose
    }

    gguf::Metadata metadata() const {
        gguf::Metadata md;
        md.add("general.architecture", "llama");
        md.add("tokenizer.ggml.model", "llama");
        md.add("tokenizer.ggml.tokens", strings(spec.tokens));
        md.add("tokenizer.ggml.scores", floats(spec.scores));
        md.add("tokenizer.ggml.token_type", ints(spec.types));
        md.add("tokenizer.ggml.bos_token_id", uint32_t{1});
        md.add("tokenizer.ggml.eos_token_id", uint32_t{2});
        md.add("tokenizer.ggml.padding_token_id",
               uint32_t{0xFFFFFFFF});  // "none", as converters write it
        return md;
    }
    Tokenizer tokenizer() const { return Tokenizer(Vocab::from_metadata(metadata())); }
};

EncodeOptions no_bos() {
    EncodeOptions o;
    o.add_bos = false;
    return o;
}

TEST(SpmTokenizer, MergesByScoreThroughIntermediateTokens) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    // ▁ h e l l o: ll (-1), he (-2), llo (-3), ▁he (-4), then ▁he + llo = ▁hello.
    EXPECT_EQ(t.encode("hello", no_bos()), (Ids{v.sp_hello}));
    EXPECT_EQ(t.encode("hello"), (Ids{1, v.sp_hello}));  // add_bos defaults to true for SPM
    EXPECT_EQ(t.encode("", no_bos()), Ids{});
    EXPECT_EQ(t.encode(""), Ids{1});
}

TEST(SpmTokenizer, UnknownCharactersFallBackToBytes) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    // é is not a token: its two UTF-8 bytes are emitted as <0xC3> <0xA9>.
    const Ids ids = t.encode("h\xC3\xA9", no_bos());
    EXPECT_EQ(ids, (Ids{v.sp, v.h, v.byte(0xC3), v.byte(0xA9)}));
    EXPECT_EQ(t.decode(ids), "h\xC3\xA9");
    // Invalid UTF-8 goes through byte fallback too and decodes to U+FFFD (or raw on request).
    const Ids bad = t.encode("h\xFF", no_bos());
    EXPECT_EQ(bad, (Ids{v.sp, v.h, v.byte(0xFF)}));
    EXPECT_EQ(t.decode(bad), "h\xEF\xBF\xBD");
    DecodeOptions raw;
    raw.validate_utf8 = false;
    EXPECT_EQ(t.decode(bad, raw), "h\xFF");
}

TEST(SpmTokenizer, ControlTokensAreParsedOnlyWhenAsked) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    EncodeOptions parse = no_bos();
    parse.parse_special = true;
    // After a special token the dummy space prefix is added again.
    EXPECT_EQ(t.encode("<|im_start|>hello", parse), (Ids{v.im_start, v.sp_hello}));

    // Not parsed: the same characters are plain text (bytes here), never the control id.
    Ids expected{v.sp};
    for (char c : std::string("<|im_start|>")) expected.push_back(v.byte(static_cast<uint8_t>(c)));
    expected.push_back(v.he);
    expected.push_back(v.llo);
    EXPECT_EQ(t.encode("<|im_start|>hello", no_bos()), expected);
    EXPECT_EQ(t.decode(expected), "<|im_start|>hello");
}

TEST(SpmTokenizer, ControlTokenTextInAPlainRangeStaysText) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    // A template wrote the first <|im_start|>; the second sits inside a user's message.
    const std::string prompt = "<|im_start|>hello<|im_start|>";
    EncodeOptions parse = no_bos();
    parse.parse_special = true;
    parse.plain_ranges = {{17, prompt.size()}};
    const Ids ids = t.encode(prompt, parse);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), v.im_start), 1);
    EXPECT_EQ(ids.front(), v.im_start);
    // The protected copy decodes back to its text (the parsed control token renders as nothing).
    EXPECT_EQ(t.decode(ids), " hello<|im_start|>");
    // A range that only grazes the token (one byte) still protects it.
    parse.plain_ranges = {{prompt.size() - 1, prompt.size()}};
    const Ids grazed = t.encode(prompt, parse);
    EXPECT_EQ(std::count(grazed.begin(), grazed.end(), v.im_start), 1);
    // User-defined tokens are recognised even inside a plain range, as without parse_special.
    parse.plain_ranges = {{0, 16}};
    EXPECT_EQ(t.encode("hello<tool>hello", parse), (Ids{v.sp_hello, v.tool, v.sp_hello}));
}

TEST(SpmTokenizer, UserDefinedTokensAreAlwaysMatched) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.encode("hello<tool>hello", no_bos()), (Ids{v.sp_hello, v.tool, v.sp_hello}));
    EXPECT_EQ(t.decode(Ids{v.tool}), "<tool>");  // user-defined text always renders
}

TEST(SpmTokenizer, EndMarkersBecomeControlAndEndGeneration) {
    const SmallSpm v;
    const Vocab vocab = Vocab::from_metadata(v.metadata());
    EXPECT_TRUE(vocab.token(v.im_end).attrs & ggufd::tokenizer::attr::kControl);
    EXPECT_FALSE(vocab.warnings().empty());
    EXPECT_TRUE(vocab.is_eog(2));
    EXPECT_TRUE(vocab.is_eog(v.im_end));
    EXPECT_FALSE(vocab.is_eog(v.im_start));
    EXPECT_EQ(vocab.special().eot, v.im_end);
    EXPECT_EQ(vocab.special().pad, kNoToken);
    // Promoted to control, it no longer matches in unparsed text.
    const Tokenizer t(Vocab::from_metadata(v.metadata()));
    const Ids ids = t.encode("<|im_end|>", no_bos());
    EXPECT_EQ(std::count(ids.begin(), ids.end(), v.im_end), 0);
}

TEST(SpmTokenizer, DecodeHandlesSpacesAndSpecialTokensLikeTheReference) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.decode(Ids{v.sp_hello, v.sp_hello}), "hello hello");
    // A leading BOS takes the one-space strip (llama.cpp prints " hello" for <s>▁hello).
    EXPECT_EQ(t.decode(Ids{1, v.sp_hello}), " hello");
    DecodeOptions keep;
    keep.strip_leading_space = false;
    EXPECT_EQ(t.decode(Ids{v.sp_hello}, keep), " hello");
    DecodeOptions remove;
    remove.remove_special = true;
    EXPECT_EQ(t.decode(Ids{1, v.sp_hello}, remove), " hello");
    DecodeOptions render;
    render.render_special = true;
    EXPECT_EQ(t.decode(Ids{v.im_start, v.sp_hello, 2}, render), "<|im_start|> hello</s>");
    EXPECT_EQ(t.decode(Ids{v.im_start, v.sp_hello, 2}), " hello");
    EXPECT_EQ(t.token_to_piece(v.byte('A')), "A");
    EXPECT_EQ(t.token_to_piece(0), "");  // <unk> renders only on request
    EXPECT_EQ(t.token_to_piece(0, true), "<unk>");
}

TEST(SpmTokenizer, BadIdsAreErrors) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_THROW(t.decode(Ids{v.sp, -1}), Error);
    EXPECT_THROW(t.decode(Ids{t.n_vocab()}), Error);
    EXPECT_THROW(t.token_to_piece(1 << 30), Error);
    EXPECT_FALSE(t.is_eog(-1));
    EXPECT_FALSE(t.is_eog(1 << 30));
}

// --- streaming
// ------------------------------------------------------------------------------------

TEST(StreamDecoder, HoldsBackSplitCharactersUntilComplete) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    StreamDecoder s(t);
    EXPECT_EQ(s.push(v.sp_hello), " hello");
    EXPECT_EQ(s.push(v.byte(0xF0)), "");  // 😀 = F0 9F 98 80, one token per byte
    EXPECT_EQ(s.push(v.byte(0x9F)), "");
    EXPECT_EQ(s.push(v.byte(0x98)), "");
    EXPECT_EQ(s.pending(), 3u);
    EXPECT_EQ(s.push(v.byte(0x80)), "\xF0\x9F\x98\x80");
    EXPECT_EQ(s.push(v.byte(0xC3)), "");
    EXPECT_EQ(s.push(v.byte(0xA9)), "\xC3\xA9");
    EXPECT_EQ(s.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    const std::string fffd = "\xEF\xBF\xBD";
    StreamDecoder s(t);
    EXPECT_EQ(s.push(v.byte(0xFF)), fffd);  // can never start a character: replaced at once
    EXPECT_EQ(s.push(v.byte(0xE2)), "");
    EXPECT_EQ(s.push(v.byte(0x82)), "");
    // The next token breaks the sequence: one U+FFFD for E2 82, then the text.
    EXPECT_EQ(s.push(v.h), fffd + "h");
    EXPECT_EQ(s.push(v.byte(0xF0)), "");
    EXPECT_EQ(s.flush(), fffd);  // cut off at the end of the stream
    EXPECT_EQ(s.pending(), 0u);
}

TEST(StreamDecoder, BadIdThrowsAndLeavesStateAlone) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    StreamDecoder s(t);
    EXPECT_EQ(s.push(v.byte(0xC3)), "");
    EXPECT_THROW(s.push(-5), Error);
    EXPECT_EQ(s.pending(), 1u);
    EXPECT_EQ(s.push(v.byte(0xA9)), "\xC3\xA9");
}

TEST(StreamDecoder, OptionalLeadingSpaceStripAndSpecialTokens) {
    const SmallSpm v;
    const Tokenizer t = v.tokenizer();
    StreamDecoder::Options o;
    o.strip_leading_space = true;
    StreamDecoder s(t, o);
    EXPECT_EQ(s.push(v.sp_hello), "hello");
    EXPECT_EQ(s.push(v.sp_hello), " hello");
    EXPECT_EQ(s.push(v.im_start), "");
    s.reset();
    EXPECT_EQ(s.push(v.sp_hello), "hello");
    StreamDecoder::Options r;
    r.render_special = true;
    StreamDecoder rs(t, r);
    EXPECT_EQ(rs.push(v.im_start), "<|im_start|>");
    // Chosen control tokens only (a chat family's markup): the others still decode to nothing.
    StreamDecoder::Options chosen;
    chosen.render_ids = {v.im_start};
    StreamDecoder cs(t, chosen);
    EXPECT_EQ(cs.push(v.im_start), "<|im_start|>");
    EXPECT_EQ(cs.push(2), "");  // </s>
    EXPECT_EQ(cs.push(0), "");  // <unk>
}

// --- a small byte-level BPE vocabulary
// ------------------------------------------------------------

struct SmallBpe {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
    int32_t he, ll, hell, hello, sp_hello, eot, tool;

    static std::string stand_in(uint8_t b) {
        std::string s;
        ggufd::text::append_utf8(s, ggufd::tokenizer::unicode::byte_to_code_point(b));
        return s;
    }
    int32_t add(std::string text, int32_t type) {
        tokens.push_back(std::move(text));
        types.push_back(type);
        return static_cast<int32_t>(tokens.size() - 1);
    }
    SmallBpe() {
        for (int b = 0; b < 256; ++b) add(stand_in(static_cast<uint8_t>(b)), 1);  // id == byte
        he = add("he", 1);
        ll = add("ll", 1);
        hell = add("hell", 1);
        hello = add("hello", 1);
        sp_hello = add(stand_in(' ') + "hello", 1);
        eot = add("<|endoftext|>", 3);
        tool = add("<tool>", 4);
        merges = {"h e", "l l", "he ll", "hell o", stand_in(' ') + " hello"};
    }
    gguf::Metadata metadata(const std::string& pre = "gpt-2") const {
        gguf::Metadata md;
        md.add("general.architecture", "gpt2");
        md.add("tokenizer.ggml.model", "gpt2");
        md.add("tokenizer.ggml.pre", pre);
        md.add("tokenizer.ggml.tokens", strings(tokens));
        md.add("tokenizer.ggml.token_type", ints(types));
        md.add("tokenizer.ggml.merges", strings(merges));
        md.add("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(eot));
        md.add("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eot));
        return md;
    }
    Tokenizer tokenizer() const { return Tokenizer(Vocab::from_metadata(metadata())); }
};

TEST(BpeTokenizer, MergesByRankWithinPreTokenizedWords) {
    const SmallBpe v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.encode("hello hello"), (Ids{v.hello, v.sp_hello}));  // add_bos defaults off
    // "hellohello" is one word: both he, both ll, both hell, both hello; no merge joins them.
    EXPECT_EQ(t.encode("hellohello"), (Ids{v.hello, v.hello}));
    EXPECT_EQ(t.encode("hellx"), (Ids{v.hell, 'x'}));
    EXPECT_EQ(t.decode(Ids{v.hello, v.sp_hello}), "hello hello");
}

TEST(BpeTokenizer, InvalidUtf8BecomesReplacementCharacterBytes) {
    const SmallBpe v;
    const Tokenizer t = v.tokenizer();
    const Ids ids = t.encode(
        "a\xFF"
        "b");
    EXPECT_EQ(ids, (Ids{'a', 0xEF, 0xBF, 0xBD, 'b'}));
    EXPECT_EQ(t.decode(ids),
              "a\xEF\xBF\xBD"
              "b");
}

TEST(BpeTokenizer, SpecialTokens) {
    const SmallBpe v;
    const Tokenizer t = v.tokenizer();
    EncodeOptions parse;
    parse.parse_special = true;
    EXPECT_EQ(t.encode("hello<|endoftext|>", parse), (Ids{v.hello, v.eot}));
    const Ids plain = t.encode("hello<|endoftext|>");
    EXPECT_EQ(std::count(plain.begin(), plain.end(), v.eot), 0);
    EXPECT_EQ(t.decode(plain), "hello<|endoftext|>");
    EXPECT_EQ(t.encode("<tool>hello"), (Ids{v.tool, v.hello}));
    EncodeOptions both;
    both.add_bos = true;
    both.add_eos = true;
    EXPECT_EQ(t.encode("hello", both), (Ids{v.eot, v.hello, v.eot}));
    EXPECT_TRUE(t.is_eog(v.eot));
}

TEST(BpeTokenizer, UnknownPreTokenizerFallsBackToGpt2WithAWarning) {
    const SmallBpe v;
    const Vocab vocab = Vocab::from_metadata(v.metadata("some-new-model"));
    EXPECT_EQ(vocab.pre_tokenizer(), ggufd::tokenizer::PreTokenizer::Gpt2);
    ASSERT_FALSE(vocab.warnings().empty());
    EXPECT_NE(vocab.warnings()[0].find("some-new-model"), std::string::npos);
    const Tokenizer t(Vocab::from_metadata(v.metadata("some-new-model")));
    EXPECT_EQ(t.encode("hello hello"), (Ids{v.hello, v.sp_hello}));
}

// --- inconsistent metadata
// ------------------------------------------------------------------------

std::string load_error(const gguf::Metadata& md) {
    try {
        Vocab::from_metadata(md);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

gguf::Metadata replace(const gguf::Metadata& md, const std::string& key, gguf::Value value) {
    gguf::Metadata out;
    bool found = false;
    for (const auto& kv : md.entries()) {
        if (kv.key == key) {
            out.add(kv.key, value);
            found = true;
        } else {
            out.add(kv.key, kv.value);
        }
    }
    if (!found) out.add(key, std::move(value));
    return out;
}

TEST(VocabLoading, InconsistentMetadataIsAClearError) {
    const SmallSpm spm;
    const SmallBpe bpe;
    auto scores = spm.spec.scores;
    scores.pop_back();
    EXPECT_NE(load_error(replace(spm.metadata(), "tokenizer.ggml.scores", floats(scores)))
                  .find("tokenizer.ggml.scores has"),
              std::string::npos);
    auto types = spm.spec.types;
    types.push_back(1);
    EXPECT_NE(load_error(replace(spm.metadata(), "tokenizer.ggml.token_type", ints(types)))
                  .find("tokenizer.ggml.token_type has"),
              std::string::npos);
    EXPECT_NE(load_error(replace(spm.metadata(), "tokenizer.ggml.bos_token_id", uint32_t{99999}))
                  .find("bos_token_id"),
              std::string::npos);
    EXPECT_NE(load_error(replace(spm.metadata(), "tokenizer.ggml.eos_token_id", uint32_t{99999}))
                  .find("eos_token_id"),
              std::string::npos);
    EXPECT_NE(load_error(replace(spm.metadata(), "tokenizer.ggml.model", "rwkv")).find("rwkv"),
              std::string::npos);
    EXPECT_NE(
        load_error(replace(spm.metadata(), "tokenizer.ggml.tokens", strings({}))).find("empty"),
        std::string::npos);

    auto merges = bpe.merges;
    merges.push_back("he xyz");
    EXPECT_NE(load_error(replace(bpe.metadata(), "tokenizer.ggml.merges", strings(merges)))
                  .find("'xyz' is not a token"),
              std::string::npos);
    merges = bpe.merges;
    merges.push_back("hello");
    EXPECT_NE(load_error(replace(bpe.metadata(), "tokenizer.ggml.merges", strings(merges)))
                  .find("not two tokens"),
              std::string::npos);

    gguf::Metadata no_tokens;
    no_tokens.add("tokenizer.ggml.model", "llama");
    EXPECT_NE(load_error(no_tokens).find("tokenizer.ggml.tokens"), std::string::npos);
    gguf::Metadata no_model;
    EXPECT_NE(load_error(no_model).find("tokenizer.ggml.model"), std::string::npos);

    // add_bos is the SPM default, but a one-token vocabulary has no id 1 for BOS.
    gguf::Metadata tiny;
    tiny.add("tokenizer.ggml.model", "llama");
    tiny.add("tokenizer.ggml.tokens", strings({"<unk>"}));
    EXPECT_NE(load_error(tiny).find("no BOS"), std::string::npos);
}

TEST(VocabLoading, SentinelIdsMeanNone) {
    const SmallSpm spm;
    const Vocab v = Vocab::from_metadata(spm.metadata());
    EXPECT_EQ(v.special().pad, kNoToken);
    EXPECT_EQ(v.special().bos, 1);
    EXPECT_TRUE(v.add_bos());
    EXPECT_TRUE(v.add_space_prefix());
}

// --- a small WordPiece vocabulary
// ------------------------------------------------------------------

// Spelled the way the converter stores a bert vocabulary: a word's first piece with "▁", a
// continuation piece ("##able" in BERT's own files) bare. The special ids are not bert-base's, so
// they must come from the metadata keys.
struct SmallWpm {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    int32_t pad, unk, cls, sep, mask, hello, world, comma, bang, dot, dollar, five, a, b, a_cont,
        un, aff, able, cafe, naive, zhong, guo;

    int32_t add(std::string text, int32_t type = 1) {
        tokens.push_back(std::move(text));
        types.push_back(type);
        return static_cast<int32_t>(tokens.size() - 1);
    }
    SmallWpm() {
        pad = add("[PAD]", 3);
        unk = add("[UNK]", 3);
        cls = add("[CLS]", 3);
        sep = add("[SEP]", 3);
        mask = add("[MASK]", 3);
        hello = add(kSp + "hello");
        world = add(kSp + "world");
        comma = add(kSp + ",");
        bang = add(kSp + "!");
        dot = add(kSp + ".");
        dollar = add(kSp + "$");
        five = add(kSp + "5");
        a = add(kSp + "a");
        b = add(kSp + "b");
        a_cont = add("a");
        un = add(kSp + "un");
        aff = add("aff");
        able = add("able");
        cafe = add(kSp + "cafe");
        naive = add(kSp + "naive");
        zhong = add(kSp + "\xE4\xB8\xAD");  // 中
        guo = add(kSp + "\xE5\x9B\xBD");    // 国
    }
    gguf::Metadata metadata() const {
        gguf::Metadata md;
        md.add("tokenizer.ggml.model", "bert");
        md.add("tokenizer.ggml.tokens", strings(tokens));
        md.add("tokenizer.ggml.token_type", ints(types));
        md.add("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
        md.add("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(sep));
        md.add("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
        md.add("tokenizer.ggml.cls_token_id", static_cast<uint32_t>(cls));
        md.add("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask));
        return md;
    }
    Tokenizer tokenizer() const { return Tokenizer(Vocab::from_metadata(metadata())); }
};

EncodeOptions no_special() {
    EncodeOptions o;
    o.add_bos = false;
    o.add_eos = false;
    return o;
}

TEST(WpmTokenizer, SpecialIdsAndDefaultsComeFromTheMetadata) {
    const SmallWpm v;
    const Vocab vocab = Vocab::from_metadata(v.metadata());
    EXPECT_EQ(vocab.type(), ggufd::tokenizer::VocabType::Wpm);
    EXPECT_EQ(vocab.special().bos, v.cls);  // cls_token_id is the BOS
    EXPECT_EQ(vocab.special().sep, v.sep);
    EXPECT_EQ(vocab.special().unk, v.unk);
    EXPECT_EQ(vocab.special().eos, kNoToken);
    EXPECT_TRUE(vocab.add_bos());
    EXPECT_FALSE(vocab.add_eos());
    EXPECT_TRUE(vocab.add_sep());
    EXPECT_TRUE(vocab.clean_spaces());

    const Tokenizer t = v.tokenizer();
    // [CLS] text [SEP] by default; turning the end token off takes the separator with it.
    EXPECT_EQ(t.encode("hello"), (Ids{v.cls, v.hello, v.sep}));
    EXPECT_EQ(t.encode(""), (Ids{v.cls, v.sep}));
    EXPECT_EQ(t.encode("hello", no_special()), (Ids{v.hello}));
    EncodeOptions sep_only = no_special();
    sep_only.add_sep = true;
    EXPECT_EQ(t.encode("hello", sep_only), (Ids{v.hello, v.sep}));
    EXPECT_EQ(t.encode("hello", no_bos()), (Ids{v.hello, v.sep}));
    // The file's add_sep_token wins over the WordPiece default.
    const Tokenizer no_sep(Vocab::from_metadata(
        replace(v.metadata(), "tokenizer.ggml.add_sep_token", gguf::Value(false))));
    EXPECT_EQ(no_sep.encode("hello"), (Ids{v.cls, v.hello}));
    // Parsed special-token text is its token.
    EncodeOptions parse = no_special();
    parse.parse_special = true;
    EXPECT_EQ(t.encode("[CLS]hello[SEP]", parse), (Ids{v.cls, v.hello, v.sep}));
}

TEST(WpmTokenizer, AVocabularyWithoutAnUnknownTokenIsAnError) {
    // WordPiece turns what it cannot spell into the unknown token, so it must have one: without
    // unknown_token_id the default id 100 is outside this small vocabulary.
    const SmallWpm wpm;
    gguf::Metadata no_unk;
    no_unk.add("tokenizer.ggml.model", "bert");
    no_unk.add("tokenizer.ggml.tokens", strings(wpm.tokens));
    no_unk.add("tokenizer.ggml.cls_token_id", static_cast<uint32_t>(wpm.cls));
    no_unk.add("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(wpm.sep));
    EXPECT_NE(load_error(no_unk).find("unknown token"), std::string::npos);
}

TEST(WpmTokenizer, LowercasesAndStripsPrecomposedAccents) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.encode("HeLLo WORLD", no_special()), (Ids{v.hello, v.world}));
    EXPECT_EQ(t.encode("Caf\xC3\xA9", no_special()), Ids{v.cafe});                // é
    EXPECT_EQ(t.encode("NA\xC3\x8FVE", no_special()), Ids{v.naive});              // Ï
    EXPECT_EQ(t.encode("\xE1\xBA\xA0 \xC3\xA0", no_special()), (Ids{v.a, v.a}));  // Ạ à
    // A combining mark written on its own is kept (as in the reference), so "cafe" + U+0301 is
    // a word the vocabulary cannot spell.
    EXPECT_EQ(t.encode("cafe\xCC\x81", no_special()), Ids{v.unk});
}

TEST(WpmTokenizer, WhitespaceSplitsAndControlCharactersVanish) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    // Tab, newline, U+3000 ideographic space, U+00A0 no-break space all separate words.
    EXPECT_EQ(t.encode("\thello\n\xE3\x80\x80world\xC2\xA0 ", no_special()),
              (Ids{v.hello, v.world}));
    // Control and format characters (U+0001, U+200D zero width joiner, U+00AD soft hyphen), NUL
    // and invalid UTF-8 are dropped without splitting the word.
    EXPECT_EQ(t.encode(std::string("hel\x01l\xE2\x80\x8Do\xC2\xAD", 11) + std::string(1, '\0') +
                           " wor\xFFld",
                       no_special()),
              (Ids{v.hello, v.world}));
    EXPECT_EQ(t.encode(" \n\t ", no_special()), Ids{});
}

TEST(WpmTokenizer, PunctuationAsciiSymbolsAndIdeographsAreWordsOfTheirOwn) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.encode("Hello, world!", no_special()), (Ids{v.hello, v.comma, v.world, v.bang}));
    EXPECT_EQ(t.encode("a.b", no_special()), (Ids{v.a, v.dot, v.b}));
    EXPECT_EQ(t.encode("$5", no_special()), (Ids{v.dollar, v.five}));  // ASCII symbol: split
    // A symbol beyond ASCII (€, Sc) stays inside its word, which the vocabulary cannot spell.
    EXPECT_EQ(t.encode("5\xE2\x82\xAC", no_special()), Ids{v.unk});
    // Each CJK ideograph is a word, even with no space around it.
    EXPECT_EQ(t.encode("hello\xE4\xB8\xAD\xE5\x9B\xBDworld", no_special()),
              (Ids{v.hello, v.zhong, v.guo, v.world}));
}

TEST(WpmTokenizer, GreedyLongestMatchWithWholeWordUnknown) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    EXPECT_EQ(t.encode("unaffable", no_special()), (Ids{v.un, v.aff, v.able}));
    EXPECT_EQ(t.encode("aaa", no_special()), (Ids{v.a, v.a_cont, v.a_cont}));
    // One position no piece starts at makes the whole word unknown; its neighbours are kept.
    EXPECT_EQ(t.encode("hello unaffablex world", no_special()), (Ids{v.hello, v.unk, v.world}));
    EXPECT_EQ(t.encode("xyz", no_special()), Ids{v.unk});
    // A continuation piece never starts a word: "able" alone has no "▁able".
    EXPECT_EQ(t.encode("able", no_special()), Ids{v.unk});
}

TEST(WpmTokenizer, LongWordsAreSegmentedLikeAnyOther) {
    // BERT's Python tokenizer turns words over 100 characters into [UNK]; the reference (llama.cpp)
    // has no such limit and segments them, and so does this tokenizer.
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    Ids expected{v.a};
    expected.insert(expected.end(), 149, v.a_cont);
    EXPECT_EQ(t.encode(std::string(150, 'a'), no_special()), expected);
    EXPECT_EQ(t.encode(std::string(150, 'a') + "x", no_special()), Ids{v.unk});
}

TEST(WpmTokenizer, DecodeJoinsPiecesAndDropsTheFirstMarker) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    const Ids ids{v.hello, v.comma, v.un, v.aff, v.able, v.world, v.bang};
    EXPECT_EQ(t.decode(ids), "hello , unaffable world !");
    DecodeOptions clean;
    clean.clean_spaces = t.vocab().clean_spaces();
    EXPECT_EQ(t.decode(ids, clean), "hello, unaffable world!");
    DecodeOptions keep;
    keep.strip_leading_space = false;
    EXPECT_EQ(t.decode(Ids{v.hello}, keep), " hello");
    // [CLS] and [SEP] are control tokens: nothing unless rendered.
    DecodeOptions special;
    special.render_special = true;
    EXPECT_EQ(t.decode(t.encode("hello"), special), "[CLS] hello[SEP]");
    // remove_special drops both; a dropped [CLS] takes the leading-space strip with it, as a
    // dropped BOS does in the reference.
    special.remove_special = true;
    EXPECT_EQ(t.decode(t.encode("hello"), special), " hello");
}

TEST(WpmTokenizer, ArbitraryBytesGiveValidIds) {
    const SmallWpm v;
    const Tokenizer t = v.tokenizer();
    std::mt19937 rng(17);
    std::uniform_int_distribution<int> byte(0, 255), len(0, 64);
    for (int i = 0; i < 500; ++i) {
        std::string text;
        for (int n = len(rng); n > 0; --n) text.push_back(static_cast<char>(byte(rng)));
        for (int32_t id : t.encode(text)) ASSERT_TRUE(t.vocab().valid(id));
    }
}

// --- the real vocabularies
// ------------------------------------------------------------------------

const char* const kRealVocabs[] = {"llama-spm",    "gpt-2",  "starcoder",
                                   "deepseek-llm", "falcon", "mpt"};

// Random valid UTF-8. Characters the vocabulary cannot spell (a BPE vocabulary without a token for
// one of their bytes, which the reference then drops) are left out when `vocab` is given.
std::string random_unicode(std::mt19937& rng, const Vocab* vocab = nullptr) {
    const bool spm = vocab && vocab->type() == ggufd::tokenizer::VocabType::Spm;
    auto spellable = [&](uint32_t cp) {
        if (!vocab || spm) return true;
        std::string bytes;
        ggufd::text::append_utf8(bytes, cp);
        for (char c : bytes) {
            if (vocab->byte_token(static_cast<uint8_t>(c)) == kNoToken) return false;
        }
        return true;
    };
    // Mostly common scripts, then anything valid in any plane.
    static const std::vector<uint32_t> common = {
        'a',     'b',    'c',    'x',    'Q',    ' ',    ' ',   ' ',    '\n',
        '\t',    '\r',   '0',    '5',    '.',    ',',    '\'',  '"',    '!',
        '{',     '}',    '<',    '>',    '|',    '~',    0xE9,  0xF1,   0x416,
        0x3B1,   0x4E2D, 0x6587, 0x3042, 0xAC00, 0x627,  0x5D0, 0xE01,  0x1F600,
        0x1F44D, 0x2764, 0xFE0F, 0x200D, 0x301,  0x3000, 0xA0,  0xFF01, 0x20AC};
    std::uniform_int_distribution<int> len(0, 30);
    std::uniform_int_distribution<size_t> pick(0, common.size() - 1);
    std::uniform_int_distribution<uint32_t> any(1, 0x10FFFF);
    std::uniform_int_distribution<int> coin(0, 9);
    std::string s;
    for (int n = len(rng); n > 0; --n) {
        uint32_t cp = coin(rng) < 8 ? common[pick(rng)] : any(rng);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'z';
        if (spm && cp == 0x2581) cp = 'z';  // SentencePiece's own space marker cannot round-trip
        if (!spellable(cp)) continue;
        ggufd::text::append_utf8(s, cp);
    }
    return s;
}

class RealVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(RealVocab, DecodeOfEncodeGivesTheTextBack) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer t = Tokenizer::from_file(dir / "tokenizer" /
                                             ("ggml-vocab-" + std::string(GetParam()) + ".gguf"));
    std::mt19937 rng(99);
    for (int i = 0; i < 400; ++i) {
        const std::string text = random_unicode(rng, &t.vocab());
        const Ids ids = t.encode(text, no_bos());
        ASSERT_EQ(t.decode(ids), text) << "ids:" << ::testing::PrintToString(ids);
    }
}

TEST_P(RealVocab, ArbitraryBytesNeverBreakEncoding) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer t = Tokenizer::from_file(dir / "tokenizer" /
                                             ("ggml-vocab-" + std::string(GetParam()) + ".gguf"));
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> byte(0, 255), len(0, 64);
    for (int i = 0; i < 300; ++i) {
        std::string text;
        for (int n = len(rng); n > 0; --n) text.push_back(static_cast<char>(byte(rng)));
        EncodeOptions o;
        o.parse_special = (i % 2) == 0;
        const Ids ids = t.encode(text, o);
        for (int32_t id : ids) ASSERT_TRUE(t.vocab().valid(id));
        const std::string decoded = t.decode(ids);
        ASSERT_EQ(ggufd::text::sanitize_utf8(decoded),
                  decoded);  // always valid UTF-8
    }
}

TEST_P(RealVocab, ConcurrentEncodingMatchesSerial) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer t = Tokenizer::from_file(dir / "tokenizer" /
                                             ("ggml-vocab-" + std::string(GetParam()) + ".gguf"));
    std::mt19937 rng(11);
    std::vector<std::string> texts;
    for (int i = 0; i < 64; ++i) texts.push_back(random_unicode(rng));
    std::vector<Ids> serial;
    for (const auto& s : texts) serial.push_back(t.encode(s));
    std::vector<std::vector<Ids>> results(4);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < results.size(); ++k) {
        threads.emplace_back([&, k] {
            for (const auto& s : texts) results[k].push_back(t.encode(s));
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& r : results) EXPECT_EQ(r, serial);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, RealVocab, ::testing::ValuesIn(kRealVocabs),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                             std::string name = param_info.param;
                             for (char& c : name) {
                                 if (c == '-') c = '_';
                             }
                             return name;
                         });

TEST(RealSpecialTokens, ChatAndFimMarkersParseOnlyWhenAsked) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer gpt2 = Tokenizer::from_file(dir / "tokenizer" / "ggml-vocab-gpt-2.gguf");
    EncodeOptions parse;
    parse.parse_special = true;
    EXPECT_EQ(gpt2.encode("<|endoftext|>", parse), Ids{50256});
    EXPECT_NE(gpt2.encode("<|endoftext|>"), Ids{50256});
    EXPECT_TRUE(gpt2.is_eog(50256));

    const Tokenizer sc = Tokenizer::from_file(dir / "tokenizer" / "ggml-vocab-starcoder.gguf");
    const int32_t pre = sc.vocab().find("<fim_prefix>");
    const int32_t suf = sc.vocab().find("<fim_suffix>");
    const int32_t mid = sc.vocab().find("<fim_middle>");
    ASSERT_NE(pre, kNoToken);
    const Ids ids = sc.encode("<fim_prefix>def f():<fim_suffix>\n<fim_middle>", parse);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids.front(), pre);
    EXPECT_EQ(ids.back(), mid);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), suf), 1);
    EXPECT_EQ(sc.special().fim_pre, pre);
    EXPECT_EQ(sc.special().fim_mid, mid);
    const Ids raw = sc.encode("<fim_prefix>def f():<fim_suffix>\n<fim_middle>");
    EXPECT_EQ(std::count(raw.begin(), raw.end(), pre), 0);
}

}  // namespace
