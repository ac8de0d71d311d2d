// Matrix products against the scalar reference dot, for many shapes and row ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/kernels/formats.h"
#include "engine/kernels/matmul.h"
#include "kernel_test_util.h"

namespace ggufd::kernels {
namespace {

using gguf::TensorType;

struct Problem {
    TensorType type;
    int64_t rows, cols, n_x;
    std::vector<uint8_t> W;
    std::vector<float> X;
    std::vector<float> expected;  // from the scalar reference, one dot at a time
    std::vector<double> tolerance;
};

Problem make_problem(TensorType t, int64_t rows, int64_t cols, int64_t n_x, uint32_t seed) {
    std::mt19937 rng(seed);
    const FormatKernels& k = kernels_for(t);
    Problem p{t,  rows, cols, n_x, {}, testing::random_floats(static_cast<size_t>(n_x * cols), rng),
              {}, {}};
    const size_t rb = gguf::row_bytes(t, static_cast<uint64_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        const auto row = testing::random_weight_row(t, cols, rng);
        p.W.insert(p.W.end(), row.begin(), row.end());
    }
    EXPECT_EQ(p.W.size(), rb * rows);
    for (int64_t i = 0; i < n_x; ++i) {
        const std::vector<float> x(p.X.begin() + i * cols, p.X.begin() + (i + 1) * cols);
        const auto a = testing::activation_row(t, x);
        const auto af = testing::dequantized(k.vec_dot_type, a.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t* w = p.W.data() + r * rb;
            p.expected.push_back(k.vec_dot_ref(cols, w, a.data()));
            const auto wf = testing::dequantized(t, w, cols);
            double m = 0;
            for (int64_t j = 0; j < cols; ++j) m += std::fabs(static_cast<double>(wf[j]) * af[j]);
            p.tolerance.push_back(1e-5 * m + 1e-30);
        }
    }
    return p;
}

void expect_matches(const Problem& p, const std::vector<float>& Y, int64_t r0, int64_t r1) {
    for (int64_t i = 0; i < p.n_x; ++i) {
        for (int64_t r = r0; r < r1; ++r) {
            const size_t idx = static_cast<size_t>(i * p.rows + r);
            ASSERT_NEAR(Y[idx], p.expected[idx], p.tolerance[idx])
                << "x row " << i << ", w row " << r;
        }
    }
}

class Matmul : public ::testing::TestWithParam<TensorType> {};

TEST_P(Matmul, MatchesReferenceForManyShapes) {
    const FormatKernels& k = kernels_for(GetParam());
    const int64_t bs = std::max<int64_t>(k.block_size, kernels_for(k.vec_dot_type).block_size);
    uint32_t seed = 1;
    for (int64_t n_x : {1, 2, 3, 4, 5, 7, 9}) {
        for (int64_t rows : {1, 5, 17, 70}) {
            const int64_t cols = bs * (rows % 3 + 1);
            SCOPED_TRACE(std::string(k.name) + " rows=" + std::to_string(rows) +
                         " cols=" + std::to_string(cols) + " n_x=" + std::to_string(n_x));
            const Problem p = make_problem(k.type, rows, cols, n_x, seed++);
            std::vector<float> Y(static_cast<size_t>(n_x * rows), NAN);
            matmul(k.type, p.W.data(), rows, cols, p.X.data(), n_x, Y.data());
            expect_matches(p, Y, 0, rows);
        }
    }
}

TEST_P(Matmul, RowRangesComposeToTheWholeProduct) {
    const FormatKernels& k = kernels_for(GetParam());
    const int64_t cols =
        std::max<int64_t>(k.block_size, kernels_for(k.vec_dot_type).block_size) * 2;
    const int64_t rows = 37, n_x = 6;
    const Problem p = make_problem(k.type, rows, cols, n_x, 42);
    std::vector<uint8_t> buffer(activation_buffer_bytes(k.type, cols, n_x));
    const PreparedActivations x =
        prepare_activations(k.type, p.X.data(), n_x, cols, cols, buffer.data());
    std::vector<float> Y(static_cast<size_t>(n_x * rows), NAN);
    // Uneven pieces, as a pool splitting 37 rows over threads would produce.
    const int64_t cuts[] = {0, 1, 9, 10, 30, 37};
    for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
        matmul_rows(k.type, p.W.data(), rows, cols, x, Y.data(), rows, cuts[c], cuts[c + 1]);
    }
    expect_matches(p, Y, 0, rows);
}

std::vector<TensorType> weight_types() {
    std::vector<TensorType> out;
    for (const FormatKernels& k : supported_formats()) out.push_back(k.type);
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul, ::testing::ValuesIn(weight_types()),
                         testing::type_param_name);

TEST(MatmulApi, SubRangeLeavesOtherColumnsUntouched) {
    const Problem p = make_problem(TensorType::Q4_0, 20, 64, 3, 7);
    std::vector<uint8_t> buffer(activation_buffer_bytes(TensorType::Q4_0, 64, 3));
    const auto x = prepare_activations(TensorType::Q4_0, p.X.data(), 3, 64, 64, buffer.data());
    std::vector<float> Y(60, -7.0f);
    matmul_rows(TensorType::Q4_0, p.W.data(), 20, 64, x, Y.data(), 20, 5, 12);
    for (int64_t i = 0; i < 3; ++i) {
        for (int64_t r = 0; r < 20; ++r) {
            if (r < 5 || r >= 12) {
                EXPECT_EQ(Y[static_cast<size_t>(i * 20 + r)], -7.0f);
            }
        }
    }
    expect_matches(p, Y, 5, 12);
}

TEST(MatmulApi, FloatWeightsUseActivationsInPlace) {
    std::vector<float> X(3 * 40, 1.0f);
    EXPECT_EQ(activation_buffer_bytes(TensorType::F16, 40, 3), 0u);
    const auto x = prepare_activations(TensorType::F16, X.data(), 3, 40, 40, nullptr);
    EXPECT_EQ(x.data, X.data());
    EXPECT_EQ(x.row_stride, 40 * sizeof(float));
}

TEST(MatmulApi, RejectsBadShapes) {
    std::vector<float> X(256, 1.0f), Y(64);
    std::vector<uint8_t> W(4096), buffer(4096);
    EXPECT_THROW(activation_buffer_bytes(TensorType::Q4_K, 100, 1), std::invalid_argument);
    EXPECT_THROW(matmul(TensorType::Q8_0, W.data(), 2, 48, X.data(), 1, Y.data()),
                 std::invalid_argument);
    EXPECT_THROW(matmul(TensorType::IQ2_XXS, W.data(), 2, 256, X.data(), 1, Y.data()),
                 std::runtime_error);
    const auto x = prepare_activations(TensorType::Q8_0, X.data(), 1, 64, 64, buffer.data());
    EXPECT_THROW(matmul_rows(TensorType::Q8_0, W.data(), 4, 64, x, Y.data(), 4, 2, 5),
                 std::invalid_argument);
    const auto x256 = prepare_activations(TensorType::Q8_0, X.data(), 1, 256, 256, buffer.data());
    EXPECT_THROW(matmul_rows(TensorType::Q4_K, W.data(), 4, 256, x256, Y.data(), 4, 0, 4),
                 std::invalid_argument)
        << "activations prepared for another weight type's dot product";
    EXPECT_THROW(matmul_rows(TensorType::Q8_0, W.data(), 4, 32, x, Y.data(), 4, 0, 4),
                 std::invalid_argument);
}

}  // namespace
}  // namespace ggufd::kernels
