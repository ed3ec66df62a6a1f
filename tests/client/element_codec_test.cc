// One element of each dtype between the case format's JSON values and
// little-endian bytes (client/element_codec.cc), both ways: integers in range
// and from strings, floats rounded once from their decimal text, the specials,
// bool, and what tensorctl prints reading back as the same bits.
#include "client/element_codec.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/case_format.h"
#include "client/exact_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/json_values.h"
#include "tests/support/status_matchers.h"

namespace tensorop::client {
namespace {

using ::tensorop::client::testing::IsOkAndHolds;
using ::tensorop::client::testing::LittleEndian;
using ::tensorop::testing::StatusIs;
using ::testing::Eq;

absl::StatusOr<HostTensor> Tensor(absl::string_view json) {
  absl::StatusOr<nlohmann::json> parsed = ParseJson(json);
  if (!parsed.ok()) return parsed.status();
  return TensorFromJson(*parsed);
}

// The data bytes of a one-dimensional tensor of `dtype` with JSON `values`.
absl::StatusOr<std::string> Encode(absl::string_view dtype, absl::string_view values) {
  absl::StatusOr<HostTensor> tensor =
      Tensor(absl::StrCat(R"({"dtype":")", dtype, R"(","sizes":[1],"data":)", values, "}"));
  if (!tensor.ok()) return tensor.status();
  return tensor->data;
}

TEST(TensorFromJsonTest, EncodesEveryDtypeLittleEndian) {
  EXPECT_THAT(Encode("float64", "[1.5, -0.0]"),
              IsOkAndHolds(LittleEndian({0x3FF8000000000000, 0x8000000000000000}, 8)));
  EXPECT_THAT(Encode("float32", "[0.1, -2]"),
              IsOkAndHolds(LittleEndian({0x3DCCCCCD, 0xC0000000}, 4)));
  EXPECT_THAT(Encode("float16", "[0.1, 65504, -2, 6e-8]"),
              IsOkAndHolds(LittleEndian({0x2E66, 0x7BFF, 0xC000, 0x0001}, 2)));
  EXPECT_THAT(Encode("int64", R"(["-9223372036854775808", 9223372036854775807])"),
              IsOkAndHolds(LittleEndian({0x8000000000000000, 0x7FFFFFFFFFFFFFFF}, 8)));
  EXPECT_THAT(Encode("int32", "[-1, 2147483647]"),
              IsOkAndHolds(LittleEndian({0xFFFFFFFF, 0x7FFFFFFF}, 4)));
  EXPECT_THAT(Encode("int16", "[-2, 3.0]"), IsOkAndHolds(LittleEndian({0xFFFE, 3}, 2)));
  EXPECT_THAT(Encode("int8", "[-128, 127]"), IsOkAndHolds(LittleEndian({0x80, 0x7F}, 1)));
  EXPECT_THAT(Encode("uint64", R"(["18446744073709551615", 18446744073709551614])"),
              IsOkAndHolds(LittleEndian({0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFE}, 8)));
  EXPECT_THAT(Encode("uint32", "[4294967295]"), IsOkAndHolds(LittleEndian({0xFFFFFFFF}, 4)));
  EXPECT_THAT(Encode("uint16", "[65535, -2e3]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data[1]: -2000.0 is out of range for uint16")));
  EXPECT_THAT(Encode("uint8", "[255, 0]"), IsOkAndHolds(LittleEndian({0xFF, 0}, 1)));
  EXPECT_THAT(Encode("bfloat16", "[0.1, -2, 3.3895313892515355e38, -0.0]"),
              IsOkAndHolds(LittleEndian({0x3DCD, 0xC000, 0x7F7F, 0x8000}, 2)));
  EXPECT_THAT(Encode("bool", "[true, false]"), IsOkAndHolds(LittleEndian({1, 0}, 1)));
  EXPECT_THAT(Encode("bool", "[true, 1]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data[1]: expected true or false (bool), got 1")));
}

TEST(TensorFromJsonTest, SixtyFourBitIntegersBeyondTwoTo53ComeFromStrings) {
  EXPECT_THAT(Encode("int64", R"(["9007199254740993", "-9007199254740993"])"),
              IsOkAndHolds(LittleEndian({0x20000000000001, 0xFFDFFFFFFFFFFFFF}, 8)));
  EXPECT_THAT(Encode("uint64", R"(["9223372036854775809"])"),
              IsOkAndHolds(LittleEndian({0x8000000000000001}, 8)));
  // JSON integers are read exactly too; JSON floats that large are not.
  EXPECT_THAT(Encode("int64", "[9007199254740993]"),
              IsOkAndHolds(LittleEndian({0x20000000000001}, 8)));
  EXPECT_THAT(Encode("int64", "[1e16]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data[0]: 1e+16 is too large for a JSON float to be exact; write it "
                          "as a string")));
  EXPECT_THAT(Encode("int64", "[9007199254740993.0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data[0]: 9.007199254740992e+15 is too large for a JSON float to be "
                          "exact; write it as a string")));
  EXPECT_THAT(Encode("int64", R"(["9223372036854775808"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "9223372036854775808" is out of range for int64)")));
  EXPECT_THAT(Encode("uint64", R"(["18446744073709551616"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "18446744073709551616" is out of range for uint64)")));
  EXPECT_THAT(Encode("uint64", R"(["-1"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "-1" is out of range for uint64)")));
  EXPECT_THAT(Encode("int32", R"(["0x10"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "0x10" is not a decimal integer)")));
}

TEST(TensorFromJsonTest, RejectsIntegersOutOfRangeOrFractional) {
  EXPECT_THAT(
      Encode("int16", "[1, 70000]"),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("data[1]: 70000 is out of range for int16")));
  EXPECT_THAT(Encode("uint8", "[256]"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 Eq("data[0]: 256 is out of range for uint8")));
  EXPECT_THAT(Encode("int32", "[1.5]"),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("data[0]: 1.5 is not an integer")));
  EXPECT_THAT(Encode("int32", R"(["nan"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "nan" is not a decimal integer)")));
  EXPECT_THAT(Encode("int8", "[true]"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 Eq("data[0]: expected an integer, got true")));
}

TEST(TensorFromJsonTest, NonFiniteFloatsFromStrings) {
  EXPECT_THAT(Encode("float16", R"(["nan", "inf", "-inf"])"),
              IsOkAndHolds(LittleEndian({0x7E00, 0x7C00, 0xFC00}, 2)));
  EXPECT_THAT(Encode("float32", R"(["nan", "inf", "-inf"])"),
              IsOkAndHolds(LittleEndian({0x7FC00000, 0x7F800000, 0xFF800000}, 4)));
  EXPECT_THAT(Encode("bfloat16", R"(["nan", "inf", "-inf"])"),
              IsOkAndHolds(LittleEndian({0x7FC0, 0x7F80, 0xFF80}, 2)));
  EXPECT_THAT(
      Encode("float64", R"(["nan", "inf", "-inf"])"),
      IsOkAndHolds(LittleEndian({0x7FF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000}, 8)));
  EXPECT_THAT(Encode("float32", R"(["NaN"])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(data[0]: "NaN" is not a number )"
                          R"((the strings are "nan", "inf", "-inf"))")));
}

// A decimal whose nearest double is exactly halfway between two float16 values
// must still round by the decimal: reading the double and rounding again would
// round these all to even.
TEST(TensorFromJsonTest, Float16RoundsTheDecimalTextOnce) {
  const std::pair<const char*, uint16_t> examples[] = {
      {"1.00048828125", 0x3C00},           // exactly halfway: to even
      {"1.00048828125000000001", 0x3C01},  // just above
      {"1.00048828124999999999", 0x3C00},  // just below
      {"1.00146484375", 0x3C02},           // halfway: to even, upwards
      {"1.00146484374999999999", 0x3C01},
      {"-65520.0000000000000001", 0xFC00},  // past the largest value's half ulp
      {"65519.9999999999999999", 0x7BFF},
  };
  for (const auto& [text, bits] : examples) {
    EXPECT_THAT(Encode("float16", absl::StrCat("[", text, "]")),
                IsOkAndHolds(LittleEndian({bits}, 2)))
        << text;
  }
}

TEST(TensorFromJsonTest, Bfloat16RoundsTheDecimalTextOnce) {
  const std::pair<const char*, uint16_t> examples[] = {
      {"1.00390625", 0x3F80},              // exactly halfway: to even
      {"1.00390625000000000001", 0x3F81},  // just above
      {"1.01171875", 0x3F82},              // halfway: to even, upwards
      {"1.01171874999999999999", 0x3F81},  // just below
  };
  for (const auto& [text, bits] : examples) {
    EXPECT_THAT(Encode("bfloat16", absl::StrCat("[", text, "]")),
                IsOkAndHolds(LittleEndian({bits}, 2)))
        << text;
  }
}

TEST(TensorFromJsonTest, Float32RoundsTheDecimalTextOnce) {
  EXPECT_THAT(Encode("float32", "[1.000000059604644775390625]"),
              IsOkAndHolds(LittleEndian({0x3F800000}, 4)));
  EXPECT_THAT(Encode("float32", "[1.0000000596046447753906250001]"),
              IsOkAndHolds(LittleEndian({0x3F800001}, 4)));
  EXPECT_THAT(Encode("float32", "[1.0000000596046447753906249999]"),
              IsOkAndHolds(LittleEndian({0x3F800000}, 4)));
  // The same text as float64 is simply its nearest double.
  EXPECT_THAT(Encode("float64", "[1.0000000596046447753906250001]"),
              IsOkAndHolds(LittleEndian({0x3FF0000010000000}, 8)));
}

TEST(TensorFromJsonTest, RejectsMalformedTensors) {
  EXPECT_THAT(
      Tensor(R"({"dtype":"complex64","sizes":[1],"data":[1]})"),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq(R"(dtype: "complex64" is not a dtype)")));
  EXPECT_THAT(Tensor(R"({"dtype":"int8","sizes":[1]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq(R"(missing field "data")")));
  EXPECT_THAT(
      Tensor(R"({"dtype":"int8","sizes":[1],"data":[1],"layout":"nhwc"})"),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq(R"(unknown field "layout" in a tensor)")));
  EXPECT_THAT(Tensor(R"({"dtype":"int8","sizes":[1,"x"],"data":[1]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq(R"(sizes[1]: "x" is not a decimal integer)")));
  EXPECT_THAT(Tensor(R"({"dtype":"int8","sizes":3,"data":[1]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("sizes: expected a list, got 3")));
}

TEST(ElementToJsonTest, RendersEachDtype) {
  auto render = [](v1::DType dtype, uint64_t bits) {
    const std::string bytes = LittleEndian({bits}, ElementSize(dtype));
    return ElementToJson(dtype, bytes.data());
  };
  EXPECT_EQ(render(v1::FLOAT64, std::bit_cast<uint64_t>(0.1)), "0.1");
  EXPECT_EQ(render(v1::FLOAT64, std::bit_cast<uint64_t>(-2.0)), "-2.0");
  EXPECT_EQ(render(v1::FLOAT64, std::bit_cast<uint64_t>(1e300)), "1e+300");
  EXPECT_EQ(render(v1::FLOAT64, 0x7FF8000000000001), "\"nan\"");
  EXPECT_EQ(render(v1::FLOAT32, std::bit_cast<uint32_t>(0.1f)), "0.1");
  EXPECT_EQ(render(v1::FLOAT32, std::bit_cast<uint32_t>(16777216.0f)), "16777216.0");
  EXPECT_EQ(render(v1::FLOAT32, std::bit_cast<uint32_t>(1e-7f)), "1e-07");
  EXPECT_EQ(render(v1::FLOAT32, 0x80000000), "-0.0");
  EXPECT_EQ(render(v1::FLOAT32, 0xFF800000), "\"-inf\"");
  EXPECT_EQ(render(v1::FLOAT16, 0x2E66), "0.099975586");
  EXPECT_EQ(render(v1::FLOAT16, 0x7BFF), "65504.0");
  EXPECT_EQ(render(v1::FLOAT16, 0x0001), "5.9604645e-08");
  EXPECT_EQ(render(v1::FLOAT16, 0x7C00), "\"inf\"");
  EXPECT_EQ(render(v1::FLOAT16, 0xFE00), "\"nan\"");
  EXPECT_EQ(render(v1::INT64, 9007199254740992), "9007199254740992");
  EXPECT_EQ(render(v1::INT64, 9007199254740993), "\"9007199254740993\"");
  EXPECT_EQ(render(v1::INT64, static_cast<uint64_t>(-9007199254740992)), "-9007199254740992");
  EXPECT_EQ(render(v1::INT64, static_cast<uint64_t>(-9007199254740993)), "\"-9007199254740993\"");
  EXPECT_EQ(render(v1::INT64, 0x8000000000000000), "\"-9223372036854775808\"");
  EXPECT_EQ(render(v1::UINT64, 0xFFFFFFFFFFFFFFFF), "\"18446744073709551615\"");
  EXPECT_EQ(render(v1::UINT64, 7), "7");
  EXPECT_EQ(render(v1::INT32, 0xFFFFFFFF), "-1");
  EXPECT_EQ(render(v1::UINT32, 0xFFFFFFFF), "4294967295");
  EXPECT_EQ(render(v1::INT16, 0x8000), "-32768");
  EXPECT_EQ(render(v1::UINT16, 0xFFFF), "65535");
  EXPECT_EQ(render(v1::INT8, 0x80), "-128");
  EXPECT_EQ(render(v1::UINT8, 0xFF), "255");
  EXPECT_EQ(render(v1::BFLOAT16, 0x3DCD), "0.100097656");
  EXPECT_EQ(render(v1::BFLOAT16, 0x8000), "-0.0");
  EXPECT_EQ(render(v1::BFLOAT16, 0xFF80), "\"-inf\"");
  EXPECT_EQ(render(v1::BFLOAT16, 0x7FC1), "\"nan\"");
  EXPECT_EQ(render(v1::BOOL, 1), "true");
  EXPECT_EQ(render(v1::BOOL, 0), "false");
  EXPECT_EQ(render(v1::BOOL, 2), "2");  // copied as it is, shown as it is
}

// Prints each of `values` (`width`-byte patterns of `dtype`, named `name` in
// the case format) as tensorctl does and reads all the texts back in one
// array: one parse, not one per value, keeps the loop cheap under ASan.
void ExpectTextsReadBack(v1::DType dtype, absl::string_view name, int width,
                         const std::vector<uint32_t>& values) {
  std::vector<std::string> texts;
  std::string bytes;
  for (uint32_t value : values) {
    const std::string element = LittleEndian({value}, width);
    texts.push_back(ElementToJson(dtype, element.data()));
    bytes += element;
  }
  absl::StatusOr<std::string> read =
      Encode(name, absl::StrCat("[", absl::StrJoin(texts, ","), "]"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), bytes.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(read->substr(i * width, width), bytes.substr(i * width, width))
        << name << " bits 0x" << std::hex << values[i] << " printed as " << texts[i];
  }
}

// What tensorctl prints reads back as the same bits: every float16 and bfloat16
// value, and float32 values drawn across the whole range.
TEST(ElementToJsonTest, FloatTextReadsBackExactly) {
  std::vector<uint32_t> float16, bfloat16, float32;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    // NaNs print as one text, so only their canonical pattern reads back.
    if (!((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0)) float16.push_back(bits);
    if (!((bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0)) bfloat16.push_back(bits);
  }
  std::mt19937 random(3);
  while (float32.size() < 200000) {
    const uint32_t bits = random();
    if (!std::isnan(std::bit_cast<float>(bits))) float32.push_back(bits);
  }
  ExpectTextsReadBack(v1::FLOAT16, "float16", 2, float16);
  ExpectTextsReadBack(v1::BFLOAT16, "bfloat16", 2, bfloat16);
  ExpectTextsReadBack(v1::FLOAT32, "float32", 4, float32);
}

}  // namespace
}  // namespace tensorop::client
