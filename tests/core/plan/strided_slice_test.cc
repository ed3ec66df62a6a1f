// StridedSlice planning (core/plan/strided_slice.h): the copy a validated
// strided slice lowers to.
#include "core/plan/strided_slice.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/attrs.h"
#include "core/limits.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "core/validate/strided_slice.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class StridedSlicePlanTest : public ::testing::Test {
 protected:
  StridedSlicePlanTest() { SetInput({4, 6}); }

  // A packed float32 input.
  void SetInput(std::vector<int64_t> sizes) {
    int64_t elements = 1;
    for (int64_t size : sizes) elements *= size;
    data_.assign(static_cast<size_t>(elements * 4), std::byte{0});
    input_ = TensorView{TensorDesc{DType::kFloat32, std::move(sizes), {}}, data_};
  }

  void Plan(const StridedSliceAttrs& attrs) {
    ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry,
                         ValidateStridedSlice(attrs, input_, {}, Limits{}));
    plan_ = PlanStridedSlice(geometry);
    ASSERT_EQ(plan_.copies.size(), 1u);
    copy_ = plan_.copies[0];
  }

  std::vector<std::byte> data_;
  TensorView input_;
  ExecutionPlan plan_;
  StridedCopy copy_;
};

StridedSliceAttrs Ranges(std::vector<int64_t> begin, std::vector<int64_t> end,
                         std::vector<int64_t> stride = {}) {
  StridedSliceAttrs attrs;
  attrs.begin = std::move(begin);
  attrs.end = std::move(end);
  attrs.stride = std::move(stride);
  return attrs;
}

TEST_F(StridedSlicePlanTest, PlanIsOneCopyFromInputToOutput) {
  Plan(Ranges({1, 1}, {3, 4}));
  EXPECT_EQ(plan_.op, "strided_slice");
  EXPECT_THAT(plan_.input_names, ElementsAre("input"));
  ASSERT_EQ(plan_.outputs.size(), 1u);
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan_.scatters, IsEmpty());
  EXPECT_EQ(copy_.src_offset, (6 + 1) * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, 4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(12, 4));
}

TEST_F(StridedSlicePlanTest, LeftoverWholeDimensionsMergeWithTheSlicedOne) {
  SetInput({4, 6, 5});
  Plan(Ranges({1}, {3}));
  EXPECT_EQ(copy_.src_offset, 30 * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(60));
  EXPECT_THAT(copy_.src_strides, ElementsAre(4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
}

TEST_F(StridedSlicePlanTest, NewAxesAreDroppedFromTheCopy) {
  StridedSliceAttrs attrs = Ranges({0, 0, 0}, {0, 0, 0});
  attrs.new_axis_mask = {1, 0, 1};
  attrs.begin_mask = {0, 1, 0};
  attrs.end_mask = {0, 1, 0};
  Plan(attrs);
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(1, 4, 1, 6));
  EXPECT_THAT(copy_.sizes, ElementsAre(24));
  EXPECT_THAT(copy_.src_strides, ElementsAre(4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
}

TEST_F(StridedSlicePlanTest, ReversedAxisStartsAtItsLastElement) {
  StridedSliceAttrs attrs = Ranges({0, 0}, {0, 0}, {1, -1});
  attrs.begin_mask = {1, 1};
  attrs.end_mask = {1, 1};
  Plan(attrs);
  EXPECT_EQ(copy_.src_offset, 5 * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(4, 6));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, -4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(24, 4));
}

TEST_F(StridedSlicePlanTest, ShrunkDimensionFoldsIntoTheOffset) {
  StridedSliceAttrs attrs = Ranges({0, 4}, {0, 0}, {1, 1});
  attrs.begin_mask = {1, 0};
  attrs.end_mask = {1, 0};
  attrs.shrink_axis_mask = {0, 1};
  Plan(attrs);
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(4));
  EXPECT_EQ(copy_.src_offset, 4 * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(4));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
}

TEST_F(StridedSlicePlanTest, RankZeroOutputCopiesOneElement) {
  StridedSliceAttrs attrs = Ranges({2, -1}, {0, 0});
  attrs.shrink_axis_mask = {1, 1};
  Plan(attrs);
  EXPECT_THAT(plan_.outputs[0].sizes, IsEmpty());
  EXPECT_EQ(copy_.element_count, 1);
  EXPECT_THAT(copy_.sizes, IsEmpty());
  EXPECT_EQ(copy_.src_offset, (2 * 6 + 5) * 4);
}

TEST_F(StridedSlicePlanTest, EmptyOutputCopiesNothing) {
  Plan(Ranges({1, 3}, {3, 3}));
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(2, 0));
  EXPECT_EQ(copy_.element_count, 0);
  EXPECT_THAT(copy_.sizes, IsEmpty());
  EXPECT_EQ(copy_.src_offset, 0);
}

TEST_F(StridedSlicePlanTest, StepTwoDoublesTheByteStride) {
  Plan(Ranges({0, 1}, {4, 6}, {3, 2}));
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(2, 3));
  EXPECT_EQ(copy_.src_offset, 4);
  EXPECT_THAT(copy_.src_strides, ElementsAre(72, 8));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(12, 4));
}

}  // namespace
}  // namespace tensorop
