// Cost of grammar-constrained sampling on real vocabularies: Llama-2's 32000 tokens
// (ggml-vocab-llama-spm) and Qwen2's 151936 (ggml-vocab-qwen2), from the conformance folder
// ($GGUFD_CONFORMANCE_DIR, else ../shared/conformance beside the repository).
//
//   build/bin/bench_grammar --benchmark_min_time=0.5
//
// Workloads (the `grammar` argument): 0 any JSON object (json_object_gbnf, what response_format
// json_object uses); 1 a grammar shaped like a JSON-schema converter's output, written by hand (an
// object with fixed keys, a nested object, an array, bounded strings and integers); 2 and 3 the
// converter's own output for two of the test schemas (tests/grammar/schemas/person_extraction.json
// and invoice.json). Each token step does what the sampler does with a grammar: apply the mask to a
// row of logits, then accept the token. The tokens are those of random documents valid for the
// grammar, tokenized by the vocabulary's own tokenizer.
//
//   BM_GrammarVocabularyTrie  the trie of token bytes, built once per model
//   BM_GrammarClassTable      the table of the JSON string characters, built once per model
//   BM_GrammarFirstToken      parse the grammar, start a sequence, mask its first token (cold)
//   BM_GrammarRequest         a whole document from a fresh sequence with a cache of its own (cold
//                             at first, as the first request of a grammar finds it); per_token is
//                             the mean step, setup included
//   BM_GrammarRequestShared   the same with the cache sequences of one grammar share, kept between
//                             requests (a grammar the daemon has seen recently)
//   BM_GrammarWarmStep        steady state: the same sequence restarted, its caches kept
// Counters: per_token (seconds per step), cache_bytes (the grammar's cache after a document),
// sequence_bytes (what one sequence holds of its own), trie_bytes (the shared trie).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/grammar/constraint.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using ggufd::grammar::Constraint;
using ggufd::grammar::Grammar;
using ggufd::grammar::TokenVocabulary;
using ggufd::tokenizer::Tokenizer;

std::filesystem::path conformance_dir() {
    if (const char* env = std::getenv("GGUFD_CONFORMANCE_DIR")) return env;
    return GGUFD_DEFAULT_CONFORMANCE_DIR;
}

const char* const kVocabFiles[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"};

struct Loaded {
    std::unique_ptr<Tokenizer> tokenizer;
    std::shared_ptr<const TokenVocabulary> vocab;
};

const Loaded* load(int which) {
    static std::map<int, Loaded> cache;
    auto it = cache.find(which);
    if (it != cache.end()) return &it->second;
    const auto path = conformance_dir() / "tokenizer" / kVocabFiles[which];
    if (!std::filesystem::exists(path)) return nullptr;
    Loaded l;
    l.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_file(path));
    l.vocab = TokenVocabulary::from_tokenizer(*l.tokenizer);
    return &cache.emplace(which, std::move(l)).first->second;
}

// What a JSON-schema converter emits for a person record (written by hand in its style).
const char* const kSchemaGrammar =
    R"(root ::= "{" space name-kv "," space age-kv "," space email-kv "," space tags-kv "," space address-kv ( "," space active-kv )? "}" space
name-kv ::= "\"name\"" space ":" space string
age-kv ::= "\"age\"" space ":" space integer
email-kv ::= "\"email\"" space ":" space string
tags-kv ::= "\"tags\"" space ":" space "[" space ( string ( "," space string )* )? "]" space
address-kv ::= "\"address\"" space ":" space "{" space "\"street\"" space ":" space string "," space "\"city\"" space ":" space string "," space "\"zip\"" space ":" space "\"" [0-9]{5} "\"" space "}" space
active-kv ::= "\"active\"" space ":" space ( "true" | "false" ) space
string ::= "\"" char{0,64} "\"" space
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
integer ::= "-"? ( [0-9] | [1-9] [0-9]{0,15} ) space
space ::= | " " | "\n" [ \t]{0,20}
)";

class Docs {
  public:
    explicit Docs(uint32_t seed) : rng_(seed) {}
    std::string json() { return object(0); }
    std::string person() {
        std::string s = "{\"name\": " + str() + ", \"age\": " + std::to_string(pick(90)) +
                        ", \"email\": " + str() + ", \"tags\": [";
        for (int n = pick(4), i = 0; i < n; ++i) s += (i ? ", " : "") + str();
        s += "], \"address\": {\"street\": " + str() + ", \"city\": " + str() + ", \"zip\": \"" +
             std::to_string(10000 + pick(89999)) + "\"}";
        if (pick(2)) s += ", \"active\": true";
        return s + "}";
    }
    // tests/grammar/schemas/person_extraction.json
    std::string people() {
        static const char* const kRoles[] = {"\"author\"", "\"editor\"", "\"reviewer\"", "null"};
        std::string s = "{\"people\": [";
        for (int n = 1 + pick(3), i = 0; i < n; ++i) {
            s += i ? ", " : "";
            s += "{\"name\": " + str(40) +
                 ", \"age\": " + (pick(5) ? std::to_string(pick(131)) : "null") + ", \"email\": " +
                 (pick(4) ? "\"jane.doe_" + std::to_string(pick(100)) + "@example.com\"" : "null") +
                 ", \"role\": " + kRoles[pick(4)] + "}";
        }
        return s + "]}";
    }
    // tests/grammar/schemas/invoice.json
    std::string invoice() {
        std::string s = "{\"invoice_id\": \"INV-" + std::to_string(100000 + pick(899999)) +
                        "\", \"issued\": \"2024-0" + std::to_string(1 + pick(9)) + "-1" +
                        std::to_string(pick(10)) + "\", \"currency\": \"EUR\", \"lines\": [";
        for (int n = 1 + pick(3), i = 0; i < n; ++i) {
            s += i ? ", " : "";
            s += "{\"description\": " + str(50) +
                 ", \"quantity\": " + std::to_string(1 + pick(999)) +
                 ", \"unit_price\": " + std::to_string(pick(5000)) + "." +
                 std::to_string(10 + pick(90)) + "}";
        }
        return s + "], \"total\": " + std::to_string(1 + pick(90000)) + ".5}";
    }

  private:
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
    // A string of a few words, at most `max_chars` characters inside the quotes.
    std::string str(size_t max_chars = 64) {
        static const char* const kWords[] = {"Alice",        " Smith", " street", "42",  " Zürich",
                                             "@example.com", " the",   " quick",  "\\n", "中文"};
        std::string s;
        size_t chars = 0;
        for (int n = 1 + pick(5); n > 0; --n) {
            const std::string w = kWords[pick(10)];
            size_t c = 0;
            for (char b : w) c += (static_cast<unsigned char>(b) & 0xC0) != 0x80;
            if (chars + c > max_chars) break;
            s += w;
            chars += c;
        }
        return "\"" + (s.empty() ? std::string("x") : s) + "\"";
    }
    std::string value(int depth) {
        switch (pick(depth < 3 ? 6 : 4)) {
            case 0:
                return str();
            case 1:
                return std::to_string(pick(100000) - 500) + (pick(2) ? ".25" : "");
            case 2:
                return pick(2) ? "true" : "null";
            case 3:
                return str();
            case 4:
                return object(depth + 1);
            default: {
                std::string s = "[";
                for (int n = pick(4), i = 0; i < n; ++i) s += (i ? ", " : "") + value(depth + 1);
                return s + "]";
            }
        }
    }
    std::string object(int depth) {
        std::string s = "{";
        for (int n = 1 + pick(4), i = 0; i < n; ++i) {
            s += (i ? ", " : "") + str() + ": " + value(depth);
        }
        return s + "}";
    }
    std::mt19937 rng_;
};

std::string converted(const char* schema) {
    std::ifstream in(std::filesystem::path(GGUFD_SOURCE_DIR) / "tests/grammar/schemas" / schema);
    return ggufd::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(in));
}

std::string grammar_text(int which) {
    switch (which) {
        case 0:
            return ggufd::grammar::json_object_gbnf();  // what response_format json_object uses
        case 1:
            return kSchemaGrammar;
        case 2:
            return converted("person_extraction.json");
        default:
            return converted("invoice.json");
    }
}

std::string document(Docs& gen, int grammar) {
    switch (grammar) {
        case 0:
            return gen.json();
        case 1:
            return gen.person();
        case 2:
            return gen.people();
        default:
            return gen.invoice();
    }
}

// Token ids of documents for the grammar, as the vocabulary's tokenizer spells them. The first
// token of a SentencePiece encoding carries the space the tokenizer puts before the text; the
// grammar does not allow it, so that token is replaced by its spelling without the space.
std::vector<std::vector<int32_t>> documents(const Loaded& l, int grammar, int count) {
    Docs gen(17);
    ggufd::tokenizer::EncodeOptions o;
    o.add_bos = false;
    o.add_eos = false;
    std::vector<std::vector<int32_t>> out;
    const auto g = std::make_shared<const Grammar>(Grammar::parse(grammar_text(grammar)));
    const ggufd::tokenizer::Vocab& v = l.tokenizer->vocab();
    for (int attempt = 0; static_cast<int>(out.size()) < count && attempt < count * 10; ++attempt) {
        const std::string doc = document(gen, grammar);
        std::vector<int32_t> ids = l.tokenizer->encode(doc, o);
        const std::string first = l.tokenizer->token_to_piece(ids.front());
        if (!first.empty() && first.front() == ' ') {
            const std::string rest = first.substr(1);
            std::vector<int32_t> head;
            if (const int32_t id = v.find(rest); id != ggufd::tokenizer::kNoToken) {
                head.push_back(id);
            } else {
                for (char c : rest) head.push_back(v.byte_token(static_cast<uint8_t>(c)));
            }
            ids.erase(ids.begin());
            ids.insert(ids.begin(), head.begin(), head.end());
        }
        Constraint c(g, l.vocab, Constraint::kDefaultCacheBytes);  // leaves the shared caches cold
        bool ok = true;
        for (int32_t id : ids) ok = ok && c.allows(id) && (c.accept(id), true);
        if (ok && c.complete()) out.push_back(std::move(ids));
    }
    if (out.empty()) throw std::runtime_error("no document fits the grammar");
    return out;
}

std::vector<float> logits_row(int32_t n) {
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> row(static_cast<size_t>(n));
    for (float& v : row) v = d(rng);
    return row;
}

void BM_GrammarVocabularyTrie(benchmark::State& state) {
    const Loaded* l = load(static_cast<int>(state.range(0)));
    if (!l) return state.SkipWithError("conformance vocabulary not found");
    for (auto _ : state) {
        benchmark::DoNotOptimize(TokenVocabulary::from_tokenizer(*l->tokenizer));
    }
    state.counters["trie_bytes"] = static_cast<double>(l->vocab->memory_bytes());
    state.counters["trie_nodes"] = static_cast<double>(l->vocab->nodes().size());
}

void BM_GrammarClassTable(benchmark::State& state) {
    const Loaded* l = load(static_cast<int>(state.range(0)));
    if (!l) return state.SkipWithError("conformance vocabulary not found");
    // What a JSON string takes without an escape: [^"\\\x00-\x1F].
    const std::vector<ggufd::grammar::CharRange> ranges = {
        {0x20, 0x21}, {0x23, 0x5B}, {0x5D, ggufd::grammar::kMaxCodePoint}};
    size_t bytes = 0;
    for (auto _ : state) {
        const auto t = l->vocab->build_class_table(ranges);
        bytes = t->memory_bytes();
        benchmark::DoNotOptimize(t.get());
    }
    state.counters["table_bytes"] = static_cast<double>(bytes);
}

// The first mask of a fresh sequence with a cache of its own (the vocabulary's tables warm).
void BM_GrammarFirstToken(benchmark::State& state) {
    const Loaded* l = load(static_cast<int>(state.range(0)));
    if (!l) return state.SkipWithError("conformance vocabulary not found");
    const std::string text = grammar_text(static_cast<int>(state.range(1)));
    const std::vector<float> logits = logits_row(l->vocab->size());
    std::vector<float> out(logits.size());
    for (auto _ : state) {
        auto g = std::make_shared<const Grammar>(Grammar::parse(text));
        Constraint c(std::move(g), l->vocab, Constraint::kDefaultCacheBytes);
        c.apply(logits, out);
        benchmark::DoNotOptimize(out.data());
    }
}

void run_document(Constraint& c, const std::vector<int32_t>& doc, const std::vector<float>& logits,
                  std::vector<float>& out) {
    for (int32_t id : doc) {
        c.apply(logits, out);
        c.accept(id);
    }
    c.apply(logits, out);  // the step that allows end-of-generation
}

// What a step benchmark runs over: one vocabulary, one grammar, its documents, a logits row.
struct Workload {
    const Loaded* loaded = nullptr;
    std::vector<std::vector<int32_t>> docs;
    std::shared_ptr<const Grammar> grammar;
    std::vector<float> logits, out;
};

bool prepare(benchmark::State& state, Workload& w) {
    w.loaded = load(static_cast<int>(state.range(0)));
    if (!w.loaded) {
        state.SkipWithError("conformance vocabulary not found");
        return false;
    }
    const int grammar = static_cast<int>(state.range(1));
    w.docs = documents(*w.loaded, grammar, 16);
    w.grammar = std::make_shared<const Grammar>(Grammar::parse(grammar_text(grammar)));
    w.logits = logits_row(w.loaded->vocab->size());
    w.out.resize(w.logits.size());
    return true;
}

// Whole documents, each from a fresh sequence: with a cache of its own when `own_cache`, else
// with the grammar's shared cache (the same grammar parsed again for each request, as the server
// does).
void request(benchmark::State& state, bool own_cache) {
    Workload w;
    if (!prepare(state, w)) return;
    const auto& vocab = w.loaded->vocab;
    const std::string text = grammar_text(static_cast<int>(state.range(1)));
    size_t i = 0, tokens = 0;
    Constraint::Stats st;
    for (auto _ : state) {
        const auto& doc = w.docs[i++ % w.docs.size()];
        auto c = own_cache
                     ? Constraint(w.grammar, vocab, Constraint::kDefaultCacheBytes)
                     : Constraint(std::make_shared<const Grammar>(Grammar::parse(text)), vocab);
        run_document(c, doc, w.logits, w.out);
        tokens += doc.size() + 1;
        if (i == 1) st = c.stats();  // after the first document, from cold
    }
    state.counters["per_token"] = benchmark::Counter(
        static_cast<double>(tokens), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["cache_bytes"] = static_cast<double>(st.cache_bytes);
    state.counters["sequence_bytes"] = static_cast<double>(st.sequence_bytes);
    state.counters["positions"] = static_cast<double>(st.positions);
    state.counters["transitions"] = static_cast<double>(st.transitions);
    state.counters["masks"] = static_cast<double>(st.masks);
    state.counters["tokens"] = static_cast<double>(w.docs[0].size());
}

void BM_GrammarRequest(benchmark::State& state) {
    request(state, true);
}
void BM_GrammarRequestShared(benchmark::State& state) {
    request(state, false);
}

void BM_GrammarWarmStep(benchmark::State& state) {
    Workload w;
    if (!prepare(state, w)) return;
    const auto& docs = w.docs;
    const auto& logits = w.logits;
    auto& out = w.out;
    Constraint c(w.grammar, w.loaded->vocab, Constraint::kDefaultCacheBytes);
    for (const auto& doc : docs) {  // warm the caches on every document once
        c.reset();
        run_document(c, doc, logits, out);
    }
    size_t i = 0, tokens = 0;
    for (auto _ : state) {
        const auto& doc = docs[i++ % docs.size()];
        c.reset();
        run_document(c, doc, logits, out);
        tokens += doc.size() + 1;
    }
    state.counters["per_token"] = benchmark::Counter(
        static_cast<double>(tokens), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["cache_bytes"] = static_cast<double>(c.stats().cache_bytes);
}

// Args: vocabulary (0: llama-spm 32000, 1: qwen2 151936), grammar (0: JSON, 1: schema-shaped,
// 2: person_extraction.json converted, 3: invoice.json converted).
void vocab_and_grammar(benchmark::internal::Benchmark* b) {
    for (int v : {0, 1}) {
        for (int g : {0, 1, 2, 3}) b->Args({v, g});
    }
    b->ArgNames({"vocab", "grammar"})->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_GrammarVocabularyTrie)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrammarClassTable)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrammarFirstToken)->Apply(vocab_and_grammar);
BENCHMARK(BM_GrammarRequest)->Apply(vocab_and_grammar);
BENCHMARK(BM_GrammarRequestShared)->Apply(vocab_and_grammar);
BENCHMARK(BM_GrammarWarmStep)->Apply(vocab_and_grammar);

}  // namespace

BENCHMARK_MAIN();
