// Reading real files from the conformance set, and typed access to metadata and tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace {

TEST(Reader, Stories260KHasExpectedShape) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/stories260K.gguf");
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.tensors().size(), 48u);
    EXPECT_EQ(f.metadata().size(), 19u);
    EXPECT_EQ(f.architecture(), "llama");
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.get<uint32_t>("llama.embedding_length"), 64u);
    EXPECT_EQ(f.get<uint64_t>("llama.block_count"), 5u);  // stored as uint32, read wider
    EXPECT_EQ(f.get<int>("llama.attention.head_count_kv"), 4);
    EXPECT_FLOAT_EQ(f.get<float>("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
    const auto tokens = f.get_array<std::string>("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 512u);
    EXPECT_EQ(tokens[1], "<s>");

    const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
    EXPECT_EQ(emb.type, gguf::TensorType::F32);
    EXPECT_EQ(emb.n_dims, 2u);
    EXPECT_EQ(emb.ne[0], 64);
    EXPECT_EQ(emb.ne[1], 512);
    EXPECT_EQ(emb.n_bytes, 64u * 512u * 4u);
    ASSERT_NE(emb.data, nullptr);
    for (size_t i = 0; i < 64 * 512; ++i) {
        float v;
        std::memcpy(&v, emb.data + 4 * i, 4);
        ASSERT_TRUE(std::isfinite(v) && std::fabs(v) < 100.0f) << "element " << i;
    }
    EXPECT_EQ(emb.file_offset % 32, 0u);
    EXPECT_EQ(emb.row_bytes(), 256u);
    EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
    EXPECT_THROW(f.tensor("no.such.tensor"), gguf::Error);
}

TEST(Reader, EveryConformanceFileLoads) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    int files = 0;
    for (const char* sub : {"models", "tokenizer"}) {
        for (const auto& entry : std::filesystem::directory_iterator(dir / sub)) {
            if (entry.path().extension() != ".gguf") continue;
            SCOPED_TRACE(entry.path().string());
            EXPECT_NO_THROW({
                const gguf::File f = gguf::File::open(entry.path());
                EXPECT_FALSE(f.architecture().empty());
                for (const gguf::TensorInfo& t : f.tensors()) {
                    EXPECT_LE(t.file_offset + t.n_bytes, f.file_size());
                }
            });
            ++files;
        }
    }
    EXPECT_GE(files, 20);
}

TEST(Reader, QuantizedFileTensorsHaveTypeSizes) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File f = gguf::File::open(dir / "models/tiny-llama-q4_k_m.gguf");
    const gguf::TensorInfo& q = f.tensor("blk.1.attn_q.weight");
    EXPECT_EQ(q.type, gguf::TensorType::Q4_K);
    EXPECT_EQ(q.n_bytes, 256u / 256u * 144u * 256u);
    EXPECT_TRUE(f.metadata().contains("general.quantization_version"));
}

TEST(Reader, SharedMappingAcrossOpens) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    // Two opens of one file see the same bytes; data pointers stay valid after a move.
    gguf::File a = gguf::File::open(dir / "models/stories260K.gguf");
    const gguf::TensorInfo* t = &a.tensor("output.weight");
    const uint8_t first = t->data[0];
    gguf::File b = std::move(a);
    EXPECT_EQ(b.tensor("output.weight").data[0], first);
}

TEST(Reader, OpenErrorsNameTheFile) {
    try {
        gguf::File::open("/nonexistent/model.gguf");
        FAIL() << "expected an error";
    } catch (const gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
    EXPECT_THROW(gguf::File::open("/tmp"), gguf::Error);  // a directory
}

TEST(TypedAccess, IntegerWidthsAndRanges) {
    gguf::Writer w;
    w.set("general.architecture", "test");
    w.set("t.u8", uint8_t{200});
    w.set("t.i8", int8_t{-5});
    w.set("t.u64", uint64_t{1} << 40);
    w.set("t.u64small", uint64_t{7});
    w.set("t.i32neg", int32_t{-1});
    w.set("t.f64", 2.5);
    w.set("t.flag", true);
    w.set("t.name", "hello");
    const gguf::File f = gguf::File::from_bytes(w.to_bytes());

    EXPECT_EQ(f.get<uint32_t>("t.u8"), 200u);
    EXPECT_EQ(f.get<int64_t>("t.i8"), -5);
    EXPECT_EQ(f.get<uint32_t>("t.u64small"), 7u);  // counts may be stored as uint64
    EXPECT_EQ(f.get<uint64_t>("t.u64"), uint64_t{1} << 40);
    EXPECT_THROW(f.get<uint32_t>("t.u64"), gguf::Error);     // does not fit
    EXPECT_THROW(f.get<uint32_t>("t.i32neg"), gguf::Error);  // negative into unsigned
    EXPECT_THROW(f.get<int8_t>("t.u8"), gguf::Error);
    EXPECT_DOUBLE_EQ(f.get<double>("t.f64"), 2.5);
    EXPECT_FLOAT_EQ(f.get<float>("t.f64"), 2.5f);
    EXPECT_TRUE(f.get<bool>("t.flag"));
    EXPECT_EQ(f.get<std::string>("t.name"), "hello");
    EXPECT_THROW(f.get<std::string>("t.u8"), gguf::Error);
    EXPECT_THROW(f.get<bool>("t.u8"), gguf::Error);
    EXPECT_THROW(f.get<uint32_t>("t.name"), gguf::Error);
    EXPECT_EQ(f.get_optional<uint32_t>("t.missing"), std::nullopt);
    EXPECT_EQ(f.get_or<uint32_t>("t.missing", 42), 42u);
    EXPECT_THROW(f.get_optional<uint32_t>("t.name"), gguf::Error);  // present but wrong type

    try {
        f.get<uint32_t>("t.missing");
        FAIL();
    } catch (const gguf::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'t.missing' is missing"), std::string::npos);
    }
    try {
        f.get<uint32_t>("t.name");
        FAIL();
    } catch (const gguf::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("t.name"), std::string::npos);
        EXPECT_NE(msg.find("string"), std::string::npos);
    }
}

}  // namespace
