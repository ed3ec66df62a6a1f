// The case format read into requests and expectations, compared with results
// and rendered back. One element's encoding both ways is element_codec_test.cc.
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
#include "core/float_rounding.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/client/json_values.h"
#include "tests/support/status_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::client::testing::IsOkAndHolds;
using ::tensorop::client::testing::LittleEndian;
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

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
  EXPECT_THAT(CaseWith(first + R"("then": [{"op": "matmul"}])"),
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
  EXPECT_THAT(CaseWith(R"("op": "matmul", "inputs": {})"),
              is_invalid(R"(op: unknown operator "matmul")"));
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
