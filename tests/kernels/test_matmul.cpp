// Matrix products against the scalar reference dot, for many shapes and row ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/kernels/cpu_features.h"
#include "engine/kernels/fast_matmul.h"
#include "engine/kernels/float16.h"
#include "engine/kernels/format_rows.h"
#include "engine/kernels/formats.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/repack.h"
#include "engine/kernels/threadpool.h"
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

// Widths and shapes where the fast kernels run their main loops (groups of 8 blocks, full
// 16-row tiles, 8 activation rows per micro-kernel call) as well as every kind of tail.
TEST_P(Matmul, MatchesReferenceAtWiderShapes) {
    const FormatKernels& k = kernels_for(GetParam());
    const int64_t bs = std::max<int64_t>(k.block_size, kernels_for(k.vec_dot_type).block_size);
    const std::vector<int64_t> widths =
        bs == 32 ? std::vector<int64_t>{256, 416, 768} : std::vector<int64_t>{2 * bs, 5 * bs};
    uint32_t seed = 500;
    for (int64_t cols : widths) {
        for (int64_t n_x : {1, 2, 8, 11}) {
            for (int64_t rows : {16, 35}) {
                SCOPED_TRACE(std::string(k.name) + " rows=" + std::to_string(rows) +
                             " cols=" + std::to_string(cols) + " n_x=" + std::to_string(n_x));
                const Problem p = make_problem(k.type, rows, cols, n_x, seed++);
                std::vector<float> Y(static_cast<size_t>(n_x * rows), NAN);
                matmul(k.type, p.W.data(), rows, cols, p.X.data(), n_x, Y.data());
                expect_matches(p, Y, 0, rows);
            }
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

// Activations converted on the pool, row by row on any thread, are the same bytes.
TEST(PrepareActivations, ThePoolWritesTheSameBytes) {
    ThreadPool pool(3);
    std::mt19937 rng(5);
    for (const FormatKernels& k : supported_formats()) {
        if (k.vec_dot_type == TensorType::F32) continue;
        const int64_t cols = 512;
        for (int64_t n : {1, 2, 37}) {
            std::vector<float> X = testing::random_floats(static_cast<size_t>(n * cols), rng, 3.0f);
            const size_t bytes = activation_buffer_bytes(k.type, cols, n);
            std::vector<uint8_t> alone(bytes, 0xAB), pooled(bytes, 0xAB);
            prepare_activations(k.type, X.data(), n, cols, cols, alone.data());
            prepare_activations(k.type, X.data(), n, cols, cols, pooled.data(), &pool);
            ASSERT_EQ(alone, pooled) << gguf::type_name(k.type) << " rows " << n;
        }
    }
}

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

// The fast activation quantizers write exactly the bytes of the activation format's own
// from_float, and exactly the extra data the portable fill_act_extras() derives from them,
// including values that sit on a rounding tie.
TEST(MatmulFastPath, PreparedActivationsMatchTheScalarQuantizer) {
    std::mt19937 rng(77);
    int checked = 0;
    for (TensorType t :
         {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
          TensorType::IQ4_NL, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
        const detail::FastFormat* f = detail::find_fast_format(t);
        if (f == nullptr) continue;  // this CPU has no fast path: nothing to compare
        const FormatKernels& k = kernels_for(t);
        const int64_t cols = 512, n = 3;
        std::vector<float> X = testing::random_floats(static_cast<size_t>(n * cols), rng, 3.0f);
        // A block whose scale is exactly 1 (largest magnitude 127), full of halves: lround
        // takes them away from zero, round-to-nearest-even would not.
        X[0] = 127.0f;
        for (int j = 1; j < 32; ++j) X[static_cast<size_t>(j)] = (j % 2 ? 0.5f : -0.5f) + (j - 16);
        for (int64_t j = 32; j < 256; ++j) X[static_cast<size_t>(j)] = 0.0f;  // Q8_K: scale 1
        std::vector<uint8_t> buffer(activation_buffer_bytes(t, cols, n));
        const PreparedActivations p =
            prepare_activations(t, X.data(), n, cols, cols, buffer.data());
        ASSERT_TRUE(p.fast_layout);
        const size_t rb = gguf::row_bytes(k.vec_dot_type, cols);
        const detail::ActLayout lay = detail::act_layout(*f, rb, cols);
        ASSERT_EQ(p.row_stride, lay.stride);
        const size_t nbl = static_cast<size_t>(cols / f->block_len);
        for (int64_t r = 0; r < n; ++r) {
            std::vector<uint8_t> expected(lay.stride, 0);
            kernels_for(k.vec_dot_type).from_float(X.data() + r * cols, expected.data(), cols);
            detail::fill_act_extras(*f, k.vec_dot_type, cols, lay, expected.data());
            const uint8_t* got = static_cast<const uint8_t*>(p.data) + r * p.row_stride;
            SCOPED_TRACE(std::string(k.name) + " row " + std::to_string(r));
            EXPECT_EQ(0, std::memcmp(got, expected.data(), rb)) << "quantized blocks";
            EXPECT_EQ(0, std::memcmp(got + lay.codes, expected.data() + lay.codes, cols))
                << "codes";
            EXPECT_EQ(0, std::memcmp(got + lay.scale, expected.data() + lay.scale, 4 * nbl));
            EXPECT_EQ(0, std::memcmp(got + lay.zcorr, expected.data() + lay.zcorr, 4 * nbl));
            EXPECT_EQ(0, std::memcmp(got + lay.dsum, expected.data() + lay.dsum, 4 * nbl));
        }
        ++checked;
    }
    std::printf("fast activation quantizers checked: %d\n", checked);
}

// The dispatch follows GGUFD_CPU_LIMIT: ctest runs this file again under "avx2" and "scalar"
// (tests/kernels/CMakeLists.txt), and those runs only test the slower paths if the limit holds.
TEST(MatmulDispatch, FollowsTheCpuLimit) {
    const char* env = std::getenv("GGUFD_CPU_LIMIT");
    const std::string limit = env ? env : "";
    const CpuFeatures real = detect_cpu_features();
    const bool avx2 = real.avx2 && real.fma && real.f16c && limit != "scalar";
    const bool vnni = avx2 && real.avx512f && real.avx512bw && real.avx512vl && real.avx512dq &&
                      real.avx512vnni && limit != "avx2";
    const std::string_view want = vnni ? "avx512vnni" : avx2 ? "avx2" : "scalar";
    std::printf("GGUFD_CPU_LIMIT=%s: expecting %s dots\n", limit.c_str(),
                std::string(want).c_str());
    for (TensorType t :
         {TensorType::F32, TensorType::Q4_0, TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K,
          TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_XS}) {
        EXPECT_EQ(kernels_for(t).dot_isa, want) << gguf::type_name(t);
        EXPECT_EQ(dot_variants(t).back().isa, want) << gguf::type_name(t);
    }
    if (!vnni) {
        for (const FormatKernels& k : supported_formats()) {
            EXPECT_EQ(detail::find_fast_format(k.type), nullptr) << k.name;
            EXPECT_FALSE(can_repack(k.type, 16, 256)) << k.name << ": repacked kernels need VNNI";
        }
    }
}

// The dispatch reads each type's row and nothing else: the fast paths it uses are the row's,
// and a type repacks exactly when its row names a layout and its fast paths carry the kernel.
TEST(MatmulDispatch, FollowsEachTypesRow) {
    int fast = 0, repackable = 0;
    for (const FormatKernels& k : supported_formats()) {
        const detail::FormatRow* row = detail::find_row(k.type);
        ASSERT_NE(row, nullptr) << k.name;
        EXPECT_EQ(row->type, k.type);
        EXPECT_EQ(row->vec_dot_ref, k.vec_dot_ref) << k.name;
        const detail::FastFormat* f = detail::find_fast_format(k.type);
        if (f != nullptr) {
            EXPECT_EQ(f, row->avx512_fast) << k.name;
            ++fast;
        }
        const bool repacks = f != nullptr && f->repacked != nullptr && row->repack != nullptr;
        EXPECT_EQ(can_repack(k.type, 16, 512), repacks) << k.name;
        repackable += repacks;
    }
    std::printf("types with fast paths: %d, repackable: %d\n", fast, repackable);
}

// A matrix repacked in pieces, as the model does over its thread pool, into 64-byte aligned
// storage.
struct Repacked {
    std::vector<uint8_t> storage;
    RepackedMatrix matrix;
};

Repacked repacked(const Problem& p) {
    Repacked out{std::vector<uint8_t>(repacked_bytes(p.type, p.rows, p.cols) + 64), {}};
    uint8_t* data =
        out.storage.data() + (64 - reinterpret_cast<uintptr_t>(out.storage.data()) % 64) % 64;
    for (int64_t r = 0; r < p.rows; r += 32) {
        repack_rows(p.type, p.W.data(), p.rows, p.cols, data, r, std::min(p.rows, r + 32));
    }
    out.matrix = {p.type, data, p.rows, p.cols};
    return out;
}

// Repacked matrices give the reference results for every activation count the kernel unrolls
// (1..8 and beyond) and for row ranges that cut groups anywhere, writing nothing outside them.
TEST(MatmulRepacked, MatchesReferenceAndRespectsRowRanges) {
    int checked = 0;
    uint32_t seed = 900;
    for (const FormatKernels& k : supported_formats()) {
        if (!can_repack(k.type, 16, 256)) continue;
        // 11 blocks: not a multiple of any unroll (352 for 32-element blocks, 2816 for K-quants).
        for (int64_t cols : {int64_t{256}, 11 * k.block_size, int64_t{2048}}) {
            for (int64_t n_x : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17}) {
                const int64_t rows = 48;
                SCOPED_TRACE(std::string(k.name) + " cols=" + std::to_string(cols) +
                             " n_x=" + std::to_string(n_x));
                const Problem p = make_problem(k.type, rows, cols, n_x, seed++);
                const Repacked packed = repacked(p);
                const RepackedMatrix& w = packed.matrix;
                std::vector<uint8_t> buffer(activation_buffer_bytes(k.type, cols, n_x));
                const PreparedActivations x =
                    prepare_activations(k.type, p.X.data(), n_x, cols, cols, buffer.data());
                std::vector<float> Y(static_cast<size_t>(n_x * rows), NAN);
                matmul_rows_repacked(w, x, Y.data(), rows, 0, rows);
                expect_matches(p, Y, 0, rows);

                std::vector<float> Z(static_cast<size_t>(n_x * rows), -7.0f);
                matmul_rows_repacked(w, x, Z.data(), rows, 5, 37);
                for (int64_t i = 0; i < n_x; ++i) {
                    for (int64_t r = 0; r < rows; ++r) {
                        if (r < 5 || r >= 37) {
                            ASSERT_EQ(Z[static_cast<size_t>(i * rows + r)], -7.0f) << r;
                        }
                    }
                }
                expect_matches(p, Z, 5, 37);
            }
        }
        ++checked;
    }
    std::printf("repacked types checked: %d\n", checked);
    if (detail::find_fast_format(TensorType::Q4_0) != nullptr) {
        for (TensorType t : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,
                             TensorType::Q6_K}) {
            EXPECT_TRUE(can_repack(t, 16, 256)) << "AVX-512 VNNI repacks " << gguf::type_name(t);
        }
        EXPECT_GT(checked, 0);
    }
}

// Element e of row i (0..15) in a K-quant record, decoded by the byte offsets fast_matmul.h
// documents, with the scalar dequantizer's float arithmetic.
float fp16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

template <class R, bool kFive>
float k45_record_value(const uint8_t* rec, int i, int e) {
    const int j = e / 32, m = e % 32, g = m / 8, high = (m % 8) / 4, t = m % 4;
    const uint8_t* sub = rec + R::codes + R::sub_block * j;
    int q = (sub[64 * g + 4 * i + t] >> (4 * high)) & 15;
    if constexpr (kFive) q |= ((sub[R::fifth + 4 * i + t] >> (g + 4 * high)) & 1) << 4;
    return fp16_at(rec + R::d + 2 * i) * static_cast<float>(rec[R::scales + 16 * j + i]) *
               static_cast<float>(q) -
           fp16_at(rec + R::dmin + 2 * i) * static_cast<float>(rec[R::mins + 16 * j + i]);
}

float q6_k_record_value(const uint8_t* rec, int i, int e) {
    using R = detail::Q6KRecord;
    const int j = e / 16, m = e % 16, g = m / 8, high = (m % 8) / 4, t = m % 4;
    const uint8_t* sub = rec + R::codes + R::sub_block * j;
    const int q = ((sub[64 * g + 4 * i + t] >> (4 * high)) & 15) |
                  ((sub[128 + 4 * i + t] >> (2 * (m / 4))) & 3) << 4;
    return fp16_at(rec + R::d + 2 * i) *
           static_cast<float>(static_cast<int8_t>(rec[R::scales + 16 * j + i])) *
           static_cast<float>(q - 32);
}

// The repacked K-quant matrices hold exactly the file's weights where fast_matmul.h says: the
// kernel tests above would also pass with a layout the two sides merely agree on.
TEST(MatmulRepacked, KQuantRecordsFollowTheirDocumentedLayout) {
    struct Case {
        TensorType type;
        size_t record_bytes;
        float (*value)(const uint8_t* rec, int i, int e);
    };
    const Case cases[] = {
        {TensorType::Q4_K, detail::Q4KRecord::bytes, k45_record_value<detail::Q4KRecord, false>},
        {TensorType::Q5_K, detail::Q5KRecord::bytes, k45_record_value<detail::Q5KRecord, true>},
        {TensorType::Q6_K, detail::Q6KRecord::bytes, q6_k_record_value},
    };
    for (const Case& c : cases) {
        if (!can_repack(c.type, 32, 512)) continue;  // no repacked layout on this CPU
        SCOPED_TRACE(gguf::type_name(c.type));
        const int64_t rows = 32, cols = 512;
        const Problem p = make_problem(c.type, rows, cols, 1, 4242);
        ASSERT_EQ(repacked_bytes(c.type, rows, cols), c.record_bytes * (rows / 16) * (cols / 256));
        const Repacked packed = repacked(p);
        const size_t rb = gguf::row_bytes(c.type, cols);
        for (int64_t r = 0; r < rows; ++r) {
            const auto want = testing::dequantized(c.type, p.W.data() + r * rb, cols);
            for (int64_t col = 0; col < cols; ++col) {
                const uint8_t* rec =
                    packed.matrix.data +
                    c.record_bytes * static_cast<size_t>((r / 16) * (cols / 256) + col / 256);
                ASSERT_EQ(c.value(rec, static_cast<int>(r % 16), static_cast<int>(col % 256)),
                          want[static_cast<size_t>(col)])
                    << "row " << r << " col " << col;
            }
        }
    }
}

TEST(MatmulRepacked, RefusesShapesItCannotTake) {
    EXPECT_FALSE(can_repack(TensorType::Q4_0, 20, 256)) << "rows not a multiple of 16";
    EXPECT_FALSE(can_repack(TensorType::Q4_0, 16, 48)) << "cols not whole blocks";
    EXPECT_FALSE(can_repack(TensorType::F32, 16, 256)) << "no repacked layout";
    for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
        SCOPED_TRACE(gguf::type_name(t));
        EXPECT_FALSE(can_repack(t, 16, 352)) << "cols not whole super-blocks";
        EXPECT_FALSE(can_repack(t, 24, 256)) << "rows not a multiple of 16";
        EXPECT_FALSE(can_repack(t, 17, 256)) << "odd row count";
        EXPECT_THROW(repacked_bytes(t, 16, 352), std::invalid_argument);
        EXPECT_THROW(repacked_bytes(t, 17, 256), std::invalid_argument);
    }
    EXPECT_THROW(repacked_bytes(TensorType::Q4_0, 20, 256), std::invalid_argument);
    if (!can_repack(TensorType::Q4_0, 32, 256)) return;
    std::vector<uint8_t> W(gguf::row_bytes(TensorType::Q4_0, 256) * 32);
    std::vector<uint8_t> out(repacked_bytes(TensorType::Q4_0, 32, 256));
    EXPECT_THROW(repack_rows(TensorType::Q4_0, W.data(), 32, 256, out.data(), 8, 32),
                 std::invalid_argument)
        << "row range not whole groups";
    std::vector<float> X(256, 1.0f), Y(32);
    std::vector<uint8_t> buffer(activation_buffer_bytes(TensorType::Q8_0, 256, 1));
    const auto x = prepare_activations(TensorType::Q8_0, X.data(), 1, 256, 256, buffer.data());
    const RepackedMatrix w{TensorType::Q4_0, out.data(), 32, 256};
    EXPECT_THROW(matmul_rows_repacked(w, x, Y.data(), 32, 0, 32), std::invalid_argument)
        << "activations prepared for another weight type";
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
