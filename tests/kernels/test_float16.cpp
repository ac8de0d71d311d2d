#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/kernels/float16.h"

using namespace ggufd::kernels;

TEST(Float16, EveryHalfRoundTripsThroughFloat) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        float f = fp16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
            continue;
        }
        EXPECT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h;
    }
}

TEST(Float16, RoundsToNearestEven) {
    // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
    EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
    // 1 + 3*2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
    EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);         // overflow rounds to infinity
    EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);         // half the smallest subnormal: tie to zero
    EXPECT_EQ(fp32_to_fp16(0x1p-24f * 1.5f), 0x0002);  // 1.5 ulp: tie to even (2)
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
}

TEST(BFloat16, RoundTripAndRounding) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        float f = bf16_to_fp32(static_cast<uint16_t>(b));
        if (std::isnan(f)) continue;
        EXPECT_EQ(fp32_to_bf16(f), b);
    }
    EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  // tie to even
    EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}
