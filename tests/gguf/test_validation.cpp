// Every structural check of the reader, each with a crafted file: a bad file is refused with a
// message saying what and where, and no byte sequence makes the reader crash.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "tests/gguf/bytes.h"

namespace {

using ggufd::testing::Bytes;

// Opens bytes and returns the error message ("" if it loaded).
std::string error_of(const std::vector<uint8_t>& bytes) {
    try {
        gguf::File::from_bytes(bytes);
    } catch (const gguf::Error& e) {
        return e.what();
    }
    return "";
}

// The byte offset a refusal points at (nullopt when accepted or when it names no offset).
std::optional<uint64_t> error_offset(const std::vector<uint8_t>& bytes) {
    try {
        gguf::File::from_bytes(bytes);
    } catch (const gguf::Error& e) {
        return e.offset();
    }
    return std::nullopt;
}

// The u64 stored at `at` in bytes: what a data-section error's offset should lead to (the
// tensor's offset field).
uint64_t u64_at(const std::vector<uint8_t>& bytes, uint64_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    return v;
}

#define EXPECT_REFUSED(bytes, fragment)                                           \
    do {                                                                          \
        const std::string msg_ = error_of(bytes);                                 \
        EXPECT_NE(msg_, "") << "file was accepted";                               \
        EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_; \
    } while (0)

// A valid file with one F32 tensor of 8 elements, built by hand so that tests can break it.
Bytes valid_one_tensor(uint64_t offset = 0, uint32_t type = 0, std::vector<uint64_t> dims = {8}) {
    Bytes b;
    b.header(3, 1, 1).kv_string("general.architecture", "test");
    b.tensor("w", dims, type, offset).pad_to(32).zeros(64);
    return b;
}

TEST(Validation, AcceptsMinimalFiles) {
    EXPECT_EQ(error_of(valid_one_tensor().data), "");
    Bytes b;
    b.header(3, 0, 1).kv_string("general.architecture", "test");
    EXPECT_EQ(error_of(b.data), "");
}

TEST(Validation, WrongMagic) {
    Bytes b;
    b.raw("GGML").u32(3).u64(0).u64(0);
    EXPECT_REFUSED(b.data, "not a GGUF file");
    EXPECT_REFUSED(b.data, "at byte 0");
}

TEST(Validation, TooSmallForHeader) {
    const std::vector<uint8_t> three = {'G', 'G', 'U'};
    EXPECT_REFUSED(three, "too small");
    EXPECT_REFUSED(std::vector<uint8_t>{}, "too small");
}

TEST(Validation, UnsupportedVersion) {
    for (uint32_t v : {0u, 4u, 1000u}) {
        Bytes b;
        b.header(v, 0, 0);
        EXPECT_REFUSED(b.data, "unsupported GGUF version " + std::to_string(v));
    }
}

TEST(Validation, BigEndianIsDetectedNotMisread) {
    // A big-endian v3 header: the version reads as 0x03000000 little-endian.
    Bytes b;
    b.raw("GGUF").put(uint32_t{0x03000000}).put(uint64_t{0}).put(uint64_t{0});
    EXPECT_REFUSED(b.data, "big-endian");
    // Writers that byte-swap the magic too produce "FUGG".
    Bytes c;
    c.raw("FUGG").put(uint32_t{0x03000000}).put(uint64_t{0}).put(uint64_t{0});
    EXPECT_REFUSED(c.data, "big-endian");
}

TEST(Validation, TruncatedCounts) {
    Bytes b;
    b.raw("GGUF").u32(3).u32(0);
    EXPECT_REFUSED(b.data, "tensor count");
}

TEST(Validation, CountsThatCannotFit) {
    Bytes kv;
    kv.header(3, 0, 1'000'000);
    EXPECT_REFUSED(kv.data, "metadata count 1000000 cannot fit");
    Bytes t;
    t.header(3, UINT64_MAX, 0);
    EXPECT_REFUSED(t.data, "tensor count");
}

TEST(Validation, StringPastEnd) {
    Bytes b;
    b.header(3, 0, 1).str("general.architecture").u32(8).u64(1000).raw("abc");
    EXPECT_REFUSED(b.data, "string length 1000 runs past the end");
    EXPECT_REFUSED(b.data, "at byte");
}

TEST(Validation, KeyLengthPastEnd) {
    Bytes b;
    b.header(3, 0, 1).u64(UINT64_MAX).raw("some bytes after the length");
    EXPECT_REFUSED(b.data, "runs past the end");
}

TEST(Validation, ArraysPastEndOrOverflowing) {
    Bytes b;
    b.header(3, 0, 1).str("a.b").u32(9).u32(4).u64(1000).u32(1);  // 1000 uint32, 1 present
    EXPECT_REFUSED(b.data, "array of 1000 uint32 elements cannot fit");
    Bytes huge;
    // 2^62 uint64 elements: count * 8 overflows 64 bits; must be caught without multiplying.
    huge.header(3, 0, 1).str("a.b").u32(9).u32(10).u64(uint64_t{1} << 62).u64(0);
    EXPECT_REFUSED(huge.data, "cannot fit");
    Bytes strings;
    strings.header(3, 0, 1).str("a.b").u32(9).u32(8).u64(UINT64_MAX);
    EXPECT_REFUSED(strings.data, "cannot fit");
}

TEST(Validation, InvalidBool) {
    Bytes b;
    b.header(3, 0, 2).kv_string("general.architecture", "t").str("a.flag").u32(7).u8(2);
    EXPECT_REFUSED(b.data, "invalid bool value 2");
    Bytes arr;
    arr.header(3, 0, 2).kv_string("general.architecture", "t").str("a.flags").u32(9).u32(7).u64(3);
    arr.u8(1).u8(0).u8(7);
    EXPECT_REFUSED(arr.data, "invalid bool value 7");
}

TEST(Validation, UnknownValueType) {
    Bytes b;
    b.header(3, 0, 1).str("a.b").u32(13).u32(0);
    EXPECT_REFUSED(b.data, "unknown value type 13");
}

TEST(Validation, KeysArePrintableAsciiSegments) {
    for (std::string bad :
         {"", "a..b", ".a", "a.", "a b", "caf\xc3\xa9", "a\x01b", "a\nb", "a\x7f", "a\tb"}) {
        Bytes b;
        b.header(3, 0, 1).kv_string(bad, "x");
        SCOPED_TRACE("key: " + bad);
        EXPECT_REFUSED(b.data, "invalid key");
    }
    Bytes b;
    b.header(3, 0, 1).kv_string(std::string(65536, 'a'), "x");
    EXPECT_REFUSED(b.data, "exceeds the maximum of 65535");
    EXPECT_TRUE(gguf::is_valid_key("llama.rope.scaling.original_context_length"));
    EXPECT_TRUE(gguf::is_valid_key("general.base_model.0.name"));
    // What real files hold beyond the spec's lower_snake_case.
    for (std::string good : {"gpt-oss.context_length", "nomic-bert.pooling_type",
                             "command-r.logit_scale", "General.Name"}) {
        SCOPED_TRACE("key: " + good);
        EXPECT_TRUE(gguf::is_valid_key(good));
        Bytes with_key;
        with_key.header(3, 0, 2).kv_string("general.architecture", "x").kv_string(good, "y");
        const gguf::File f = gguf::File::from_bytes(with_key.data);
        EXPECT_EQ(f.get<std::string>(good), "y");
    }
}

TEST(Validation, DuplicateKey) {
    Bytes b;
    b.header(3, 0, 2).kv_string("general.architecture", "a").kv_string("general.architecture", "b");
    EXPECT_REFUSED(b.data, "duplicate metadata key 'general.architecture'");
}

TEST(Validation, DuplicateTensorName) {
    Bytes b;
    b.header(3, 2, 1).kv_string("general.architecture", "t");
    b.tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_to(32).zeros(64);
    EXPECT_REFUSED(b.data, "duplicate tensor name 'w'");
}

TEST(Validation, DimensionLimits) {
    EXPECT_REFUSED(valid_one_tensor(0, 0, {1, 1, 1, 1, 8}).data, "5 dimensions");
    EXPECT_REFUSED(valid_one_tensor(0, 0, {}).data, "0 dimensions");
    EXPECT_REFUSED(valid_one_tensor(0, 0, {8, 0}).data, "dimension 1 is zero");
    EXPECT_REFUSED(valid_one_tensor(0, 0, {uint64_t{1} << 40, uint64_t{1} << 40}).data,
                   "overflows");
    EXPECT_REFUSED(valid_one_tensor(0, 0, {UINT64_MAX}).data, "overflows");
}

TEST(Validation, TensorNameTooLong) {
    Bytes b;
    b.header(3, 1, 1).kv_string("general.architecture", "t");
    b.tensor(std::string(65, 'n'), {8}, 0, 0).pad_to(32).zeros(64);
    EXPECT_REFUSED(b.data, "exceeds the maximum of 64");
}

TEST(Validation, UnknownTensorTypeIsNamed) {
    EXPECT_REFUSED(valid_one_tensor(0, 4).data, "unknown tensor type id 4");
    EXPECT_REFUSED(valid_one_tensor(0, 99).data, "unknown tensor type id 99");
}

TEST(Validation, RowNotMultipleOfBlock) {
    Bytes b;
    b.header(3, 1, 2)
        .kv_string("general.architecture", "t")
        .kv_u32("general.quantization_version", 2);
    b.tensor("w", {16}, 2 /* Q4_0, blocks of 32 */, 0).pad_to(32).zeros(64);
    EXPECT_REFUSED(b.data, "not a multiple of the Q4_0 block size 32");
}

TEST(Validation, UnalignedOffset) {
    EXPECT_REFUSED(valid_one_tensor(8).data, "not a multiple of the alignment 32");
}

TEST(Validation, DataOutsideFile) {
    for (uint64_t offset : {uint64_t{64}, UINT64_MAX - 31}) {
        const std::vector<uint8_t> bytes = valid_one_tensor(offset).data;
        EXPECT_REFUSED(bytes, "outside the data section");
        // The error points at the tensor's offset field.
        const std::optional<uint64_t> at = error_offset(bytes);
        ASSERT_TRUE(at.has_value());
        ASSERT_LE(*at + 8, bytes.size());
        EXPECT_EQ(u64_at(bytes, *at), offset);
    }
    // The data section itself must start inside the file.
    Bytes b;
    b.header(3, 1, 1).kv_string("general.architecture", "t").tensor("w", {8}, 0, 0);
    EXPECT_REFUSED(b.data, "past the end of the file");
}

TEST(Validation, OverlappingTensors) {
    Bytes b;
    b.header(3, 2, 1).kv_string("general.architecture", "t");
    b.tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_to(32).zeros(128);
    EXPECT_REFUSED(b.data, "overlaps tensor 'a'");
    // At the offset field of the later tensor, 'b' (its name, dimension count, one dimension and
    // type come before: 1 + 4 + 8 + 4 bytes).
    const std::optional<uint64_t> at = error_offset(b.data);
    ASSERT_TRUE(at.has_value());
    EXPECT_EQ(u64_at(b.data, *at), 32u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data.data() + *at - 17), 1), "b");
}

TEST(Validation, RequiredKeys) {
    Bytes no_arch;
    no_arch.header(3, 0, 1).kv_string("general.name", "x");
    EXPECT_REFUSED(no_arch.data, "'general.architecture' is missing");

    Bytes no_qv;
    no_qv.header(3, 1, 1).kv_string("general.architecture", "t");
    no_qv.tensor("w", {32}, 8 /* Q8_0 */, 0).pad_to(32).zeros(64);
    EXPECT_REFUSED(no_qv.data, "general.quantization_version' is missing");

    Bytes arch_not_string;
    arch_not_string.header(3, 0, 1).kv_u32("general.architecture", 1);
    EXPECT_REFUSED(arch_not_string.data, "general.architecture");
}

TEST(Validation, Alignment) {
    for (uint32_t bad : {0u, 12u, 3u}) {
        Bytes b;
        b.header(3, 0, 2).kv_string("general.architecture", "t").kv_u32("general.alignment", bad);
        EXPECT_REFUSED(b.data, "general.alignment' is " + std::to_string(bad));
        // At the start of the general.alignment entry: its key's length, then the key.
        const std::optional<uint64_t> at = error_offset(b.data);
        ASSERT_TRUE(at.has_value());
        EXPECT_EQ(u64_at(b.data, *at), std::string("general.alignment").size());
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data.data() + *at + 8), 17),
                  "general.alignment");
    }
    // A legal custom alignment moves the data section and the offset rule.
    Bytes b;
    b.header(3, 1, 2).kv_string("general.architecture", "t").kv_u32("general.alignment", 64);
    b.tensor("w", {8}, 0, 0).pad_to(64).zeros(64);
    const gguf::File f = gguf::File::from_bytes(b.data);
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.data_offset() % 64, 0u);
}

TEST(Validation, NestingDepthIsBounded) {
    Bytes b;
    b.header(3, 0, 1).str("a.deep").u32(9);
    for (int i = 0; i < 100; ++i) b.u32(9).u64(1);  // arrays of arrays of ...
    b.u32(4).u64(0);
    EXPECT_REFUSED(b.data, "nested deeper than");
}

TEST(Validation, Version1UsesNarrowCounts) {
    Bytes b(1);
    b.header(1, 1, 1).kv_string("general.architecture", "old");
    b.tensor("w", {8}, 0, 0).pad_to(32).zeros(32);
    const gguf::File f = gguf::File::from_bytes(b.data);
    EXPECT_EQ(f.version(), 1u);
    EXPECT_EQ(f.architecture(), "old");
    EXPECT_EQ(f.tensor("w").ne[0], 8);
}

// Every prefix of a valid file must be refused cleanly: this walks the reader through every
// "ran out of bytes" path. Under ASan it also proves no read goes past the buffer.
TEST(Validation, EveryTruncationIsRefused) {
    gguf::Writer w;
    w.set("general.architecture", "t");
    w.set("general.quantization_version", uint32_t{2});
    w.set("t.strings", gguf::Array{std::vector<std::string>{"a", "bc", ""}});
    w.set("t.nested",
          gguf::Array{std::vector<gguf::Array>{gguf::Array{std::vector<int16_t>{1, 2}}}});
    std::vector<uint8_t> q8(34, 0);
    w.add_tensor("q", gguf::TensorType::Q8_0, {32}, q8);
    const std::vector<uint8_t> full = w.to_bytes();
    ASSERT_EQ(error_of(full), "");
    const gguf::File f = gguf::File::from_bytes(full);
    const size_t needed = f.tensor("q").file_offset + f.tensor("q").n_bytes;
    for (size_t n = 0; n < needed; ++n) {
        std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
        EXPECT_NE(error_of(cut), "") << "prefix of " << n << " bytes accepted";
    }
}

// Random corruption: every mutated file either loads or is refused with gguf::Error.
TEST(Validation, RandomCorruptionNeverCrashes) {
    gguf::Writer w;
    w.set("general.architecture", "t");
    w.set("t.values", gguf::Array{std::vector<float>{1, 2, 3}});
    w.set("t.name", "model");
    w.add_tensor("a", {8}, std::vector<float>(8, 1.0f));
    w.add_tensor("b", {4, 2}, std::vector<float>(8, 2.0f));
    const std::vector<uint8_t> full = w.to_bytes();
    std::mt19937 rng(1234);
    int refused = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::vector<uint8_t> bytes = full;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
        try {
            gguf::File::from_bytes(bytes);
        } catch (const gguf::Error&) {
            ++refused;
        }
    }
    EXPECT_GT(refused, 100);  // most corruptions of the header region are caught
}

}  // namespace
