// GatherElements validation (core/validate/gather_elements.h) and its plan:
// every rule of OPERATORS.md "GatherElements" with its status and message, and
// the walk it plans.
#include "core/validate/gather_elements.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/plan/gather_elements.h"
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

class GatherElementsValidationTest : public ::testing::Test {
 protected:
  // Default request: input float32 [3, 4], indices int32 [2, 4] (all 0), axis 0.
  GatherElementsValidationTest()
      : input_(Zeros(DType::kFloat32, {3, 4})), indices_(Zeros(DType::kInt32, {2, 4})) {}

  absl::StatusOr<GatherElementsGeometry> Run(int64_t axis, std::vector<OutputDesc> outputs = {}) {
    outputs_ = std::move(outputs);
    return ValidateGatherElements(GatherElementsAttrs{axis}, input_.view(), indices_.view(),
                                  outputs_, limits_);
  }

  HeldTensor input_;
  HeldTensor indices_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

TEST_F(GatherElementsValidationTest, OutputHasTheIndicesSizesAndTheInputsDtype) {
  ASSERT_OK_AND_ASSIGN(GatherElementsGeometry geometry, Run(0));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 4));
  EXPECT_EQ(geometry.output.dtype, DType::kFloat32);
}

TEST_F(GatherElementsValidationTest, IndicesLongerThanTheInputAlongTheAxisAreAccepted) {
  indices_ = Zeros(DType::kInt64, {7, 4});
  ASSERT_OK_AND_ASSIGN(GatherElementsGeometry geometry, Run(0));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(7, 4));
}

TEST_F(GatherElementsValidationTest, RanksThatDifferAreRejected) {
  indices_ = Zeros(DType::kInt32, {8});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices has rank 1; input has rank 2")));
}

TEST_F(GatherElementsValidationTest, AxisOutsideTheRankIsRejected) {
  EXPECT_THAT(Run(2), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("gather_elements.axis = 2 is outside [0, 2)")));
  EXPECT_THAT(Run(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("gather_elements.axis = -1 is outside [0, 2)")));
}

TEST_F(GatherElementsValidationTest, SizesOutsideTheAxisMustEqualTheInputs) {
  // PyTorch's gather would take a smaller size; DirectML and ONNX do not.
  indices_ = Zeros(DType::kInt32, {2, 3});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.sizes[1] = 3 must equal input.sizes[1] = 4 (only "
                                  "gather_elements.axis = 0 may differ)")));
}

TEST_F(GatherElementsValidationTest, IndicesOfANonIndexDtypeAreRejected) {
  indices_ = Zeros(DType::kFloat64, {2, 4});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices.dtype is float64; it must be int32, int64, uint32 or "
                                  "uint64")));
}

TEST_F(GatherElementsValidationTest, OutputSizesOtherThanTheIndicesAreRejected) {
  EXPECT_THAT(Run(0, {OutputDesc{{3, 4}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outputs[0].sizes")));
}

TEST_F(GatherElementsValidationTest, FirstBadIndexInRowMajorOrderIsNamed) {
  // Column-major indices [2, 4]: element [r, c] at offset r + 2c. Bad values
  // at [1, 0] (offset 1) and [0, 1] (offset 2): row-major order meets [0, 1].
  indices_ = Values<int64_t>(DType::kInt64, {2, 4}, {0, 5, -4, 0, 0, 0, 0, 0}, {1, 2});
  EXPECT_THAT(Run(0), StatusIs(absl::StatusCode::kInvalidArgument,
                               Eq("indices[0, 1] = -4 is outside [-3, 3) for input.sizes[0] = 3 "
                                  "(gather_elements.axis = 0)")));
}

TEST(GatherElementsPlanTest, TheAxisReadsThroughTheIndexOnly) {
  const HeldTensor input = Zeros(DType::kFloat16, {3, 4});
  const HeldTensor indices = Zeros(DType::kInt32, {3, 2});
  ASSERT_OK_AND_ASSIGN(
      GatherElementsGeometry geometry,
      ValidateGatherElements(GatherElementsAttrs{1}, input.view(), indices.view(), {}, Limits{}));
  const ExecutionPlan plan = PlanGatherElements(geometry);
  ASSERT_EQ(plan.gathers.size(), 1u);
  const GatherWalk& walk = plan.gathers[0];
  EXPECT_THAT(walk.sizes, ElementsAre(3, 2));
  EXPECT_THAT(walk.input_strides, ElementsAre(8, 0));
  EXPECT_THAT(walk.indices_strides, ElementsAre(8, 4));
  EXPECT_THAT(walk.output_strides, ElementsAre(4, 2));
  EXPECT_EQ(walk.input_axis_stride, 2);
  EXPECT_EQ(walk.axis_size, 4);
}

}  // namespace
}  // namespace tensorop
