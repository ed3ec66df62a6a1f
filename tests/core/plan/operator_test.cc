// PlanOperator (core/operator.h) end to end: operator names, input binding for
// the one-input operators, and the fields it adds to a plan (bytes_moved).
#include "core/operator.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;

class OperatorPlanTest : public ::testing::Test {
 protected:
  // A packed tensor over zeroed bytes the fixture keeps alive.
  TensorView Tensor(DType dtype, std::vector<int64_t> sizes) {
    int64_t elements = 1;
    for (int64_t size : sizes) elements *= size;
    buffers_.emplace_back(static_cast<size_t>(elements * ElementSize(dtype)), std::byte{0});
    return TensorView{TensorDesc{dtype, std::move(sizes), {}}, buffers_.back()};
  }

  // Moving a std::vector keeps its heap buffer, so views stay valid as this grows.
  std::vector<std::vector<std::byte>> buffers_;
};

TEST(OpNameTest, NamesMatchTheConformanceFormat) {
  EXPECT_EQ(OpName(SliceAttrs{}), "slice");
  EXPECT_EQ(OpName(StridedSliceAttrs{}), "strided_slice");
  EXPECT_EQ(OpName(SplitAttrs{}), "split");
  EXPECT_EQ(OpName(ScatterElementsAttrs{}), "scatter_elements");
}

TEST_F(OperatorPlanTest, SliceBytesMovedIsTheOutputBuffer) {
  OpRequest request{SliceAttrs{{0, 0}, {2, 3}, {1, 1}},
                    {{"input", Tensor(DType::kFloat32, {4, 6})}},
                    {OutputDesc{{2, 3}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_EQ(plan.op, "slice");
  EXPECT_THAT(plan.input_names, ElementsAre("input"));
  EXPECT_EQ(plan.bytes_moved, 24);
}

TEST_F(OperatorPlanTest, PaddedOutputCountsItsWholeBufferInBytesMoved) {
  OpRequest request{SliceAttrs{{0, 0}, {2, 3}, {1, 1}},
                    {{"input", Tensor(DType::kFloat32, {4, 6})}},
                    {OutputDesc{{2, 3}, {4, 1}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_EQ(plan.bytes_moved, 7 * 4);
}

TEST_F(OperatorPlanTest, SplitBytesMovedSumsTheOutputs) {
  OpRequest request{SplitAttrs{1},
                    {{"input", Tensor(DType::kInt16, {4, 6})}},
                    {OutputDesc{{4, 2}, {}}, OutputDesc{{4, 4}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_EQ(plan.op, "split");
  EXPECT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.bytes_moved, 48);
}

TEST_F(OperatorPlanTest, StridedSliceWithoutOutputDescriptionsIsPacked) {
  StridedSliceAttrs attrs;
  attrs.begin = {1};
  attrs.end = {3};
  OpRequest request{attrs, {{"input", Tensor(DType::kUint8, {4, 6})}}, {}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_EQ(plan.op, "strided_slice");
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 6));
  EXPECT_THAT(plan.outputs[0].strides, ElementsAre(6, 1));
  EXPECT_EQ(plan.bytes_moved, 12);
}

TEST_F(OperatorPlanTest, EmptyStridedSliceMovesNothing) {
  StridedSliceAttrs attrs;
  attrs.begin = {2};
  attrs.end = {2};
  OpRequest request{attrs, {{"input", Tensor(DType::kFloat32, {4, 6})}}, {}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_EQ(plan.bytes_moved, 0);
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].element_count, 0);
}

TEST_F(OperatorPlanTest, ScatterElementsBytesMovedIsTheOutputBuffer) {
  OpRequest request{ScatterElementsAttrs{0},
                    {{"input", Tensor(DType::kFloat32, {3, 4})},
                     {"indices", Tensor(DType::kInt32, {2, 4})},
                     {"updates", Tensor(DType::kFloat32, {2, 4})}},
                    {}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_THAT(plan.input_names, ElementsAre("input", "indices", "updates"));
  EXPECT_EQ(plan.bytes_moved, 48);
}

TEST_F(OperatorPlanTest, SliceUnknownInputNameIsRejected) {
  OpRequest request{
      SliceAttrs{{0}, {1}, {1}}, {{"x", Tensor(DType::kFloat32, {4})}}, {OutputDesc{{1}, {}}}};
  EXPECT_THAT(
      PlanOperator(request, Limits{}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("inputs has \"x\"; slice takes \"input\"")));
}

TEST_F(OperatorPlanTest, SplitMissingInputIsRejected) {
  OpRequest request{SplitAttrs{0}, {}, {OutputDesc{{4}, {}}}};
  EXPECT_THAT(PlanOperator(request, Limits{}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("inputs is missing \"input\"; split takes \"input\"")));
}

TEST_F(OperatorPlanTest, StridedSliceDuplicateInputIsRejected) {
  OpRequest request{
      StridedSliceAttrs{},
      {{"input", Tensor(DType::kFloat32, {4})}, {"input", Tensor(DType::kFloat32, {4})}},
      {}};
  EXPECT_THAT(PlanOperator(request, Limits{}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                        Eq("inputs has \"input\" more than once")));
}

}  // namespace
}  // namespace tensorop
