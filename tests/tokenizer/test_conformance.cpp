// The oracle: token ids produced by llama.cpp for real vocabularies (../shared/conformance).
// One test per (vocabulary, text) so a failure names the text that broke.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/conformance.h"

namespace {

using ggufd::tokenizer::DecodeOptions;
using ggufd::tokenizer::EncodeOptions;
using ggufd::tokenizer::Tokenizer;
using ggufd::tokenizer::VocabType;

const char* const kVocabs[] = {"llama-spm", "gpt-2", "starcoder", "deepseek-llm",
                               "falcon",    "mpt",   "llama-bpe", "qwen2"};
// The number of texts in each .inp file; the test fails if the data no longer has that many, so a
// parsing mistake cannot quietly shrink the suite.
constexpr size_t kTextsPerVocab = 46;

std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Texts are each followed by "\n__ggml_vocab_test__\n"; the newline before the marker belongs to
// the separator, so a text may be empty or consist of newlines only.
std::vector<std::string> split_texts(const std::string& data) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    size_t pos = 0;
    while (pos < data.size()) {
        size_t next = data.find(sep, pos);
        if (next == std::string::npos) next = data.size();
        texts.push_back(data.substr(pos, next - pos));
        pos = next + sep.size();
    }
    return texts;
}

std::vector<std::vector<int32_t>> read_ids(const std::string& data) {
    std::vector<std::vector<int32_t>> lines;
    std::istringstream in(data);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::vector<int32_t> ids;
        int32_t id;
        while (ls >> id) ids.push_back(id);
        lines.push_back(std::move(ids));
    }
    return lines;
}

std::filesystem::path vocab_path(const std::filesystem::path& dir, const std::string& name) {
    return dir / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
}

// Tokenizers are loaded once per vocabulary and shared by its tests (read-only use).
const Tokenizer& tokenizer_for(const std::filesystem::path& path) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    std::lock_guard lock(mutex);
    auto& slot = cache[path.string()];
    if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::from_file(path));
    return *slot;
}

struct Case {
    std::string vocab;
    size_t index;
};

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    for (const char* v : kVocabs) {
        for (size_t i = 0; i < kTextsPerVocab; ++i) cases.push_back({v, i});
    }
    return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    std::string name = info.param.vocab + "_" + std::to_string(info.param.index);
    for (char& c : name) {
        if (c == '-') c = '_';
    }
    return name;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += " " + std::to_string(id);
    return s;
}

struct VocabData {
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> expected;
};

const VocabData& data_for(const std::filesystem::path& dir, const std::string& vocab) {
    static std::mutex mutex;
    static std::map<std::string, VocabData> cache;
    std::lock_guard lock(mutex);
    auto it = cache.find(vocab);
    if (it == cache.end()) {
        const std::filesystem::path base = vocab_path(dir, vocab);
        VocabData d;
        d.texts = split_texts(read_all(base.string() + ".inp"));
        d.expected = read_ids(read_all(base.string() + ".out"));
        it = cache.emplace(vocab, std::move(d)).first;
    }
    return it->second;
}

class VocabConformance : public ::testing::TestWithParam<Case> {};

// Encoding gives the reference's ids; decoding those ids gives the text back (all these texts are
// valid UTF-8, and SPM's dummy-prefix space is taken off again). One test, not two, because every
// case is its own process and loading a 100k-token vocabulary dominates its cost.
TEST_P(VocabConformance, MatchesTheReference) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Case& c = GetParam();
    const VocabData& data = data_for(dir, c.vocab);
    ASSERT_EQ(data.texts.size(), kTextsPerVocab) << "texts in the .inp file";
    ASSERT_EQ(data.expected.size(), kTextsPerVocab) << "lines in the .out file";
    const Tokenizer& tok = tokenizer_for(vocab_path(dir, c.vocab));
    const std::string& text = data.texts[c.index];
    const std::vector<int32_t>& expected = data.expected[c.index];

    EncodeOptions options;
    options.add_bos = false;
    options.add_eos = false;
    options.parse_special = false;
    const std::vector<int32_t> ids = tok.encode(text, options);
    EXPECT_EQ(ids, expected) << "text: '" << text << "'\n  got:     " << ids_to_string(ids)
                             << "\n  expected:" << ids_to_string(expected);
    EXPECT_EQ(tok.decode(expected), text);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabConformance, ::testing::ValuesIn(all_cases()), case_name);

// A vocabulary added to the conformance folder must not go untested because kVocabs was written
// before it: every ggml-vocab-*.gguf with .inp/.out texts that kVocabs lacks is checked here,
// all its texts in one test (encoding, as above).
TEST(VocabConformanceFolder, EveryOtherVocabularyInTheFolderMatches) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const std::string prefix = "ggml-vocab-", suffix = ".gguf";
    size_t listed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "tokenizer")) {
        const std::string file = entry.path().filename().string();
        if (!file.starts_with(prefix) || !file.ends_with(suffix)) continue;
        if (!std::filesystem::exists(entry.path().string() + ".inp")) continue;
        const std::string name =
            file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
        if (std::find(std::begin(kVocabs), std::end(kVocabs), name) != std::end(kVocabs)) {
            ++listed;  // checked text by text by VocabConformance
            continue;
        }
        const VocabData& data = data_for(dir, name);
        ASSERT_EQ(data.texts.size(), data.expected.size()) << file;
        const Tokenizer& tok = tokenizer_for(entry.path());
        EncodeOptions options;
        options.add_bos = false;
        options.add_eos = false;
        options.parse_special = false;
        for (size_t i = 0; i < data.texts.size(); ++i) {
            const std::vector<int32_t> ids = tok.encode(data.texts[i], options);
            EXPECT_EQ(ids, data.expected[i]) << file << " text " << i << ": '" << data.texts[i]
                                             << "'\n  got:     " << ids_to_string(ids)
                                             << "\n  expected:" << ids_to_string(data.expected[i]);
        }
    }
    EXPECT_EQ(listed, std::size(kVocabs)) << "a vocabulary of kVocabs is missing from the folder";
}

// The WordPiece vocabulary (bert-base-uncased): not in kVocabs, whose test also wants the text back
// from decoding, which lowercasing and accent stripping rule out. Its encoding is checked by the
// folder test above; here decoding gives the normalised text, with the reference's clean-up.
TEST(BertVocab, DecodingGivesTheNormalisedText) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer& tok = tokenizer_for(vocab_path(dir, "bert-bge"));
    ASSERT_EQ(tok.vocab().type(), VocabType::Wpm);
    DecodeOptions clean;
    clean.clean_spaces = tok.vocab().clean_spaces();
    const std::pair<std::string, std::string> cases[] = {
        {" Hello, World!", "hello, world!"},
        {"\xC3\x84pfel", "apfel"},  // Äpfel
        {"C\xE1\xBB\xAD"
         "a Vi\xE1\xBB\x87t",
         "cua viet"},  // Cửa Việt
        {"w048 7tuijk dsdfhu", "w048 7tuijk dsdfhu"},
        {"I've been 'told", "i've been'told"},
    };
    EncodeOptions plain;
    plain.add_bos = false;
    plain.add_eos = false;
    for (const auto& [text, expected] : cases) {
        EXPECT_EQ(tok.decode(tok.encode(text, plain), clean), expected) << text;
    }
    // With [CLS] first, as in the reference, the space of the first word stays.
    EXPECT_EQ(tok.decode(tok.encode("Hello"), clean), " hello");
}

// The encoders' inputs of the embeddings folder, tokenized by llama.cpp with its WordPiece
// defaults: [CLS] text [SEP] for one text, and [CLS] query [SEP] document for a rerank pair.
// The lines of a text file of the embeddings folder and the reference's ids for each; throws
// unless both files have `count` lines, so a misread file cannot shrink the test.
struct EncoderInputs {
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> expected;
};

EncoderInputs encoder_inputs(const std::filesystem::path& emb, const std::string& texts,
                             const std::string& tokens, size_t count) {
    EncoderInputs in;
    std::istringstream lines(read_all(emb / texts));
    std::string line;
    while (std::getline(lines, line)) in.texts.push_back(line);
    in.expected = read_ids(read_all(emb / tokens));
    if (in.texts.size() != count || in.expected.size() != count) {
        throw std::runtime_error(texts + " / " + tokens + ": expected " + std::to_string(count) +
                                 " lines each");
    }
    return in;
}

TEST(BertVocab, EmbeddingInputsGetClsAndSepByDefault) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer tok = Tokenizer::from_file(dir / "embeddings" / "bert-mean.gguf");
    const EncoderInputs in =
        encoder_inputs(dir / "embeddings", "inputs.txt", "bert-mean.tokens.txt", 8);
    for (size_t i = 0; i < in.texts.size(); ++i) {
        EXPECT_EQ(tok.encode(in.texts[i]), in.expected[i]) << in.texts[i];
    }
}

TEST(BertVocab, RerankPairsAreClsQuerySepDocument) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer tok = Tokenizer::from_file(dir / "embeddings" / "bert-rank.gguf");
    const EncoderInputs in =
        encoder_inputs(dir / "embeddings", "rerank.txt", "bert-rank.tokens.txt", 5);
    EncodeOptions plain;
    plain.add_bos = false;
    plain.add_eos = false;
    for (size_t i = 0; i < in.texts.size(); ++i) {
        const std::string& pair = in.texts[i];
        const size_t tab = pair.find('\t');
        ASSERT_NE(tab, std::string::npos) << pair;
        std::vector<int32_t> ids = tok.encode(pair.substr(0, tab));
        const std::vector<int32_t> doc = tok.encode(pair.substr(tab + 1), plain);
        ids.insert(ids.end(), doc.begin(), doc.end());
        EXPECT_EQ(ids, in.expected[i]) << pair;
    }
}

TEST(Stories260K, PromptTokensMatchTheReference) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer tok = Tokenizer::from_file(dir / "models" / "stories260K.gguf");
    std::ifstream in(dir / "reference" / "stories260K.greedy.jsonl");
    ASSERT_TRUE(in) << "stories260K.greedy.jsonl";
    std::string line;
    int prompts = 0;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line);
        const std::string prompt = j.at("prompt");
        const auto expected = j.at("prompt_tokens").get<std::vector<int32_t>>();
        EXPECT_EQ(tok.encode(prompt), expected) << "prompt: " << prompt;  // BOS from metadata
        ++prompts;
    }
    EXPECT_EQ(prompts, 3);
}

// llama.cpp printed each token's piece as it went; the concatenation of prompt and completion
// must come out of decode() (BOS renders as nothing and takes the leading-space strip). The
// captured completion_text lost a final newline (the first case's last token is <0x0A>), so that
// one trailing "\n" is put back before comparing.
std::string as_captured(std::string text) {
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
}

TEST(Stories260K, DecodedCompletionMatchesTheReference) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const Tokenizer tok = Tokenizer::from_file(dir / "models" / "stories260K.gguf");
    std::ifstream in(dir / "reference" / "stories260K.greedy.jsonl");
    ASSERT_TRUE(in);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line);
        auto ids = j.at("prompt_tokens").get<std::vector<int32_t>>();
        const auto generated = j.at("greedy_tokens").get<std::vector<int32_t>>();
        ids.insert(ids.end(), generated.begin(), generated.end());
        const std::string expected = j.at("completion_text");
        EXPECT_EQ(as_captured(tok.decode(ids)), expected);

        ggufd::tokenizer::StreamDecoder stream(tok);
        std::string streamed;
        for (int32_t id : ids) streamed += stream.push(id);
        streamed += stream.flush();
        EXPECT_EQ(as_captured(streamed), expected);
    }
}

}  // namespace
