// Format table, quantize/dequantize round trips and the scalar reference dot products.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/kernels/blocks.h"
#include "engine/kernels/formats.h"
#include "kernel_test_util.h"

namespace ggufd::kernels {
namespace {

using gguf::TensorType;
using testing::activation_row;
using testing::dequantized;
using testing::random_floats;

double relative_rms(const std::vector<float>& ref, const std::vector<float>& got) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double e = static_cast<double>(got[i]) - ref[i];
        err += e * e;
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    return std::sqrt(err / norm);
}

// Relative RMS error of a quantize/dequantize round trip of Gaussian data. Upper bounds from the
// formats' step sizes (e.g. Q8_0: step = max|x| / 127 ≈ 0.02 σ for 32 Gaussian samples, so
// RMS step/√12 ≈ 0.006 σ), with margin over what the quantizers reach; a wrong layout or
// bit order gives errors near 1.
const std::map<TensorType, double> kRoundTripBound = {
    {TensorType::F32, 0.0},    {TensorType::F16, 4e-4},    {TensorType::BF16, 3e-3},
    {TensorType::Q8_0, 0.008}, {TensorType::Q8_1, 0.008},  {TensorType::Q8_K, 0.012},
    {TensorType::Q5_0, 0.05},  {TensorType::Q5_1, 0.045},  {TensorType::Q4_0, 0.10},
    {TensorType::Q4_1, 0.09},  {TensorType::IQ4_NL, 0.09}, {TensorType::IQ4_XS, 0.09},
    {TensorType::Q6_K, 0.025}, {TensorType::Q5_K, 0.045},  {TensorType::Q4_K, 0.09},
    {TensorType::Q3_K, 0.20},  {TensorType::Q2_K, 0.36},   {TensorType::TQ1_0, 0.85},
    {TensorType::TQ2_0, 0.85}, {TensorType::MXFP4, 0.2},   {TensorType::F64, 0.0},
};

// The block layouts themselves are checked against gguf's table at compile time (blocks.h);
// here, that every row takes its geometry from that table and is complete.
TEST(FormatTable, BlockGeometryMatchesTypeTable) {
    for (const FormatKernels& k : supported_formats()) {
        SCOPED_TRACE(std::string(k.name));
        EXPECT_EQ(k.block_bytes, gguf::type_info(k.type).block_bytes);
        EXPECT_EQ(k.block_size, gguf::type_info(k.type).block_size);
        ASSERT_NE(k.to_float, nullptr);
        ASSERT_NE(k.vec_dot_ref, nullptr);
        ASSERT_NE(k.vec_dot, nullptr);
        ASSERT_NE(k.multi_dot, nullptr);
        EXPECT_NE(find_kernels(k.vec_dot_type), nullptr) << "activation type has no kernels";
        EXPECT_FALSE(dot_variants(k.type).empty());
        EXPECT_EQ(dot_variants(k.type).front().isa, "scalar");
        EXPECT_EQ(dot_variants(k.type).back().isa, k.dot_isa);
    }
}

TEST(FormatTable, UnsupportedTypesFailNamingTheType) {
    for (TensorType t :
         {TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ3_XXS, TensorType::IQ1_S,
          TensorType::IQ1_M, TensorType::IQ3_S, TensorType::IQ2_S, TensorType::I32}) {
        const std::string name(gguf::type_name(t));
        EXPECT_EQ(find_kernels(t), nullptr) << name;
        try {
            kernels_for(t);
            ADD_FAILURE() << name << " did not throw";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    }
}

TEST(FormatTable, WrapperRejectsPartialBlocks) {
    std::vector<float> x(48, 1.0f);
    std::vector<uint8_t> buf(1024);
    EXPECT_THROW(quantize_row(TensorType::Q4_0, x.data(), buf.data(), 48), std::invalid_argument);
    EXPECT_THROW(dequantize_row(TensorType::Q4_K, buf.data(), x.data(), 48), std::invalid_argument);
    EXPECT_NO_THROW(quantize_row(TensorType::F16, x.data(), buf.data(), 47));
}

class RoundTrip : public ::testing::TestWithParam<TensorType> {};

TEST_P(RoundTrip, GaussianErrorWithinFormatBound) {
    const FormatKernels& k = kernels_for(GetParam());
    ASSERT_NE(k.from_float, nullptr);
    std::mt19937 rng(1234);
    const int64_t n = 256 * 64;
    const std::vector<float> x = random_floats(n, rng, 0.02f);
    std::vector<uint8_t> q(static_cast<size_t>(n / k.block_size) * k.block_bytes);
    k.from_float(x.data(), q.data(), n);
    const std::vector<float> y = dequantized(k.type, q.data(), n);
    const double err = relative_rms(x, y);
    RecordProperty("relative_rms", std::to_string(err));
    std::printf("%-7s round-trip relative RMS error %.5f\n", std::string(k.name).c_str(), err);
    EXPECT_LE(err, kRoundTripBound.at(k.type));
}

TEST_P(RoundTrip, ZeroRowStaysZero) {
    const FormatKernels& k = kernels_for(GetParam());
    const int64_t n = 512;
    std::vector<float> x(n, 0.0f);
    std::vector<uint8_t> q(static_cast<size_t>(n / k.block_size) * k.block_bytes, 0xAB);
    k.from_float(x.data(), q.data(), n);
    for (float v : dequantized(k.type, q.data(), n)) ASSERT_EQ(v, 0.0f);
}

TEST_P(RoundTrip, RequantizingIsStable) {
    // Values a format can represent should come back almost unchanged when quantized again.
    const FormatKernels& k = kernels_for(GetParam());
    std::mt19937 rng(99);
    const int64_t n = 1024;
    const std::vector<float> x = random_floats(n, rng);
    std::vector<uint8_t> q(static_cast<size_t>(n / k.block_size) * k.block_bytes);
    k.from_float(x.data(), q.data(), n);
    const std::vector<float> y = dequantized(k.type, q.data(), n);
    k.from_float(y.data(), q.data(), n);
    const std::vector<float> z = dequantized(k.type, q.data(), n);
    EXPECT_LE(relative_rms(y, z), kRoundTripBound.at(k.type) * 0.5 + 1e-7);
}

std::vector<TensorType> quantizable_types() {
    std::vector<TensorType> out;
    for (const FormatKernels& k : supported_formats()) {
        if (k.from_float) out.push_back(k.type);
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(quantizable_types()),
                         testing::type_param_name);

TEST(Ternary, ExactTernaryValuesSurvive) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> trit(-1, 1);
    const int64_t n = 512;
    std::vector<float> x(n);
    for (float& v : x) v = 0.5f * static_cast<float>(trit(rng));
    x[3] = 0.5f;  // make sure every block has its scale
    x[300] = -0.5f;
    for (TensorType t : {TensorType::TQ1_0, TensorType::TQ2_0}) {
        const FormatKernels& k = kernels_for(t);
        std::vector<uint8_t> q(static_cast<size_t>(n / k.block_size) * k.block_bytes);
        k.from_float(x.data(), q.data(), n);
        EXPECT_EQ(dequantized(t, q.data(), n), x) << k.name;
    }
}

// MXFP4 as the OCP microscaling specification defines it: code c is the E2M1 value (sign bit 3,
// then 0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^(e - 127); element j < 16 is the low nibble of qs[j],
// element j + 16 its high nibble.
TEST(Mxfp4, DecodesTheSpecificationsValues) {
    const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int e : {127, 130, 120, 1, 254}) {
        std::vector<uint8_t> block(17);
        block[0] = static_cast<uint8_t>(e);
        for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
        std::vector<float> y(32);
        dequantize_row(TensorType::MXFP4, block.data(), y.data(), 32);
        const double scale = std::ldexp(1.0, e - 127);
        for (int j = 0; j < 32; ++j) {
            const int code = j < 16 ? j : 15 - (j - 16);
            const double want = (code & 8 ? -1.0 : 1.0) * e2m1[code & 7] * scale;
            EXPECT_EQ(y[static_cast<size_t>(j)], static_cast<float>(want))
                << "e " << e << " j " << j;
        }
    }
}

// Values already on the grid of one block's scale survive quantization exactly.
TEST(Mxfp4, GridValuesSurviveQuantization) {
    const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = (j % 2 ? -0.25f : 0.25f) * grid[j % 8];
    x[7] = 1.5f;  // the block's largest magnitude: 6 * 2^-2
    std::vector<uint8_t> q(17);
    quantize_row(TensorType::MXFP4, x.data(), q.data(), 32);
    EXPECT_EQ(q[0], 125);
    std::vector<float> y(32);
    dequantize_row(TensorType::MXFP4, q.data(), y.data(), 32);
    for (int j = 0; j < 32; ++j)
        EXPECT_EQ(y[static_cast<size_t>(j)], x[static_cast<size_t>(j)]) << j;
}

TEST(Q8K, BlockSumsMatchCodes) {
    std::mt19937 rng(8);
    const std::vector<float> x = random_floats(512, rng);
    std::vector<BlockQ8_K> b(2);
    kernels_for(TensorType::Q8_K).from_float(x.data(), b.data(), 512);
    for (const BlockQ8_K& blk : b) {
        for (int k = 0; k < 16; ++k) {
            int s = 0;
            for (int e = 16 * k; e < 16 * k + 16; ++e) s += blk.qs[e];
            EXPECT_EQ(blk.bsums[k], s);
        }
    }
}

// The scalar reference dot product equals the dot of the dequantized rows: the dot products
// and to_float agree on what every bit means.
class ReferenceDot : public ::testing::TestWithParam<TensorType> {};

TEST_P(ReferenceDot, EqualsDotOfDequantizedRows) {
    const FormatKernels& k = kernels_for(GetParam());
    std::mt19937 rng(77);
    for (int64_t n : {256, 512, 2048}) {
        const auto w = testing::random_weight_row(k.type, n, rng);
        const auto a = activation_row(k.type, random_floats(n, rng));
        const auto wf = dequantized(k.type, w.data(), n);
        const auto af = dequantized(k.vec_dot_type, a.data(), n);
        double expected = 0, magnitude = 0;
        for (int64_t i = 0; i < n; ++i) {
            expected += static_cast<double>(wf[i]) * af[i];
            magnitude += std::fabs(static_cast<double>(wf[i]) * af[i]);
        }
        const float got = k.vec_dot_ref(n, w.data(), a.data());
        EXPECT_NEAR(got, expected, 1e-6 * magnitude + 1e-30) << k.name << " n=" << n;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReferenceDot, ::testing::ValuesIn(quantizable_types()),
                         testing::type_param_name);

}  // namespace
}  // namespace ggufd::kernels
