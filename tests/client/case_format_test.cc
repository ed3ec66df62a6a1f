// The case format read into requests and expectations (about 660 lines: one
// suite per reader, tensors, cases and later steps, kept with the format).
#include "client/case_format.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "client/case_compare.h"
#include "client/element_codec.h"
#include "client/exact_json.h"
#include "client/float_rounding.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

// The value of an OK StatusOr matches `matcher` (gMock's Optional() does not
// take a StatusOr, and Debian's Abseil has no status matchers).
MATCHER_P(IsOkAndHolds, matcher, "") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

// `values` little-endian, `size` bytes each.
std::string LittleEndian(std::initializer_list<uint64_t> values, int size) {
  std::string bytes;
  for (uint64_t value : values) {
    for (int i = 0; i < size; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
  return bytes;
}

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

absl::StatusOr<Case> OneCase(absl::string_view json) {
  absl::StatusOr<nlohmann::json> parsed = ParseJson(json);
  if (!parsed.ok()) return parsed.status();
  return CaseFromJson(*parsed);
}

// A slice case returning a uint8 [2,3] tensor [[1,2,3],[4,5,6]]; `outputs` is
// the case's "outputs" entry.
Case Uint8Case(absl::string_view outputs = R"([{"sizes":[2,3]}])") {
  absl::StatusOr<Case> c = OneCase(absl::StrCat(R"({
    "name": "slice/example", "op": "slice",
    "inputs": {"input": {"dtype": "uint8", "sizes": [2,3], "data": [1,2,3,4,5,6]}},
    "attrs": {"offsets": [0,0], "window_sizes": [2,3], "window_strides": [1,1]},
    "outputs": )",
                                                outputs, R"(,
    "expect": {"outputs": [{"dtype": "uint8", "sizes": [2,3], "data": [1,2,3,4,5,6]}]}})"));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

Result OneOutput(HostTensor tensor) {
  Result result;
  result.backend = "cpu";
  result.outputs.push_back(std::move(tensor));
  return result;
}

HostTensor Uint8(std::vector<int64_t> sizes, std::vector<int64_t> strides, std::string data) {
  return HostTensor{v1::UINT8, std::move(sizes), std::move(strides), std::move(data)};
}

// ---- Reading values ---------------------------------------------------------

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

// ---- Cases ------------------------------------------------------------------

TEST(CaseFromJsonTest, BuildsTheRequestOfTheFormatsExample) {
  ASSERT_OK_AND_ASSIGN(const Case c, OneCase(R"({
    "name": "slice/doc_example_1",
    "source": "DML_SLICE1_OPERATOR_DESC, example 1",
    "op": "slice",
    "inputs": {"input": {"dtype": "float32", "sizes": [1,1,4,4],
                         "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}},
    "attrs": {"offsets": [0,0,0,1], "window_sizes": [1,1,4,3], "window_strides": [1,1,2,2]},
    "outputs": [{"sizes": [1,1,2,2]}],
    "expect": {"outputs": [{"dtype": "float32", "sizes": [1,1,2,2], "data": [2,4,10,12]}]}
  })"));
  v1::RunRequest expected;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
                                                              id: "slice/doc_example_1"
                                                              slice {
                                                                offsets: [ 0, 0, 0, 1 ]
                                                                window_sizes: [ 1, 1, 4, 3 ]
                                                                window_strides: [ 1, 1, 2, 2 ]
                                                              }
                                                              outputs { sizes: [ 1, 1, 2, 2 ] }
                                                            )pb",
                                                            &expected));
  v1::Tensor& input = (*expected.mutable_inputs())["input"];
  input.set_dtype(v1::FLOAT32);
  for (int64_t size : {1, 1, 4, 4}) input.add_sizes(size);
  for (int i = 1; i <= 16; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(i));
    input.mutable_data()->append(LittleEndian({bits}, 4));
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(c.request, expected))
      << c.request.DebugString();
  EXPECT_EQ(c.name, "slice/doc_example_1");
  EXPECT_EQ(c.expected_error, absl::StatusCode::kOk);
  ASSERT_EQ(c.expected_outputs.size(), 1u);
  EXPECT_EQ(c.expected_outputs[0].dtype, v1::FLOAT32);
  EXPECT_EQ(c.expected_outputs[0].sizes, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(c.expected_outputs[0].data,
            LittleEndian({0x40000000, 0x40800000, 0x41200000, 0x41400000}, 4));
}

TEST(CaseFromJsonTest, ExpectedTensorsMustHoldExactlyTheirElements) {
  EXPECT_THAT(OneCase(R"({"name": "split/x", "op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "int32", "sizes": [4], "data": [1,2,3,4]}},
      "outputs": [{"sizes": [4]}],
      "expect": {"outputs": [{"dtype": "int32", "sizes": [2,2], "data": [1,2,3]}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("expect: outputs[0]: sizes [2,2] hold 4 elements but data has 3 "
                          "values")));
  EXPECT_THAT(OneCase(R"({"name": "split/x", "op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "int32", "sizes": [4], "data": [1,2,3,4]}},
      "expect": {"outputs": [{"dtype": "int32", "sizes": [2,2], "strides": [2,1],
                              "data": [1,2,3,4]}]}})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expect: outputs[0]: strides: an expected tensor lists its "
                                 "values packed")));
}

// Input data counts are the server's to check: the public cases include a buffer
// that is too small on purpose.
TEST(CaseFromJsonTest, SendsInputsWithTheWrongCountAsWritten) {
  ASSERT_OK_AND_ASSIGN(const Case c, OneCase(R"({"name": "slice/short", "op": "slice",
      "inputs": {"input": {"dtype": "float32", "sizes": [2,2], "data": [1,2,3]}},
      "attrs": {"offsets": [0,0], "window_sizes": [2,2], "window_strides": [1,1]},
      "outputs": [{"sizes": [2,2]}], "expect": {"error": "INVALID_ARGUMENT"}})"));
  EXPECT_EQ(c.request.inputs().at("input").data().size(), 12u);
  EXPECT_EQ(c.expected_error, absl::StatusCode::kInvalidArgument);
}

// A case {"name": "a/b", <fields>, "expect": {"error": "INTERNAL"}}.
absl::StatusOr<Case> CaseWith(absl::string_view fields) {
  return OneCase(
      absl::StrCat(R"({"name": "a/b", )", fields, R"(, "expect": {"error": "INTERNAL"}})"));
}

// tensorop's extension: later steps reading the output before them.
TEST(CaseFromJsonTest, LaterStepsReadTheOutputBeforeThem) {
  ASSERT_OK_AND_ASSIGN(const Case c, CaseWith(R"("op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "int32", "sizes": [4], "data": [1,2,3,4]}},
      "outputs": [{"sizes": [1]}, {"sizes": [3]}],
      "then": [{"from": 1, "op": "slice", "outputs": [{"sizes": [2]}],
                "attrs": {"offsets": [0], "window_sizes": [3], "window_strides": [-2]}},
               {"op": "scatter_elements", "attrs": {"axis": 0},
                "inputs": {"indices": {"dtype": "int64", "sizes": [1], "data": [0]},
                           "updates": {"dtype": "int32", "sizes": [1], "data": [9]}}}])"));
  ASSERT_EQ(c.then.size(), 2u);
  EXPECT_EQ(c.then[0].from, 1);
  EXPECT_EQ(c.then[0].request.id(), "a/b then[0]");
  EXPECT_THAT(c.then[0].request.slice().window_strides(), ElementsAre(-2));
  EXPECT_TRUE(c.then[0].request.inputs().empty());
  EXPECT_EQ(c.then[1].from, 0);
  EXPECT_TRUE(c.then[1].request.has_scatter_elements());
  EXPECT_EQ(c.then[1].request.inputs().size(), 2u);  // indices, updates: "input" comes later
}

TEST(CaseFromJsonTest, RejectsMalformedLaterSteps) {
  const std::string first = R"("op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "int32", "sizes": [1], "data": [1]}},
      "outputs": [{"sizes": [1]}], )";
  EXPECT_THAT(
      CaseWith(first + R"("then": [])"),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("then: expected a list of steps, got []")));
  EXPECT_THAT(CaseWith(first + R"("then": [{"op": "split", "attrs": {"axis": 0}, "from": -1}])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("then[0].from: expected an output index, got -1")));
  EXPECT_THAT(
      CaseWith(first + R"("then": [{"op": "split", "attrs": {"axis": 0},
          "inputs": {"input": {"dtype": "int32", "sizes": [1], "data": [1]}}}])"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("then[0].inputs.input: a later step's input is the output of the step "
                         "before it")));
  EXPECT_THAT(CaseWith(first + R"("then": [{"op": "transpose"}])"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("then[0].op")));
}

TEST(CaseFromJsonTest, AnInputMayNameAHandle) {
  ASSERT_OK_AND_ASSIGN(const Case c, CaseWith(R"("op": "split", "attrs": {"axis": 0},
                                                 "inputs": {"input": {"handle": "0123abcd"}})"));
  EXPECT_EQ(c.request.inputs().at("input").handle().id(), "0123abcd");
  EXPECT_EQ(c.request.inputs().at("input").sizes_size(), 0);
}

TEST(CaseFromJsonTest, NamesTheFieldThatIsWrong) {
  const auto is_invalid = [](absl::string_view message) {
    return StatusIs(absl::StatusCode::kInvalidArgument, Eq(std::string(message)));
  };
  EXPECT_THAT(CaseWith(R"("op": "split", "attrs": {"axis": 0}, "inputs": {
                            "input": {"dtype": "int16", "sizes": [2], "data": [1, 7e4]}})"),
              is_invalid("inputs.input: data[1]: 70000.0 is out of range for int16"));
  EXPECT_THAT(CaseWith(R"("op": "split", "inputs": {"input": {"handle": 7}})"),
              is_invalid(R"(inputs.input: a handle input is {"handle": "ID"}, got {"handle":7})"));
  EXPECT_THAT(CaseWith(R"("op": "transpose", "inputs": {})"),
              is_invalid(R"(op: unknown operator "transpose")"));
  EXPECT_THAT(CaseWith(R"("op": "slice", "attrs": {"axes": [0]}, "inputs": {})"),
              is_invalid("attrs.axes: not an attribute of slice"));
  EXPECT_THAT(CaseWith(R"("op": "slice", "attrs": {"offsets": [0, "a"]}, "inputs": {})"),
              is_invalid(R"(attrs.offsets[1]: "a" is not a decimal integer)"));
  EXPECT_THAT(CaseWith(R"("op": "split", "attrs": {"axis": [0]}, "inputs": {})"),
              is_invalid("attrs.axis: expected an integer, got [0]"));
  EXPECT_THAT(CaseWith(R"("op": "split", "inputs": {},
                          "outputs": [{"sizes": [1], "stride": [1]}])"),
              is_invalid(R"(outputs[0]: unknown field "stride" in an output)"));
  EXPECT_THAT(OneCase(R"({"op": "split", "inputs": {}, "expect": {"error": "INTERNAL"}})"),
              is_invalid(R"(missing field "name")"));
  for (const char* code : {"BAD", "OK"}) {
    EXPECT_THAT(
        OneCase(absl::StrCat(R"({"name": "a/b", "op": "split", "inputs": {},)",
                             R"( "expect": {"error": ")", code, R"("}})")),
        is_invalid(absl::StrCat("expect: error: \"", code, "\" is not a gRPC error code name")));
  }
  EXPECT_THAT(OneCase(R"({"name": "a/b", "op": "split", "inputs": {},
                          "expect": {"error": "INTERNAL", "outputs": []}})"),
              is_invalid(R"(expect: needs exactly one of "outputs" and "error")"));
}

TEST(ParseCasesTest, KeepsGoingPastAMalformedCase) {
  ASSERT_OK_AND_ASSIGN(const std::vector<LoadedCase> cases, ParseCases(R"([
    {"name": "bad/dtype", "op": "split",
     "inputs": {"input": {"dtype": "f32", "sizes": [1], "data": [1]}},
     "expect": {"error": "INVALID_ARGUMENT"}},
    {"op": "split"},
    {"name": "good/one", "op": "split", "attrs": {"axis": 0},
     "inputs": {"input": {"dtype": "float32", "sizes": [1], "data": [1]}},
     "outputs": [{"sizes": [1]}],
     "expect": {"outputs": [{"dtype": "float32", "sizes": [1], "data": [1]}]}}
  ])"));
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].name, "bad/dtype");
  EXPECT_THAT(cases[0].parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                                        Eq(R"(inputs.input: dtype: "f32" is not a dtype)")));
  EXPECT_EQ(cases[1].name, "#1");
  EXPECT_THAT(cases[1].parsed,
              StatusIs(absl::StatusCode::kInvalidArgument, Eq(R"(missing field "name")")));
  EXPECT_EQ(cases[2].name, "good/one");
  ASSERT_TRUE(cases[2].parsed.ok()) << cases[2].parsed.status();
  EXPECT_EQ(cases[2].parsed->request.id(), "good/one");
}

TEST(ParseCasesTest, RejectsTextThatHoldsNoCases) {
  EXPECT_THAT(ParseCases("[{\"name\": 1,"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parse error")));
  EXPECT_THAT(ParseCases("42"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("a case file holds a case object or an array of cases")));
}

TEST(LoadCasesTest, ReadsEveryPublicCase) {
  ASSERT_OK_AND_ASSIGN(const std::vector<LoadedCase> cases,
                       LoadCases(tensorop::testing::ConformanceCasesDir()));
  ASSERT_FALSE(cases.empty());
  std::set<std::string> names;
  for (const LoadedCase& loaded : cases) {
    EXPECT_TRUE(loaded.parsed.ok()) << loaded.name << ": " << loaded.parsed.status();
    EXPECT_TRUE(names.insert(loaded.name).second) << "duplicate name " << loaded.name;
  }
}

TEST(LoadCasesTest, MissingPathIsNotFound) {
  EXPECT_THAT(LoadCases("/nonexistent/cases.json"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/cases.json")));
}

// ---- Comparing --------------------------------------------------------------

TEST(FindMismatchTest, ReadsOutputsThroughTheirStrides) {
  const Case c = Uint8Case();
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {}, "\1\2\3\4\5\6"))), std::nullopt);
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {3, 1}, "\1\2\3\4\5\6"))), std::nullopt);
  // Column-major.
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {1, 2}, "\1\4\2\5\3\6"))), std::nullopt);
  // Padded rows: the padding is never read.
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {4, 1}, std::string("\1\2\3\x63\4\5\6", 7)))),
            std::nullopt);
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {1, 2}, "\1\4\2\5\3\7"))),
            "outputs[0]: element [1,2] is 7, expected 6 (1 of 6 elements differ)");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {1, 2}, "\1\2\3\4\5\6"))),
            "outputs[0]: element [0,1] is 3, expected 2 (4 of 6 elements differ)");
}

TEST(FindMismatchTest, ChecksStridesOnlyWhereTheCaseAskedForThem) {
  const Case with_strides = Uint8Case(R"([{"sizes":[2,3], "strides":[1,2]}])");
  EXPECT_EQ(FindMismatch(with_strides, OneOutput(Uint8({2, 3}, {1, 2}, "\1\4\2\5\3\6"))),
            std::nullopt);
  EXPECT_EQ(FindMismatch(with_strides, OneOutput(Uint8({2, 3}, {3, 1}, "\1\2\3\4\5\6"))),
            "outputs[0]: strides are [3,1], expected [1,2]");
}

TEST(FindMismatchTest, ComparesDtypeSizesAndCount) {
  const Case c = Uint8Case();
  EXPECT_EQ(FindMismatch(c, OneOutput(HostTensor{v1::INT8, {2, 3}, {}, "\1\2\3\4\5\6"})),
            "outputs[0]: dtype is int8 (7), expected uint8");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({3, 2}, {}, "\1\2\3\4\5\6"))),
            "outputs[0]: sizes are [3,2], expected [2,3]");
  Result two = OneOutput(Uint8({2, 3}, {}, "\1\2\3\4\5\6"));
  two.outputs.push_back(two.outputs[0]);
  EXPECT_EQ(FindMismatch(c, two), "expected 1 outputs, got 2");
  EXPECT_EQ(FindMismatch(c, absl::InvalidArgumentError("slice.window_strides[0] must not be 0")),
            "expected outputs, got INVALID_ARGUMENT: slice.window_strides[0] must not be 0");
}

TEST(FindMismatchTest, ComparesFloatsBitForBit) {
  ASSERT_OK_AND_ASSIGN(Case c, OneCase(R"({"name": "split/f", "op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "float32", "sizes": [2], "data": [-0.0, "nan"]}},
      "outputs": [{"sizes": [2]}],
      "expect": {"outputs": [{"dtype": "float32", "sizes": [2], "data": [-0.0, "nan"]}]}})"));
  auto output = [](uint32_t first, uint32_t second) {
    return OneOutput(HostTensor{v1::FLOAT32, {2}, {1}, LittleEndian({first, second}, 4)});
  };
  EXPECT_EQ(FindMismatch(c, output(0x80000000, 0x7FC00000)), std::nullopt);
  EXPECT_EQ(FindMismatch(c, output(0x00000000, 0x7FC00000)),
            "outputs[0]: element [0] is 0.0, expected -0.0 (1 of 2 elements differ)");
  EXPECT_EQ(FindMismatch(c, output(0x80000000, 0x7FC00001)),
            "outputs[0]: element [1] is \"nan\" (bits 0x7fc00001), expected \"nan\" "
            "(bits 0x7fc00000) (1 of 2 elements differ)");
}

TEST(FindMismatchTest, NeverReadsPastTheData) {
  const Case c = Uint8Case();
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {3, 1}, "\1\2\3\4\5"))),
            "outputs[0]: data holds 5 bytes but strides [3,1] over sizes [2,3] reach 6");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {INT64_MAX, 1}, "\1\2\3\4\5\6"))),
            "outputs[0]: strides [9223372036854775807,1] over sizes [2,3] overflow 64 bits");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {-3, 1}, "\1\2\3\4\5\6"))),
            "outputs[0]: strides[0] is negative (-3)");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {1}, "\1\2\3\4\5\6"))),
            "outputs[0]: strides [1] do not match sizes [2,3]");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({2, 3}, {}, "\1\2\3\4\5\6\7"))),
            "outputs[0]: data holds 7 bytes but packed sizes [2,3] need 6");
}

TEST(FindMismatchTest, ExpectedErrorsMatchByCode) {
  ASSERT_OK_AND_ASSIGN(const Case c, OneCase(R"({"name": "split/bad", "op": "split",
      "inputs": {}, "expect": {"error": "INVALID_ARGUMENT"}})"));
  EXPECT_EQ(FindMismatch(c, absl::InvalidArgumentError("split.axis is 5")), std::nullopt);
  EXPECT_EQ(FindMismatch(c, absl::ResourceExhaustedError("too big")),
            "expected INVALID_ARGUMENT, got RESOURCE_EXHAUSTED: too big");
  EXPECT_EQ(FindMismatch(c, OneOutput(Uint8({1}, {}, "\1"))),
            "expected INVALID_ARGUMENT, got 1 outputs from cpu");
}

// ---- Rendering --------------------------------------------------------------

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

// What tensorctl prints reads back as the same bits: every float16 and bfloat16
// value, and float32 values across the whole range.
TEST(ElementToJsonTest, FloatTextReadsBackExactly) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0) continue;  // NaN: one text
    const std::string bytes = LittleEndian({bits}, 2);
    const std::string text = ElementToJson(v1::FLOAT16, bytes.data());
    ASSERT_THAT(Encode("float16", absl::StrCat("[", text, "]")), IsOkAndHolds(bytes)) << text;
  }
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    if ((bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0) continue;  // NaN: one text
    const std::string bytes = LittleEndian({bits}, 2);
    const std::string text = ElementToJson(v1::BFLOAT16, bytes.data());
    ASSERT_THAT(Encode("bfloat16", absl::StrCat("[", text, "]")), IsOkAndHolds(bytes)) << text;
  }
  std::mt19937 random(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = random();
    if (std::isnan(std::bit_cast<float>(bits))) continue;
    const std::string bytes = LittleEndian({bits}, 4);
    const std::string text = ElementToJson(v1::FLOAT32, bytes.data());
    ASSERT_THAT(Encode("float32", absl::StrCat("[", text, "]")), IsOkAndHolds(bytes)) << text;
  }
}

TEST(TensorToJsonTest, PacksLogicalValuesAndKeepsStrides) {
  EXPECT_THAT(TensorToJson(Uint8({2, 3}, {1, 2}, "\1\4\2\5\3\6")),
              IsOkAndHolds(Eq(R"({"dtype":"uint8","sizes":[2,3],"strides":[1,2],)"
                              R"("data":[1,2,3,4,5,6]})")));
  EXPECT_THAT(TensorToJson(Uint8({2, 3}, {0, 1}, "\1\2\3")),
              IsOkAndHolds(Eq(R"({"dtype":"uint8","sizes":[2,3],"strides":[0,1],)"
                              R"("data":[1,2,3,1,2,3]})")));
  EXPECT_THAT(TensorToJson(Uint8({2, 3}, {}, "\1\2\3\4\5\6")),
              IsOkAndHolds(Eq(R"({"dtype":"uint8","sizes":[2,3],"strides":[3,1],)"
                              R"("data":[1,2,3,4,5,6]})")));
  EXPECT_THAT(TensorToJson(HostTensor{v1::FLOAT32, {}, {}, LittleEndian({0x40A00000}, 4)}),
              IsOkAndHolds(Eq(R"({"dtype":"float32","sizes":[],"strides":[],"data":[5.0]})")));
  EXPECT_THAT(TensorToJson(HostTensor{v1::INT32, {0, 3}, {3, 1}, ""}),
              IsOkAndHolds(Eq(R"({"dtype":"int32","sizes":[0,3],"strides":[3,1],"data":[]})")));
  EXPECT_THAT(TensorToJson(Uint8({2, 3}, {3, 1}, "\1\2")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data holds 2 bytes but strides [3,1] over sizes [2,3] reach 6")));
  EXPECT_THAT(TensorToJson(HostTensor{static_cast<v1::DType>(42), {1}, {}, "\1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("dtype 42 is not an element type")));
  EXPECT_THAT(TensorToJson(Uint8({int64_t{1} << 32}, {0}, "\1")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("sizes [4294967296] hold more than 4294967295 elements")));
}

v1::TensorHandle SampleHandle() {
  v1::TensorHandle handle;
  handle.set_id("0123456789abcdef0123456789abcdef");
  handle.set_replica("10.0.0.1:50051");
  handle.set_dtype(v1::INT16);
  handle.add_sizes(2);
  handle.add_sizes(3);
  handle.add_strides(4);
  handle.add_strides(1);
  handle.set_backend("cpu");
  handle.set_byte_size(14);
  handle.set_expires_unix_ms(1700000060000);
  handle.set_last_use_unix_ms(1700000000000);
  return handle;
}

TEST(HandleToJsonTest, RendersEveryField) {
  EXPECT_EQ(HandleToJson(SampleHandle()),
            R"({"id":"0123456789abcdef0123456789abcdef","replica":"10.0.0.1:50051",)"
            R"("dtype":"int16","sizes":[2,3],"strides":[4,1],"backend":"cpu","device_index":0,)"
            R"("byte_size":14,"expires_unix_ms":1700000060000,"last_use_unix_ms":1700000000000})");
}

TEST(TensorToJsonTest, AKeptOutputShowsItsHandleInPlaceOfData) {
  HostTensor kept{v1::INT16, {2, 3}, {4, 1}, ""};
  kept.handle = SampleHandle();
  EXPECT_THAT(TensorToJson(kept),
              IsOkAndHolds(Eq(absl::StrCat(R"({"dtype":"int16","sizes":[2,3],"strides":[4,1],)",
                                           R"("handle":)", HandleToJson(SampleHandle()), "}"))));
  const std::string line = RunLineJson("slice/kept", Result{{kept}, "cpu"});
  ASSERT_TRUE(nlohmann::json::accept(line)) << line;
  EXPECT_EQ(nlohmann::json::parse(line)["outputs"][0]["handle"]["id"],
            "0123456789abcdef0123456789abcdef");
}

TEST(LayoutBytesTest, PackedStridedAndEmpty) {
  EXPECT_THAT(LayoutBytes(HostTensor{v1::INT16, {2, 3}, {}, ""}), IsOkAndHolds(12));
  // Padded rows: the last row ends at element 1 + 4 + 2 = 7.
  EXPECT_THAT(LayoutBytes(HostTensor{v1::INT16, {2, 3}, {4, 1}, ""}), IsOkAndHolds(14));
  EXPECT_THAT(LayoutBytes(HostTensor{v1::UINT8, {5, 3}, {0, 1}, ""}), IsOkAndHolds(3));
  EXPECT_THAT(LayoutBytes(HostTensor{v1::UINT8, {0, 3}, {9, 1}, ""}), IsOkAndHolds(0));
  EXPECT_THAT(LayoutBytes(HostTensor{v1::UINT8, {2}, {-1}, ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("strides[0] is negative (-1)")));
  // The data does not matter to LayoutBytes; CheckLayout wants enough of it.
  EXPECT_THAT(CheckLayout(HostTensor{v1::UINT8, {2, 3}, {4, 1}, "abcdefg"}), IsOkAndHolds(6));
  EXPECT_THAT(CheckLayout(HostTensor{v1::UINT8, {2, 3}, {4, 1}, "abcdef"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("data holds 6 bytes but strides [4,1] over sizes [2,3] reach 7")));
}

TEST(RunLineJsonTest, RendersResultsAndErrors) {
  EXPECT_EQ(RunLineJson("slice/a", OneOutput(Uint8({2}, {1}, "\1\2"))),
            R"({"name":"slice/a","backend":"cpu","outputs":[)"
            R"({"dtype":"uint8","sizes":[2],"strides":[1],"data":[1,2]}]})");
  EXPECT_EQ(RunLineJson("slice/b", absl::InvalidArgumentError("a \"quoted\" message")),
            R"({"name":"slice/b","error":{"code":"INVALID_ARGUMENT",)"
            R"("message":"a \"quoted\" message"}})");
  // Bytes that are not UTF-8 in a server's message do not break the line.
  const std::string line = RunLineJson("x", absl::InternalError("bad \xff byte"));
  EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  EXPECT_EQ(RunLineJson("x", OneOutput(Uint8({2}, {1}, "\1"))),
            R"({"name":"x","error":{"code":"INTERNAL","message":)"
            R"("output 0: data holds 1 bytes but strides [1] over sizes [2] reach 2"}})");
}

TEST(StatusCodeFromNameTest, KnowsTheGrpcNames) {
  EXPECT_EQ(StatusCodeFromName("INVALID_ARGUMENT"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusCodeFromName("RESOURCE_EXHAUSTED"), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeFromName("UNAUTHENTICATED"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeFromName("invalid_argument"), std::nullopt);
}

}  // namespace
}  // namespace tensorop::client
