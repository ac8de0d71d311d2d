#include <gtest/gtest.h>

#include "gguf/inspect.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace {

TEST(Inspect, JsonHasHeaderMetadataTensorsTotals) {
    gguf::Writer w;
    w.set("general.architecture", "t");
    std::vector<int32_t> many(100);
    for (int i = 0; i < 100; ++i) many[i] = i;
    w.set("t.many", gguf::Array{many});
    w.set("t.eps", 1e-5f);
    w.add_tensor("a", {4, 2}, std::vector<float>(8, 1.0f));
    w.set("general.quantization_version", uint32_t{2});
    w.add_tensor("q", gguf::TensorType::Q8_0, {32, 2}, std::vector<uint8_t>(68, 0));
    const gguf::File f = gguf::File::from_bytes(w.to_bytes(), "mem.gguf");
    const auto doc = gguf::describe_json(f, 3);
    EXPECT_EQ(doc["header"]["tensor_count"], 2);
    EXPECT_EQ(doc["metadata"]["t.many"]["count"], 100);
    EXPECT_EQ(doc["metadata"]["t.many"]["first"].size(), 3u);
    EXPECT_EQ(doc["metadata"]["t.eps"]["value"], 1e-5);  // the float as written, not widened noise
    EXPECT_EQ(doc["tensors"][1]["type"], "Q8_0");
    EXPECT_EQ(doc["tensors"][1]["shape"], nlohmann::json::array({32, 2}));
    EXPECT_EQ(doc["totals"]["parameters"], 8 + 64);
    EXPECT_EQ(doc["totals"]["bytes"], 32 + 68);
    EXPECT_NEAR(doc["totals"]["bits_per_weight"].get<double>(), 8.0 * 100 / 72, 1e-9);

    const std::string text = gguf::describe_text(f, 3);
    EXPECT_NE(text.find("array<int32>[100]"), std::string::npos);
    EXPECT_NE(text.find("(100 items)"), std::string::npos);
    EXPECT_NE(text.find("Q8_0"), std::string::npos);
}

TEST(Inspect, RealModelTotals) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/stories260K.gguf");
    const gguf::Totals t = gguf::totals(f);
    EXPECT_EQ(t.bytes, t.parameters * 4);  // all F32
    EXPECT_DOUBLE_EQ(t.bits_per_weight(), 32.0);
}

}  // namespace
