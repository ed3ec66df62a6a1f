#include "core/float_rounding.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace tensorop {
namespace {

TEST(Float16Test, EveryBitPatternRoundTripsThroughDouble) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const double value = Float16ToDouble(half);
    const bool is_nan = (half & 0x7C00) == 0x7C00 && (half & 0x3FF) != 0;
    EXPECT_EQ(std::isnan(value), is_nan) << std::hex << half;
    const Rounded back = RoundToFloat16(value);
    EXPECT_EQ(back.bits, half) << std::hex << half;
    EXPECT_FALSE(back.was_tie) << std::hex << half;
  }
}

TEST(Float16Test, DecodesToExactValues) {
  EXPECT_EQ(Float16ToDouble(0x3C00), 1.0);
  EXPECT_EQ(Float16ToDouble(0x7BFF), 65504.0);
  EXPECT_EQ(Float16ToDouble(0x0001), 0x1p-24);
  EXPECT_EQ(Float16ToDouble(0x03FF), 0x3FFp-24);
  EXPECT_EQ(Float16ToDouble(0x0400), 0x1p-14);
  EXPECT_EQ(Float16ToDouble(0xC000), -2.0);
  EXPECT_EQ(Float16ToDouble(0x2E66), 0.0999755859375);
  EXPECT_TRUE(std::signbit(Float16ToDouble(0x8000)));
  EXPECT_EQ(Float16ToDouble(0x8000), 0.0);
  EXPECT_EQ(Float16ToDouble(0x7C00), INFINITY);
  EXPECT_EQ(Float16ToDouble(0xFC00), -INFINITY);
}

TEST(Float16Test, RoundsToNearestEven) {
  struct Example {
    double value;
    uint16_t bits;
    bool tie;
  };
  const Example examples[] = {
      {1.0 + 0x1p-11, 0x3C00, true},      // halfway, 1.0 is even
      {1.0 + 3 * 0x1p-11, 0x3C02, true},  // halfway, 1+2^-9 is even
      {1.0 + 0x1p-11 + 0x1p-40, 0x3C01, false},
      {1.0 + 0x1p-11 - 0x1p-40, 0x3C00, false},
      {65504.0, 0x7BFF, false},
      {65519.99, 0x7BFF, false},
      {65520.0, 0x7C00, true},  // halfway to 2^16: rounds to infinity
      {1e9, 0x7C00, false},
      {-1e9, 0xFC00, false},
      {0x1p-24, 0x0001, false},  // smallest subnormal
      {0x1p-25, 0x0000, true},   // half of it: to even zero
      {0x1p-25 + 0x1p-60, 0x0001, false},
      {3 * 0x1p-25, 0x0002, true},          // 1.5 subnormal quanta: to even 2
      {0x3FFp-24 + 0x1p-25, 0x0400, true},  // largest subnormal + half: smallest normal
      {1e-300, 0x0000, false},
      {-1e-300, 0x8000, false},
      {-0.0, 0x8000, false},
      {4.9406564584124654e-324, 0x0000, false},  // a double subnormal
  };
  for (const Example& example : examples) {
    const Rounded rounded = RoundToFloat16(example.value);
    EXPECT_EQ(rounded.bits, example.bits) << example.value;
    EXPECT_EQ(rounded.was_tie, example.tie) << example.value;
  }
}

TEST(Float16Test, NaNsStayNaNsWithTheirPayload) {
  EXPECT_EQ(RoundToFloat16(std::bit_cast<double>(uint64_t{0x7FF8000000000000})).bits, 0x7E00);
  EXPECT_EQ(RoundToFloat16(std::bit_cast<double>(uint64_t{0xFFF8000000000000})).bits, 0xFE00);
  // A payload only in bits the narrow type drops still gives a NaN, not infinity.
  EXPECT_EQ(RoundToFloat16(std::bit_cast<double>(uint64_t{0x7FF0000000000001})).bits, 0x7E00);
  EXPECT_EQ(RoundToFloat32(std::bit_cast<double>(uint64_t{0x7FF0000000000001})).bits, 0x7FC00000u);
}

// The compiler's own conversions (libgcc's, for _Float16) round each double once,
// to nearest-even: the reference for values a table cannot cover. Only where
// the compiler has _Float16 (GCC 12, the release and TSan builds; clang 14,
// the ASan build, has none on x86-64).
#ifdef __FLT16_MANT_DIG__
TEST(Float16Test, MatchesTheCompilersConversion) {
  std::mt19937_64 random(20240501);
  for (int i = 0; i < 2000000; ++i) {
    // Doubles with exponents around float16's range and random mantissas, some
    // placed exactly on a tie between two normal float16 values or one double
    // ulp either side of it.
    const uint64_t exponent = 1023 - 30 + random() % 50;
    uint64_t mantissa = random() & ((uint64_t{1} << 52) - 1);
    const uint64_t tie = (mantissa & ~((uint64_t{1} << 42) - 1)) | (uint64_t{1} << 41);
    if (i % 16 == 0) mantissa = tie;
    if (i % 16 == 1) mantissa = tie - 1;
    if (i % 16 == 2) mantissa = tie + 1;
    const uint64_t sign = (random() & 1) << 63;
    const double value = std::bit_cast<double>(sign | (exponent << 52) | mantissa);
    const uint16_t reference = std::bit_cast<uint16_t>(static_cast<_Float16>(value));
    ASSERT_EQ(RoundToFloat16(value).bits, reference) << std::hexfloat << value;
  }
}
#endif  // __FLT16_MANT_DIG__

TEST(Float32Test, MatchesTheHardwareConversion) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 2000000; ++i) {
    const uint64_t exponent = 1023 - 160 + random() % 300;
    uint64_t mantissa = random() & ((uint64_t{1} << 52) - 1);
    const uint64_t tie = (mantissa & ~((uint64_t{1} << 29) - 1)) | (uint64_t{1} << 28);
    if (i % 16 == 0) mantissa = tie;
    if (i % 16 == 1) mantissa = tie - 1;
    if (i % 16 == 2) mantissa = tie + 1;
    const uint64_t sign = (random() & 1) << 63;
    const double value = std::bit_cast<double>(sign | (exponent << 52) | mantissa);
    const uint32_t reference = std::bit_cast<uint32_t>(static_cast<float>(value));
    ASSERT_EQ(RoundToFloat32(value).bits, reference) << std::hexfloat << value;
  }
}

TEST(Float32Test, ReportsTies) {
  EXPECT_EQ(RoundToFloat32(1.0 + 0x1p-24).bits, 0x3F800000u);
  EXPECT_TRUE(RoundToFloat32(1.0 + 0x1p-24).was_tie);
  EXPECT_EQ(RoundToFloat32(1.0 + 3 * 0x1p-24).bits, 0x3F800002u);
  EXPECT_FALSE(RoundToFloat32(1.0 + 0x1p-23).was_tie);
  EXPECT_EQ(RoundToFloat32(0x1p-150).bits, 0u);  // half the smallest subnormal
  EXPECT_TRUE(RoundToFloat32(0x1p-150).was_tie);
  EXPECT_EQ(RoundToFloat32(3.4028235677973366e38).bits, 0x7F800000u);  // max + half ulp
}

TEST(Bfloat16Test, EveryBitPatternRoundTripsThroughDouble) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const double value = Bfloat16ToDouble(half);
    const bool is_nan = (half & 0x7F80) == 0x7F80 && (half & 0x7F) != 0;
    EXPECT_EQ(std::isnan(value), is_nan) << std::hex << half;
    // Exactly the float32 whose upper half it is.
    if (!is_nan) {
      EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(value)), bits << 16) << std::hex << half;
    }
    const Rounded back = RoundToBfloat16(value);
    EXPECT_EQ(back.bits, half) << std::hex << half;
    EXPECT_FALSE(back.was_tie) << std::hex << half;
  }
}

// For a float32, bfloat16's rounding is the well-known one on its bits: add
// 0x7FFF plus the lowest kept bit, then drop the low half.
TEST(Bfloat16Test, MatchesRoundingTheFloat32Bits) {
  std::mt19937 random(11);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = random();
    if (i % 8 == 0) bits = (bits & 0xFFFF0000) | 0x8000;  // a tie
    if (std::isnan(std::bit_cast<float>(bits))) continue;
    const uint32_t reference = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
    const Rounded rounded = RoundToBfloat16(static_cast<double>(std::bit_cast<float>(bits)));
    ASSERT_EQ(rounded.bits, reference) << std::hex << bits;
    EXPECT_EQ(rounded.was_tie, (bits & 0xFFFF) == 0x8000) << std::hex << bits;
  }
  EXPECT_EQ(RoundToBfloat16(3.4e38).bits, 0x7F80u);  // past the largest value's half ulp
  EXPECT_EQ(RoundToBfloat16(-0.0).bits, 0x8000u);
  EXPECT_EQ(RoundToBfloat16(NAN).bits & 0x7FC0u, 0x7FC0u);
}

}  // namespace
}  // namespace tensorop
