// One focused test per bug the fuzzers found: the behaviour that was wrong, checked directly.
// The inputs that found them are replayed by test_fuzz_replay (inputs/<target>/).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/random_model.h"
#include "gguf/file.h"
#include "server/api_error.h"
#include "server/requests.h"

namespace {

gguf::Writer tiny_model() {
    ggufd::model::RandomModelSpec spec;
    spec.n_embd = 8;
    spec.n_layer = 1;
    spec.n_head = 2;
    spec.n_head_kv = 1;
    spec.n_ff = 16;
    spec.n_ctx = 16;
    return ggufd::model::make_random_model(spec);
}

template <typename T>
std::vector<uint8_t> tiny_model_with(const std::string& key, T value) {
    gguf::Writer w = tiny_model();
    w.set(key, value);
    return w.to_bytes();
}

std::string load_error(std::vector<uint8_t> bytes) {
    try {
        ggufd::model::Model::from_file(gguf::File::from_bytes(std::move(bytes)));
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "";
}

// fuzz_model, oom-huge-block-count.bin: a 5 KB file with one layer's tensors claiming 16777217
// layers made the loader size its layer table first (1.8 GB, 3 s), and 2^32-1 layers threw
// std::bad_alloc instead of gguf::Error. Now it fails at the first missing tensor, at once.
TEST(ModelLoadRegression, BlockCountBeyondTheTensorsFailsAtTheFirstMissingLayer) {
    EXPECT_EQ(load_error(tiny_model_with("llama.block_count", 1u)), "");  // the file itself is fine
    for (uint32_t n : {2u, 16777217u, 0xFFFFFFFFu}) {
        const std::string error = load_error(tiny_model_with("llama.block_count", n));
        EXPECT_NE(error.find("'blk.1.attn_norm.weight' is missing"), std::string::npos) << error;
    }
}

// fuzz_model, crash-rope-dimension-count-0.bin: rope.dimension_count 0 passed the loader (even,
// not above the head size) and the first evaluation threw std::invalid_argument from the RoPE
// kernel; a loaded model must evaluate, so the loader refuses it.
TEST(ModelLoadRegression, RopeDimensionCountZeroIsRefusedAtLoad) {
    EXPECT_EQ(load_error(tiny_model_with("llama.rope.dimension_count", 2u)), "");
    const std::string error = load_error(tiny_model_with("llama.rope.dimension_count", 0u));
    EXPECT_NE(error.find("rope.dimension_count (0)"), std::string::npos) << error;
}

// fuzz_model, crash-rope-freq-base-beyond-float.bin: rope.freq_base stored as float64 8e77 became
// +inf as a float, passed the "> 0" check and made the first evaluation throw
// std::invalid_argument from the RoPE kernel. Likewise a scaling factor whose inverse overflows.
TEST(ModelLoadRegression, RopeFrequenciesMustBeFinite) {
    EXPECT_EQ(load_error(tiny_model_with("llama.rope.freq_base", 500000.0)), "");
    std::string error = load_error(tiny_model_with("llama.rope.freq_base", 8e77));
    EXPECT_NE(error.find("rope.freq_base must be a positive finite number"), std::string::npos)
        << error;

    gguf::Writer w = tiny_model();
    w.set("llama.rope.scaling.type", "linear");
    w.set("llama.rope.scaling.factor", 4.0f);
    EXPECT_EQ(load_error(w.to_bytes()), "");
    for (float factor : {1e-40f, std::numeric_limits<float>::infinity()}) {
        w.set("llama.rope.scaling.factor", factor);
        error = load_error(w.to_bytes());
        EXPECT_NE(error.find("rope scaling factor must be a positive finite number"),
                  std::string::npos)
            << factor << ": " << error;
    }
}

std::string nested(size_t depth, const std::string& inner = "1") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
}

// Found while writing the JSON targets, reproduced through fuzz_http_request: a 200 KB chat body
// whose content nests 100000 arrays parsed fine (nlohmann parses without recursion), then
// overflowed the stack when the messages were copied (copies recurse per level). Any client could
// crash the daemon with one request under the 4 MB body limit.
TEST(ServerRequestRegression, DeepNestingIsRefusedBeforeParsing) {
    const auto chat = [](const std::string& content) {
        return R"({"messages": [{"role": "user", "content": )" + content + "}]}";
    };
    try {
        (void)ggufd::server::parse_json_body(chat(nested(100000)));
        ADD_FAILURE() << "a body nested 100000 deep was accepted";
    } catch (const ggufd::server::ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_NE(std::string(e.what()).find("deeper than 64"), std::string::npos) << e.what();
    }
    // The limit counts every level: three here (the body, the messages array, the message) ...
    EXPECT_NO_THROW((void)ggufd::server::parse_json_body(chat(nested(61))));
    EXPECT_THROW((void)ggufd::server::parse_json_body(chat(nested(63))), ggufd::server::ApiError);
    // ... and not brackets inside strings, escaped quotes included.
    const std::string text = "\"\\\"" + std::string(1000, '[') + "\"";
    EXPECT_NO_THROW((void)ggufd::server::parse_json_body(chat(text)));
}

}  // namespace
