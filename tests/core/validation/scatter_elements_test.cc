// ScatterElements validation (core/validate/scatter_elements.h and the input
// binding of core/operator.h): every rule of OPERATORS.md "ScatterElements" with
// its exact status code and message, including the range of every index value.
#include "core/validate/scatter_elements.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/held_tensor.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::HeldTensor;
using ::tensorop::testing::StatusIs;
using ::tensorop::testing::Values;
using ::tensorop::testing::Zeros;
using ::testing::ElementsAre;
using ::testing::Eq;

class ScatterElementsValidationTest : public ::testing::Test {
 protected:
  // Default request: input float32 [3, 4], indices int32 [2, 4] (all 0),
  // updates float32 [2, 4], axis 0.
  ScatterElementsValidationTest()
      : input_(Zeros(DType::kFloat32, {3, 4})),
        indices_(Zeros(DType::kInt32, {2, 4})),
        updates_(Zeros(DType::kFloat32, {2, 4})) {}

  absl::StatusOr<ScatterElementsGeometry> Run(int64_t axis, std::vector<OutputDesc> outputs = {}) {
    outputs_ = std::move(outputs);
    return ValidateScatterElements(ScatterElementsAttrs{axis}, input_.view(), indices_.view(),
                                   updates_.view(), outputs_, limits_);
  }

  HeldTensor input_;
  HeldTensor indices_;
  HeldTensor updates_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

// --- Tensors -----------------------------------------------------------------------

TEST_F(ScatterElementsValidationTest, DefaultRequestIsValid) {
  ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0));
  EXPECT_EQ(geometry.axis, 0);
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3, 4));
  EXPECT_THAT(geometry.output.strides, ElementsAre(4, 1));
  EXPECT_EQ(geometry.output.dtype, DType::kFloat32);
  EXPECT_EQ(geometry.indices.dtype, DType::kInt32);
}

TEST_F(ScatterElementsValidationTest, InputRankNineIsRejected) {
  input_ = Zeros(DType::kFloat32, std::vector<int64_t>(9, 1));
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("input.sizes has 9 dimensions; scatter_elements takes "
                                  "rank 1..8")));
}

TEST_F(ScatterElementsValidationTest, IndicesZeroSizeIsRejected) {
  indices_ = Zeros(DType::kInt32, {0, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.sizes[0] must be >= 1, got 0")));
}

TEST_F(ScatterElementsValidationTest, UpdatesDataIsCheckedUnderItsOwnName) {
  updates_.bytes.resize(28);
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("updates.data has 28 bytes; packed float32 [2, 4] needs "
                                  "exactly 32")));
}

TEST_F(ScatterElementsValidationTest, IndicesRankMismatchIsRejected) {
  indices_ = Zeros(DType::kInt32, {8});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices has rank 1; input has rank 2")));
}

TEST_F(ScatterElementsValidationTest, UpdatesRankMismatchIsRejected) {
  updates_ = Zeros(DType::kFloat32, {2, 4, 1});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("updates has rank 3; input has rank 2")));
}

TEST_F(ScatterElementsValidationTest, AxisEqualToRankIsRejected) {
  EXPECT_THAT(Run(2), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("scatter_elements.axis = 2 is outside [0, 2)")));
}

TEST_F(ScatterElementsValidationTest, NegativeAxisIsRejected) {
  EXPECT_THAT(Run(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("scatter_elements.axis = -1 is outside [0, 2)")));
}

// --- Dtypes --------------------------------------------------------------------------

TEST_F(ScatterElementsValidationTest, FloatIndicesAreRejected) {
  indices_ = Zeros(DType::kFloat32, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is float32; it must be int32, int64, "
                                  "uint32 or uint64")));
}

TEST_F(ScatterElementsValidationTest, Uint16IndicesAreRejected) {
  indices_ = Zeros(DType::kUint16, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is uint16; it must be int32, int64, "
                                  "uint32 or uint64")));
}

// Neither is an index dtype (OPERATORS.md, Tensors), though bool is one byte
// and bfloat16 two, as uint8 and uint16 are.
TEST_F(ScatterElementsValidationTest, BoolAndBfloat16IndicesAreRejected) {
  indices_ = Zeros(DType::kBool, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is bool; it must be int32, int64, "
                                  "uint32 or uint64")));
  indices_ = Zeros(DType::kBfloat16, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is bfloat16; it must be int32, int64, "
                                  "uint32 or uint64")));
}

TEST_F(ScatterElementsValidationTest, Int8IndicesAreRejected) {
  indices_ = Zeros(DType::kInt8, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is int8; it must be int32, int64, "
                                  "uint32 or uint64")));
}

TEST_F(ScatterElementsValidationTest, EveryIndexDtypeIsAccepted) {
  for (DType dtype : {DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64}) {
    SCOPED_TRACE(DTypeName(dtype));
    indices_ = Zeros(dtype, {2, 4});
    ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0));
    EXPECT_EQ(geometry.indices.dtype, dtype);
  }
}

TEST_F(ScatterElementsValidationTest, UpdatesDtypeOtherThanInputIsRejected) {
  updates_ = Zeros(DType::kFloat64, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("updates.dtype is float64; input.dtype is float32")));
}

// --- Sizes ----------------------------------------------------------------------------

TEST_F(ScatterElementsValidationTest, UpdatesSizesOtherThanIndicesAreRejected) {
  updates_ = Zeros(DType::kFloat32, {1, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("updates.sizes[0] = 1 must equal indices.sizes[0] = 2")));
}

TEST_F(ScatterElementsValidationTest, IndicesSizeOtherThanInputOutsideAxisIsRejected) {
  indices_ = Zeros(DType::kInt32, {2, 3});
  updates_ = Zeros(DType::kFloat32, {2, 3});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.sizes[1] = 3 must equal input.sizes[1] = 4 "
                                  "(only scatter_elements.axis = 0 may differ)")));
}

TEST_F(ScatterElementsValidationTest, IndicesLongerThanInputAlongAxisAreAccepted) {
  indices_ = Zeros(DType::kInt32, {5, 4});
  updates_ = Zeros(DType::kFloat32, {5, 4});
  ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0));
  EXPECT_THAT(geometry.indices.sizes, ElementsAre(5, 4));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3, 4));
}

// --- Outputs ----------------------------------------------------------------------------

TEST_F(ScatterElementsValidationTest, TwoOutputsAreRejected) {
  EXPECT_THAT(Run(0, {OutputDesc{{3, 4}, {}}, OutputDesc{{3, 4}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 2 entries; scatter_elements has exactly one output")));
}

TEST_F(ScatterElementsValidationTest, OutputSizesOtherThanInputAreRejected) {
  EXPECT_THAT(Run(0, {OutputDesc{{3, 3}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [3, 3]; scatter_elements produces [3, 4]")));
}

TEST_F(ScatterElementsValidationTest, OutputStridesAreValidated) {
  EXPECT_THAT(Run(0, {OutputDesc{{3, 4}, {4, 0}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides[1] must be >= 1, got 0")));
}

TEST_F(ScatterElementsValidationTest, OutputColumnMajorLayoutIsKept) {
  ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0, {OutputDesc{{3, 4}, {1, 3}}}));
  EXPECT_THAT(geometry.output.strides, ElementsAre(1, 3));
}

// --- Index values -------------------------------------------------------------------------

TEST_F(ScatterElementsValidationTest, Int32IndexEqualToAxisSizeNamesCoordinatesAndValue) {
  indices_ = Values<int32_t>(DType::kInt32, {2, 4}, {0, 1, 2, 0, 1, 2, 3, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 2] = 3 is outside [-3, 3) for input.sizes[0] "
                                  "= 3 (scatter_elements.axis = 0)")));
}

// Packed indices are scanned in blocks of 2^20 values; a bad value in a later
// block is still named by its coordinates, and a valid tensor passes whole.
TEST_F(ScatterElementsValidationTest, ABadIndexPastTheFirstScanBlockIsNamed) {
  constexpr int64_t kRows = 3;
  constexpr int64_t kCols = 500'000;  // 1.5 M values: two blocks
  input_ = Zeros(DType::kFloat32, {3, kCols});
  updates_ = Zeros(DType::kFloat32, {kRows, kCols});
  std::vector<int64_t> values(static_cast<size_t>(kRows * kCols), -3);
  indices_ = Values<int64_t>(DType::kInt64, {kRows, kCols}, values);
  ASSERT_OK(Run(0).status());
  values[static_cast<size_t>(2 * kCols + 123)] = 3;
  indices_ = Values<int64_t>(DType::kInt64, {kRows, kCols}, values);
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[2, 123] = 3 is outside [-3, 3) for input.sizes[0] "
                                  "= 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Int32IndexBelowMinusAxisSizeIsRejected) {
  indices_ = Values<int32_t>(DType::kInt32, {3, 2}, {0, 1, 2, 3, -4, -5});
  updates_ = Zeros(DType::kFloat32, {3, 2});
  EXPECT_THAT(Run(1), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[2, 1] = -5 is outside [-4, 4) for input.sizes[1] "
                                  "= 4 (scatter_elements.axis = 1)")));
}

TEST_F(ScatterElementsValidationTest, Int32MinIndexIsRejected) {
  indices_ = Values<int32_t>(DType::kInt32, {2, 4},
                             {0, 0, 0, 0, 0, std::numeric_limits<int32_t>::min(), 0, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 1] = -2147483648 is outside [-3, 3) for "
                                  "input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Int64MinIndexIsRejectedWithoutOverflow) {
  indices_ = Values<int64_t>(DType::kInt64, {2, 4},
                             {0, std::numeric_limits<int64_t>::min(), 0, 0, 0, 0, 0, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 1] = -9223372036854775808 is outside [-3, 3) "
                                  "for input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Int64MaxIndexIsRejected) {
  indices_ = Values<int64_t>(DType::kInt64, {2, 4},
                             {0, 0, 0, 0, 0, 0, 0, std::numeric_limits<int64_t>::max()});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 3] = 9223372036854775807 is outside [-3, 3) "
                                  "for input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Uint32IndexIsNeverNegative) {
  // 0xFFFFFFFF would be -1 as int32, a valid index; as uint32 it is out of range.
  indices_ = Values<uint32_t>(DType::kUint32, {2, 4}, {0, 1, 0xFFFFFFFFu, 0, 0, 0, 0, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 2] = 4294967295 is outside [-3, 3) for "
                                  "input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Uint64IndexAboveInt64MaxIsPrintedUnsigned) {
  indices_ = Values<uint64_t>(DType::kUint64, {2, 4},
                              {0, 0, 0, 0, std::numeric_limits<uint64_t>::max(), 0, 0, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 0] = 18446744073709551615 is outside [-3, 3) "
                                  "for input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Uint64IndexOfTwoToThe63IsRejected) {
  indices_ = Values<uint64_t>(DType::kUint64, {2, 4}, {0, 0, 0, uint64_t{1} << 63, 0, 0, 0, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 3] = 9223372036854775808 is outside [-3, 3) "
                                  "for input.sizes[0] = 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, Uint64IndexEqualToAxisSizeIsRejected) {
  indices_ = Values<uint64_t>(DType::kUint64, {2, 4}, {0, 0, 0, 0, 0, 0, 3, 0});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 2] = 3 is outside [-3, 3) for input.sizes[0] "
                                  "= 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, NegativeIndicesDownToMinusAxisSizeAreAccepted) {
  indices_ = Values<int64_t>(DType::kInt64, {2, 4}, {-1, -2, -3, 2, 1, 0, -3, -1});
  ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0));
  EXPECT_EQ(geometry.indices.dtype, DType::kInt64);
}

TEST_F(ScatterElementsValidationTest, FirstBadIndexInRowMajorOrderIsReported) {
  // Column-major indices [2, 3]: element [r, c] at offset r + 2c. Bad values at
  // [1, 0] (offset 1) and [0, 2] (offset 4); row-major order meets [0, 2] first.
  input_ = Zeros(DType::kFloat32, {3, 3});
  indices_ = Values<int32_t>(DType::kInt32, {2, 3}, {0, 9, 1, 2, 7, 0}, {1, 2});
  updates_ = Zeros(DType::kFloat32, {2, 3});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 2] = 7 is outside [-3, 3) for input.sizes[0] "
                                  "= 3 (scatter_elements.axis = 0)")));
}

TEST_F(ScatterElementsValidationTest, PaddingBetweenIndexRowsIsNeverRead) {
  // Rows of 4 at a pitch of 5; the padding element holds an out-of-range value.
  indices_ = Values<int32_t>(DType::kInt32, {2, 4}, {0, 1, 2, 0, 99, 2, 1, 0, -1}, {5, 1});
  ASSERT_OK_AND_ASSIGN(ScatterElementsGeometry geometry, Run(0));
  EXPECT_THAT(geometry.indices.strides, ElementsAre(5, 1));
}

TEST_F(ScatterElementsValidationTest, BroadcastIndicesAreReadThroughStrideZero) {
  indices_ = Values<int32_t>(DType::kInt32, {2, 4}, {0, 1, 2, 5}, {0, 1});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 3] = 5 is outside [-3, 3) for input.sizes[0] "
                                  "= 3 (scatter_elements.axis = 0)")));
}

// --- Input binding (PlanOperator) ------------------------------------------------------------

class ScatterElementsInputsTest : public ScatterElementsValidationTest {
 protected:
  absl::StatusOr<ExecutionPlan> Plan(std::vector<NamedTensor> inputs) {
    OpRequest request;
    request.attrs = ScatterElementsAttrs{0};
    request.inputs = std::move(inputs);
    return PlanOperator(request, limits_);
  }
};

TEST_F(ScatterElementsInputsTest, MissingInputNamesItAndTheExpectedList) {
  EXPECT_THAT(Plan({{"input", input_.view()}, {"indices", indices_.view()}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("inputs is missing \"updates\"; scatter_elements takes "
                          "\"input\", \"indices\", \"updates\"")));
}

TEST_F(ScatterElementsInputsTest, UnknownInputNamesItAndTheExpectedList) {
  EXPECT_THAT(Plan({{"input", input_.view()},
                    {"bias", input_.view()},
                    {"indices", indices_.view()},
                    {"updates", updates_.view()}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("inputs has \"bias\"; scatter_elements takes \"input\", "
                          "\"indices\", \"updates\"")));
}

TEST_F(ScatterElementsInputsTest, InputNamesAreCaseSensitive) {
  EXPECT_THAT(
      Plan({{"Input", input_.view()}, {"indices", indices_.view()}, {"updates", updates_.view()}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("inputs has \"Input\"; scatter_elements takes \"input\", "
                  "\"indices\", \"updates\"")));
}

TEST_F(ScatterElementsInputsTest, DuplicateInputIsRejected) {
  EXPECT_THAT(
      Plan({{"input", input_.view()},
            {"indices", indices_.view()},
            {"indices", indices_.view()},
            {"updates", updates_.view()}}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("inputs has \"indices\" more than once")));
}

TEST_F(ScatterElementsInputsTest, InputsInAnyOrderAreBoundByName) {
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan plan,
      Plan({{"updates", updates_.view()}, {"input", input_.view()}, {"indices", indices_.view()}}));
  EXPECT_THAT(plan.input_names, ElementsAre("input", "indices", "updates"));
  ASSERT_EQ(plan.scatters.size(), 1u);
  EXPECT_EQ(plan.scatters[0].index_size, 4);  // the int32 indices, not the updates
}

TEST_F(ScatterElementsInputsTest, ValidationErrorsPassThroughPlanOperator) {
  indices_ = Values<int32_t>(DType::kInt32, {2, 4}, {0, 0, 0, 0, 0, 0, 0, -4});
  EXPECT_THAT(
      Plan({{"input", input_.view()}, {"indices", indices_.view()}, {"updates", updates_.view()}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("indices[1, 3] = -4 is outside [-3, 3) for input.sizes[0] = 3 "
                  "(scatter_elements.axis = 0)")));
}

}  // namespace
}  // namespace tensorop
