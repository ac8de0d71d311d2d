// The formats against real files: llama.cpp wrote tiny-llama-<type>.gguf by quantizing the
// matrices of tiny-llama-f32.gguf. Dequantized with our to_float, every tensor must match its
// F32 original within the error that type's quantization makes; a wrong block layout, bit
// order or scale packing gives errors near 100%.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/kernels/formats.h"
#include "gguf/file.h"
#include "tests/support/conformance.h"

namespace ggufd::kernels {
namespace {

using gguf::TensorType;

// Upper bounds on a tensor's relative RMS dequantization error, set at about 1.5x the largest
// error measured on these files and consistent with each format's step size (see the round-trip
// bounds in test_formats.cpp, which are of the same order).
const std::map<TensorType, double> kFileErrorBound = {
    // measured worst: F16 0.00021, BF16 0.00167, Q8_0 0.0054, Q6_K 0.0179, Q5_1 0.038,
    // Q5_0 0.043, Q5_K 0.036, Q4_1 0.079, Q4_0 0.086, Q4_K 0.072, IQ4_NL 0.077,
    // IQ4_XS 0.077, Q3_K 0.151, Q2_K 0.298
    {TensorType::F16, 3.2e-4}, {TensorType::BF16, 2.5e-3},  {TensorType::Q8_0, 0.008},
    {TensorType::Q6_K, 0.027}, {TensorType::Q5_1, 0.057},   {TensorType::Q5_0, 0.065},
    {TensorType::Q5_K, 0.055}, {TensorType::Q4_1, 0.12},    {TensorType::Q4_0, 0.13},
    {TensorType::Q4_K, 0.11},  {TensorType::IQ4_NL, 0.115}, {TensorType::IQ4_XS, 0.116},
    {TensorType::Q3_K, 0.23},  {TensorType::Q2_K, 0.45},
};

double relative_rms(const std::vector<float>& ref, const std::vector<float>& got) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double e = static_cast<double>(got[i]) - ref[i];
        err += e * e;
        norm += static_cast<double>(ref[i]) * ref[i];
    }
    return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

std::vector<float> to_floats(const gguf::TensorInfo& t) {
    std::vector<float> out(t.n_elements);
    dequantize_row(t.type, t.data, out.data(), static_cast<int64_t>(t.n_elements));
    return out;
}

class FileConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(FileConformance, DequantizedTensorsMatchF32File) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File ref = gguf::File::open(dir / "models" / "tiny-llama-f32.gguf");
    const gguf::File file =
        gguf::File::open(dir / "models" / ("tiny-llama-" + GetParam() + ".gguf"));
    ASSERT_EQ(file.tensors().size(), ref.tensors().size());
    std::map<TensorType, double> worst;
    int quantized = 0;
    for (const gguf::TensorInfo& t : file.tensors()) {
        SCOPED_TRACE(t.name + " " + std::string(gguf::type_name(t.type)));
        const gguf::TensorInfo& r = ref.tensor(t.name);
        ASSERT_EQ(r.type, TensorType::F32);
        ASSERT_EQ(t.n_elements, r.n_elements);
        ASSERT_EQ(t.ne, r.ne);
        const std::vector<float> expected = to_floats(r);
        const std::vector<float> got = to_floats(t);
        const double err = relative_rms(expected, got);
        if (t.type == TensorType::F32) {
            EXPECT_EQ(got, expected);
            continue;
        }
        ++quantized;
        ASSERT_TRUE(kFileErrorBound.contains(t.type)) << "no bound for this type";
        EXPECT_LE(err, kFileErrorBound.at(t.type));
        worst[t.type] = std::max(worst[t.type], err);
    }
    EXPECT_GT(quantized, 0);
    for (const auto& [type, err] : worst) {
        std::printf("%-8s %-7s worst relative RMS error %.5f\n", GetParam().c_str(),
                    std::string(gguf::type_name(type)).c_str(), err);
    }
}

// Our quantizers, applied to the same F32 matrices, must be about as accurate as llama.cpp's
// (which is what produced the file): at most 15% more relative error per tensor.
TEST_P(FileConformance, OurQuantizerIsAsAccurateAsTheFile) {
    GGUFD_REQUIRE_CONFORMANCE(dir);
    const gguf::File ref = gguf::File::open(dir / "models" / "tiny-llama-f32.gguf");
    const gguf::File file =
        gguf::File::open(dir / "models" / ("tiny-llama-" + GetParam() + ".gguf"));
    for (const gguf::TensorInfo& t : file.tensors()) {
        if (t.type == TensorType::F32) continue;
        SCOPED_TRACE(t.name + " " + std::string(gguf::type_name(t.type)));
        const FormatKernels& k = kernels_for(t.type);
        ASSERT_NE(k.from_float, nullptr);
        const std::vector<float> x = to_floats(ref.tensor(t.name));
        std::vector<uint8_t> ours(t.n_bytes);
        quantize_row(t.type, x.data(), ours.data(), static_cast<int64_t>(x.size()));
        std::vector<float> back(x.size());
        dequantize_row(t.type, ours.data(), back.data(), static_cast<int64_t>(x.size()));
        const double ours_err = relative_rms(x, back);
        const double file_err = relative_rms(x, to_floats(t));
        EXPECT_LE(ours_err, 1.15 * file_err + 1e-6)
            << "ours " << ours_err << " vs llama.cpp " << file_err;
    }
}

INSTANTIATE_TEST_SUITE_P(TinyLlama, FileConformance,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl",
                                           "iq4_xs", "q4_k_m"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace ggufd::kernels
