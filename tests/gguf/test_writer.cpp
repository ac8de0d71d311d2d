// The writer: every value type and tensors with alignment; what it writes reads back identically.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tests/support/conformance.h"

namespace {

gguf::Writer every_type_writer(uint32_t version) {
    gguf::Writer w(version);
    w.set("general.architecture", "test");
    w.set("v.u8", uint8_t{250});
    w.set("v.i8", int8_t{-100});
    w.set("v.u16", uint16_t{60000});
    w.set("v.i16", int16_t{-30000});
    w.set("v.u32", uint32_t{4000000000u});
    w.set("v.i32", int32_t{-2000000000});
    w.set("v.f32", 3.25f);
    w.set("v.bool", false);
    w.set("v.string", std::string("h\xc3\xa9llo\nworld"));
    w.set("v.u64", uint64_t{1} << 63);
    w.set("v.i64", int64_t{-(int64_t{1} << 62)});
    w.set("v.f64", -1e300);
    w.set("v.empty", gguf::Array{std::vector<int32_t>{}});
    w.set("v.floats", gguf::Array{std::vector<float>{0.5f, -1.5f}});
    w.set("v.bools", gguf::Array{std::vector<bool>{true, false, true}});
    w.set("v.strings", gguf::Array{std::vector<std::string>{"", "a", "bcd"}});
    w.set(
        "v.nested",
        gguf::Array{std::vector<gguf::Array>{
            gguf::Array{std::vector<uint8_t>{1, 2}},
            gguf::Array{std::vector<gguf::Array>{gguf::Array{std::vector<std::string>{"deep"}}}}}});
    std::vector<float> f(3 * 5);
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * 0.25f;
    w.add_tensor("t.f32", {5, 3}, f);
    std::vector<uint8_t> q4(2 * 18, 0x5a);
    w.set("general.quantization_version", uint32_t{2});
    w.add_tensor("t.q4", gguf::TensorType::Q4_0, {64}, q4);
    std::vector<uint8_t> one(2, 0x3c);
    w.add_tensor("t.f16", gguf::TensorType::F16, {1}, one);  // forces padding before the next
    w.add_tensor("t.last", {2}, std::vector<float>{7, 8});
    return w;
}

void expect_same(const gguf::Writer& w, const gguf::File& f) {
    ASSERT_EQ(f.metadata().size(), w.metadata().size());
    for (size_t i = 0; i < w.metadata().size(); ++i) {
        const gguf::KeyValue& want = w.metadata()[i];
        const gguf::KeyValue& got = f.metadata().entries()[i];
        EXPECT_EQ(got.key, want.key);
        EXPECT_TRUE(got.value == want.value) << want.key << ": " << got.value.to_string();
    }
}

TEST(Writer, RoundTripsEveryValueTypeInEveryVersion) {
    for (uint32_t version : {1u, 2u, 3u}) {
        SCOPED_TRACE(version);
        const gguf::Writer w = every_type_writer(version);
        const gguf::File f = gguf::File::from_bytes(w.to_bytes());
        EXPECT_EQ(f.version(), version);
        expect_same(w, f);
        EXPECT_EQ(f.get<std::string>("v.string"), "h\xc3\xa9llo\nworld");
        EXPECT_EQ(f.get<uint64_t>("v.u64"), uint64_t{1} << 63);
        EXPECT_EQ(f.get_array<bool>("v.bools"), (std::vector<bool>{true, false, true}));
        ASSERT_EQ(f.tensors().size(), 4u);
        const gguf::TensorInfo& t = f.tensor("t.f32");
        EXPECT_EQ(t.ne[0], 5);
        EXPECT_EQ(t.ne[1], 3);
        float v;
        std::memcpy(&v, t.data + 4 * 7, 4);
        EXPECT_EQ(v, 1.75f);
        for (const gguf::TensorInfo& ti : f.tensors())
            EXPECT_EQ(ti.file_offset % 32, 0u) << ti.name;
        EXPECT_EQ(f.tensor("t.q4").bytes()[17], 0x5a);
        std::memcpy(&v, f.tensor("t.last").data + 4, 4);
        EXPECT_EQ(v, 8.0f);
    }
}

TEST(Writer, CustomAlignment) {
    gguf::Writer w;
    w.set("general.architecture", "t");
    w.set("general.alignment", uint32_t{256});
    w.add_tensor("a", {3}, std::vector<float>{1, 2, 3});
    w.add_tensor("b", {3}, std::vector<float>{4, 5, 6});
    const gguf::File f = gguf::File::from_bytes(w.to_bytes());
    EXPECT_EQ(f.alignment(), 256u);
    EXPECT_EQ(f.tensor("b").offset, 256u);
    EXPECT_THROW(w.set("general.alignment", uint32_t{12}), gguf::Error);
}

TEST(Writer, RefusesWhatReadersWould) {
    gguf::Writer w;
    EXPECT_THROW(w.set("Bad Key", 1), gguf::Error);
    EXPECT_THROW(w.add_tensor(std::string(65, 'x'), {1}, std::vector<float>{1}), gguf::Error);
    EXPECT_THROW(w.add_tensor("x", {2}, std::vector<float>{1}), gguf::Error);  // wrong byte count
    EXPECT_THROW(w.add_tensor("x", {0}, std::vector<float>{}), gguf::Error);
    EXPECT_THROW(w.add_tensor("x", gguf::TensorType::Q4_0, {16}, std::vector<uint8_t>(9)),
                 gguf::Error);
    w.add_tensor("x", {1}, std::vector<float>{1});
    EXPECT_THROW(w.add_tensor("x", {1}, std::vector<float>{1}), gguf::Error);
}

TEST(Writer, SetReplacesInPlaceAndEraseRemoves) {
    gguf::Writer w;
    w.set("general.architecture", "a").set("x.y", 1).set("general.architecture", "b");
    ASSERT_EQ(w.metadata().size(), 2u);
    EXPECT_EQ(w.metadata()[0].value.as_string(), "b");
    w.erase("x.y");
    EXPECT_EQ(w.metadata().size(), 1u);
}

TEST(Writer, WritesToDiskAtomically) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("ggufd-writer-" + std::to_string(getpid()) + ".gguf");
    const gguf::Writer w = every_type_writer(3);
    w.write(path);
    {
        const gguf::File f = gguf::File::open(path);
        expect_same(w, f);
        EXPECT_EQ(f.file_size(), w.to_bytes().size());
    }
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
    std::filesystem::remove(path);
}

TEST(Writer, RewritingARealModelKeepsEverything) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    for (const char* name : {"models/stories260K.gguf", "models/tiny-llama-q4_k_m.gguf",
                             "tokenizer/ggml-vocab-gpt-2.gguf"}) {
        SCOPED_TRACE(name);
        const gguf::File original = gguf::File::open(dir / name);
        const gguf::Writer w = gguf::Writer::copy_of(original);
        const std::vector<uint8_t> bytes = w.to_bytes();
        const gguf::File copy = gguf::File::from_bytes(bytes);
        ASSERT_EQ(copy.metadata().size(), original.metadata().size());
        for (size_t i = 0; i < original.metadata().size(); ++i) {
            EXPECT_EQ(copy.metadata().entries()[i].key, original.metadata().entries()[i].key);
            EXPECT_TRUE(copy.metadata().entries()[i].value ==
                        original.metadata().entries()[i].value);
        }
        ASSERT_EQ(copy.tensors().size(), original.tensors().size());
        for (size_t i = 0; i < original.tensors().size(); ++i) {
            const gguf::TensorInfo& a = original.tensors()[i];
            const gguf::TensorInfo& b = copy.tensors()[i];
            EXPECT_EQ(a.name, b.name);
            EXPECT_EQ(a.type, b.type);
            EXPECT_EQ(a.ne, b.ne);
            EXPECT_EQ(a.offset, b.offset);  // same alignment rule, same placement
            EXPECT_EQ(0, std::memcmp(a.data, b.data, a.n_bytes));
        }
        // llama.cpp encodes headers the same way: the bytes before the data section match.
        std::ifstream in(dir / name, std::ios::binary);
        std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
        const size_t header = std::min<uint64_t>(original.data_offset(), raw.size());
        ASSERT_GE(bytes.size(), header);
        EXPECT_EQ(0, std::memcmp(raw.data(), bytes.data(), header));
    }
}

}  // namespace
