// Element text (core/element_text.h): each dtype's bits from decimal text,
// exact at the edges of every range, ties decided by the text, and the refusals.
#include "core/element_text.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::Eq;
using ::testing::HasSubstr;

uint64_t Bits(DType dtype, const std::string& text) {
  absl::StatusOr<uint64_t> bits = ElementBitsFromText(dtype, text, "value");
  EXPECT_TRUE(bits.ok()) << text << ": " << bits.status();
  return bits.value_or(0xDEAD);
}

TEST(ElementTextTest, IntegersAreExactToTheEdgesOfTheirRange) {
  EXPECT_EQ(Bits(DType::kInt64, "-9223372036854775808"), uint64_t{1} << 63);
  EXPECT_EQ(Bits(DType::kInt64, "9223372036854775807"), (uint64_t{1} << 63) - 1);
  EXPECT_EQ(Bits(DType::kUint64, "18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Bits(DType::kInt8, "-128") & 0xFF, 0x80u);
  EXPECT_EQ(Bits(DType::kUint16, "65535"), 0xFFFFu);
  EXPECT_EQ(Bits(DType::kInt32, "-0"), 0u);
  // An integral number written as a float, exactly so.
  EXPECT_EQ(Bits(DType::kInt16, "1e3"), 1000u);
  EXPECT_EQ(Bits(DType::kUint8, "2.0"), 2u);
}

TEST(ElementTextTest, IntegersOutsideTheRangeOrFractionsAreRefused) {
  EXPECT_THAT(ElementBitsFromText(DType::kUint64, "18446744073709551616", "pad.value"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.value is \"18446744073709551616\", out of range; uint64 takes an "
                          "integer from 0 to 18446744073709551615")));
  EXPECT_THAT(ElementBitsFromText(DType::kInt8, "-129", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("v is \"-129\", out of range; int8 takes an integer from -128 to 127")));
  EXPECT_THAT(ElementBitsFromText(DType::kUint32, "-1", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  // Within the double's rounding of the text, but not an integer.
  EXPECT_THAT(ElementBitsFromText(DType::kInt32, "1.0000000000000000001", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(", not an integer;")));
  EXPECT_THAT(ElementBitsFromText(DType::kInt64, "1e400", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a float beyond 2^53")));
  for (const char* text : {"", "+1", "0x10", " 1", "1 ", "one", "nan", "inf", "1e", "--1", "."}) {
    EXPECT_THAT(ElementBitsFromText(DType::kInt32, text, "v"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("int32 takes an integer from -2147483648 to 2147483647")))
        << text;
  }
}

TEST(ElementTextTest, BoolTakesTrueFalseOneAndZero) {
  EXPECT_EQ(Bits(DType::kBool, "true"), 1u);
  EXPECT_EQ(Bits(DType::kBool, "false"), 0u);
  EXPECT_EQ(Bits(DType::kBool, "1"), 1u);
  EXPECT_EQ(Bits(DType::kBool, "0"), 0u);
  EXPECT_THAT(ElementBitsFromText(DType::kBool, "2", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("v is \"2\", out of range; bool takes true, false, 1 or 0")));
  EXPECT_THAT(ElementBitsFromText(DType::kBool, "True", "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("v is \"True\"; bool takes true, false, 1 or 0")));
}

TEST(ElementTextTest, FloatsRoundToTheNearestValueOfTheirDtype) {
  EXPECT_EQ(Bits(DType::kFloat64, "0.1"), 0x3FB999999999999Au);
  EXPECT_EQ(Bits(DType::kFloat32, "0.1"), 0x3DCCCCCDu);
  EXPECT_EQ(Bits(DType::kFloat16, "0.1"), 0x2E66u);
  EXPECT_EQ(Bits(DType::kBfloat16, "0.1"), 0x3DCDu);
  EXPECT_EQ(Bits(DType::kFloat32, "-0.0"), 0x80000000u);
  EXPECT_EQ(Bits(DType::kFloat16, "65504"), 0x7BFFu);
  EXPECT_EQ(Bits(DType::kFloat16, "5.960464477539063e-08"), 0x0001u);
  // Past the largest finite value by half a step or more: infinity.
  EXPECT_EQ(Bits(DType::kFloat16, "65520"), 0x7C00u);
  EXPECT_EQ(Bits(DType::kFloat32, "1e40"), 0x7F800000u);
  EXPECT_EQ(Bits(DType::kFloat64, "-1e400"), 0xFFF0000000000000u);
}

TEST(ElementTextTest, TiesGoToEvenUnlessTheTextLiesOffTheTie) {
  // 2049 lies halfway between float16's 2048 and 2050: even, 2048.
  EXPECT_EQ(Bits(DType::kFloat16, "2049"), 0x6800u);
  // A hair above the tie (too little for a double to hold): up, 2050.
  EXPECT_EQ(Bits(DType::kFloat16, "2049.0000000000000001"), 0x6801u);
  EXPECT_EQ(Bits(DType::kFloat16, "2048.9999999999999999"), 0x6800u);
  // 1 + 2^-8 is halfway between bfloat16's 1 and 1 + 2^-7.
  EXPECT_EQ(Bits(DType::kBfloat16, "1.00390625"), 0x3F80u);
  EXPECT_EQ(Bits(DType::kBfloat16, "1.00390625000000000001"), 0x3F81u);
}

TEST(ElementTextTest, SpecialsAreTheCanonicalOnes) {
  EXPECT_EQ(Bits(DType::kFloat16, "nan"), 0x7E00u);
  EXPECT_EQ(Bits(DType::kBfloat16, "nan"), 0x7FC0u);
  EXPECT_EQ(Bits(DType::kFloat32, "nan"), 0x7FC00000u);
  EXPECT_EQ(Bits(DType::kFloat64, "nan"), 0x7FF8000000000000u);
  EXPECT_EQ(Bits(DType::kFloat16, "-inf"), 0xFC00u);
  EXPECT_EQ(Bits(DType::kFloat32, "inf"), 0x7F800000u);
  EXPECT_EQ(Bits(DType::kFloat64, "-inf"), 0xFFF0000000000000u);
  for (const char* text : {"NaN", "-nan", "Infinity", "+inf", "0x1p3", "1,5", ""}) {
    EXPECT_THAT(ElementBitsFromText(DType::kFloat32, text, "v"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("float32 takes a number, \"nan\", \"inf\" or \"-inf\"")))
        << text;
  }
}

TEST(ElementTextTest, LongTextIsRefusedBeforeAnyParseAndQuotedShort) {
  EXPECT_THAT(ElementBitsFromText(DType::kFloat64, std::string(kMaxElementTextBytes + 1, '1'), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("v has 1025 characters; at most 1024 are read")));
  EXPECT_THAT(ElementBitsFromText(DType::kInt8, std::string(100, 'x'), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("v is \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\";")));
  // The longest text read is still exact.
  EXPECT_EQ(Bits(DType::kFloat32, "1." + std::string(kMaxElementTextBytes - 2, '0')), 0x3F800000u);
}

}  // namespace
}  // namespace tensorop
