// Gather validation (core/validate/gather.h) and its plan: every rule of
// OPERATORS.md "Gather" with its status and message, in the spec's order of
// checks, and the walk it plans.
#include "core/validate/gather.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/plan/gather.h"
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
using ::testing::HasSubstr;

class GatherValidationTest : public ::testing::Test {
 protected:
  // Default request: input float32 [3, 4], indices int32 [2] (both 0), axis 0.
  GatherValidationTest()
      : input_(Zeros(DType::kFloat32, {3, 4})), indices_(Zeros(DType::kInt32, {2})) {}

  absl::StatusOr<GatherGeometry> Run(int64_t axis, std::vector<OutputDesc> outputs = {}) {
    outputs_ = std::move(outputs);
    return ValidateGather(GatherAttrs{axis}, input_.view(), indices_.view(), outputs_, limits_);
  }

  HeldTensor input_;
  HeldTensor indices_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

TEST_F(GatherValidationTest, OutputSizesAreTheInputsWithTheIndicesInPlaceOfTheAxis) {
  indices_ = Zeros(DType::kInt64, {2, 5});
  ASSERT_OK_AND_ASSIGN(GatherGeometry geometry, Run(1));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3, 2, 5));
  EXPECT_EQ(geometry.output.dtype, DType::kFloat32);
  EXPECT_EQ(geometry.axis, 1);
}

TEST_F(GatherValidationTest, AxisOutsideTheInputsRankIsRejected) {
  EXPECT_THAT(Run(2), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("gather.axis = 2 is outside [0, 2)")));
  // ONNX's negative axis is not taken (OPERATORS.md).
  EXPECT_THAT(Run(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("gather.axis = -1 is outside [0, 2)")));
}

TEST_F(GatherValidationTest, OutputRankAboveEightIsRejected) {
  input_ = Zeros(DType::kFloat32, {2, 2, 2, 2, 2});
  indices_ = Zeros(DType::kInt32, {1, 1, 1, 1, 1});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("the output's rank would be 9 (input rank 5 + indices rank 5 "
                                  "- 1); gather's output takes rank 1..8")));
}

TEST_F(GatherValidationTest, IndicesRankNineIsRejected) {
  indices_ = Zeros(DType::kInt32, std::vector<int64_t>(9, 1));
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.sizes has 9 dimensions; gather takes rank 1..8")));
}

TEST_F(GatherValidationTest, IndicesOfANonIndexDtypeAreRejected) {
  for (DType dtype :
       {DType::kFloat32, DType::kInt16, DType::kUint8, DType::kBool, DType::kBfloat16}) {
    indices_ = Zeros(dtype, {2});
    EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("; it must be int32, int64, uint32 or uint64")));
  }
}

TEST_F(GatherValidationTest, OutputSizesOtherThanDerivedAreRejected) {
  EXPECT_THAT(Run(0, {OutputDesc{{3, 4}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outputs[0].sizes")));
}

TEST_F(GatherValidationTest, OutputStridesAreKept) {
  ASSERT_OK_AND_ASSIGN(GatherGeometry geometry, Run(0, {OutputDesc{{}, {1, 2}}}));
  EXPECT_THAT(geometry.output.strides, ElementsAre(1, 2));
}

TEST_F(GatherValidationTest, FirstBadIndexIsNamedWithItsCoordinatesAndValue) {
  indices_ = Values<int32_t>(DType::kInt32, {2, 2}, {0, -3, 3, 7});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1, 0] = 3 is outside [-3, 3) for input.sizes[0] = 3 "
                                  "(gather.axis = 0)")));
}

TEST_F(GatherValidationTest, Uint64IndicesAreNeverNegative) {
  indices_ = Values<uint64_t>(DType::kUint64, {2}, {0, std::numeric_limits<uint64_t>::max()});
  EXPECT_THAT(Run(1), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[1] = 18446744073709551615 is outside [-4, 4) for "
                                  "input.sizes[1] = 4 (gather.axis = 1)")));
}

TEST_F(GatherValidationTest, ElementLimitComesBeforeTheIndexValues) {
  // [3, 2] gathered by 5 indices of which one is bad: an output of 10
  // elements over a limit of 7 is RESOURCE_EXHAUSTED first (sizes, the element
  // limit, then the values), before any output exists.
  input_ = Zeros(DType::kFloat32, {3, 2});
  indices_ = Values<int32_t>(DType::kInt32, {5}, {0, 99, 0, 0, 0});
  limits_.max_tensor_elements = 7;
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kResourceExhausted,
                               HasSubstr(".sizes [5, 2] hold 10 elements; the limit is 7")));
}

TEST_F(GatherValidationTest, BroadcastIndicesAreReadOncePerDistinctElement) {
  // 4 bytes of indices broadcast to 2^31 elements: the check reads the one
  // value, not 2^31 (stop is asked every 2^16 reads: never here).
  input_ = Zeros(DType::kUint8, {1});
  indices_ = Values<uint32_t>(DType::kUint32, {int64_t{1} << 31}, {0}, {0});
  int stop_asked = 0;
  const StopCheck counting = [&] {
    ++stop_asked;
    return absl::OkStatus();
  };
  ASSERT_OK_AND_ASSIGN(
      GatherGeometry geometry,
      ValidateGather(GatherAttrs{0}, input_.view(), indices_.view(), {}, limits_, counting));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(int64_t{1} << 31));
  EXPECT_EQ(stop_asked, 0);
}

TEST(GatherOutputSizesTest, FollowFromTheInputAndTheIndices) {
  const TensorDesc indices{DType::kInt64, {2, 5}};
  ASSERT_OK_AND_ASSIGN(
      auto sizes,
      OutputSizes(GatherAttrs{1}, {{"input", {DType::kBool, {3, 4, 6}}}, {"indices", indices}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(3, 2, 5, 6)));
  EXPECT_THAT(
      OutputSizes(GatherAttrs{0}, {{"input", {DType::kBool, {3}}}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("gather's output sizes follow from input \"indices\", which is missing")));
}

TEST(GatherPlanTest, RowsAlongTheOutermostAxisAreOneRunEach) {
  // input [3, 4] float32, indices [5] int64 along axis 0: output [5, 4], each
  // row read from the row its index names.
  const HeldTensor input = Zeros(DType::kFloat32, {3, 4});
  const HeldTensor indices = Zeros(DType::kInt64, {5});
  ASSERT_OK_AND_ASSIGN(GatherGeometry geometry,
                       ValidateGather(GatherAttrs{0}, input.view(), indices.view(), {}, Limits{}));
  const ExecutionPlan plan = PlanGather(geometry);
  ASSERT_EQ(plan.gathers.size(), 1u);
  const GatherWalk& walk = plan.gathers[0];
  EXPECT_THAT(walk.sizes, ElementsAre(5, 4));
  EXPECT_THAT(walk.input_strides, ElementsAre(0, 4));
  EXPECT_THAT(walk.indices_strides, ElementsAre(8, 0));
  EXPECT_THAT(walk.output_strides, ElementsAre(16, 4));
  EXPECT_EQ(walk.input_axis_stride, 16);
  EXPECT_EQ(walk.axis_size, 3);
  EXPECT_EQ(walk.index_size, 8);
  EXPECT_TRUE(walk.index_signed);
  EXPECT_EQ(walk.element_count, 20);
  EXPECT_TRUE(plan.copies.empty());
}

TEST(GatherPlanTest, DimensionsThatStepAlikeMergeAndSizeOneOnesDrop) {
  // input [2, 3, 4, 5] along axis 1 by indices [1]: output [2, 1, 4, 5]; the
  // size-1 index dimension drops and (4, 5) merge into one run of 20.
  const HeldTensor input = Zeros(DType::kUint8, {2, 3, 4, 5});
  const HeldTensor indices = Zeros(DType::kUint32, {1});
  ASSERT_OK_AND_ASSIGN(GatherGeometry geometry,
                       ValidateGather(GatherAttrs{1}, input.view(), indices.view(), {}, Limits{}));
  const GatherWalk walk = PlanGather(geometry).gathers[0];
  EXPECT_THAT(walk.sizes, ElementsAre(2, 20));
  EXPECT_THAT(walk.input_strides, ElementsAre(60, 1));
  EXPECT_THAT(walk.indices_strides, ElementsAre(0, 0));
  EXPECT_THAT(walk.output_strides, ElementsAre(20, 1));
  EXPECT_FALSE(walk.index_signed);
}

}  // namespace
}  // namespace tensorop
