// Slice planning (core/plan/slice.h): the copy a validated slice lowers to.
#include "core/plan/slice.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/attrs.h"
#include "core/limits.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "core/validate/slice.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class SlicePlanTest : public ::testing::Test {
 protected:
  SlicePlanTest() { SetInput(DType::kFloat32, {4, 6}); }

  // An input over `buffer_elements` zeroed elements (default: packed).
  void SetInput(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                int64_t buffer_elements = -1) {
    if (buffer_elements < 0) {
      buffer_elements = 1;
      for (int64_t size : sizes) buffer_elements *= size;
    }
    data_.assign(static_cast<size_t>(buffer_elements * ElementSize(dtype)), std::byte{0});
    input_ = TensorView{TensorDesc{dtype, std::move(sizes), std::move(strides)}, data_};
  }

  // Validates and plans; the test fails if validation does.
  void Plan(SliceAttrs attrs, std::vector<int64_t> output_sizes,
            std::vector<int64_t> output_strides = {}) {
    const std::vector<OutputDesc> outputs = {
        OutputDesc{std::move(output_sizes), std::move(output_strides)}};
    ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, ValidateSlice(attrs, input_, outputs, Limits{}));
    plan_ = PlanSlice(geometry);
    ASSERT_EQ(plan_.copies.size(), 1u);
    copy_ = plan_.copies[0];
  }

  std::vector<std::byte> data_;
  TensorView input_;
  ExecutionPlan plan_;
  StridedCopy copy_;
};

TEST_F(SlicePlanTest, PlanIsOneCopyFromInputToOutput) {
  Plan({{1, 2}, {2, 3}, {1, 1}}, {2, 3});
  EXPECT_EQ(plan_.op, "slice");
  EXPECT_THAT(plan_.input_names, ElementsAre("input"));
  ASSERT_EQ(plan_.outputs.size(), 1u);
  EXPECT_THAT(plan_.outputs[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan_.outputs[0].strides, ElementsAre(3, 1));
  EXPECT_THAT(plan_.scatters, IsEmpty());
  EXPECT_EQ(copy_.input_slot, 0);
  EXPECT_EQ(copy_.output_slot, 0);
  EXPECT_EQ(copy_.element_count, 6);
}

TEST_F(SlicePlanTest, InteriorWindowStartsAtTheOffsetsInBytes) {
  Plan({{1, 2}, {2, 3}, {1, 1}}, {2, 3});
  EXPECT_EQ(copy_.src_offset, (1 * 6 + 2) * 4);
  EXPECT_EQ(copy_.dst_offset, 0);
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, 4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(12, 4));
}

TEST_F(SlicePlanTest, FullRowsOfPackedInputMergeIntoOneDimension) {
  Plan({{1, 0}, {2, 6}, {1, 1}}, {2, 6});
  EXPECT_THAT(copy_.sizes, ElementsAre(12));
  EXPECT_THAT(copy_.src_strides, ElementsAre(4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
  EXPECT_EQ(copy_.src_offset, 24);
}

TEST_F(SlicePlanTest, SingleRowDropsTheRowDimension) {
  Plan({{2, 1}, {1, 4}, {1, 1}}, {1, 4});
  EXPECT_THAT(copy_.sizes, ElementsAre(4));
  EXPECT_THAT(copy_.src_strides, ElementsAre(4));
  EXPECT_EQ(copy_.src_offset, (2 * 6 + 1) * 4);
}

TEST_F(SlicePlanTest, SingleElementHasNoDimensions) {
  Plan({{3, 5}, {1, 1}, {1, 1}}, {1, 1});
  EXPECT_THAT(copy_.sizes, IsEmpty());
  EXPECT_EQ(copy_.element_count, 1);
  EXPECT_EQ(copy_.src_offset, 23 * 4);
}

TEST_F(SlicePlanTest, SizeOneOutputDimensionMayHaveAnyStride) {
  Plan({{2, 0}, {1, 6}, {1, 1}}, {1, 6}, {std::numeric_limits<int64_t>::max(), 1});
  EXPECT_THAT(copy_.sizes, ElementsAre(6));
  EXPECT_THAT(copy_.src_strides, ElementsAre(4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
}

TEST_F(SlicePlanTest, NegativeStrideStartsAtWindowEnd) {
  // start[1] = offset + window_size - 1 = 1 + 4 - 1 = 4.
  Plan({{1, 1}, {2, 4}, {1, -1}}, {2, 4});
  EXPECT_EQ(copy_.src_offset, (1 * 6 + 4) * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 4));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, -4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(16, 4));
}

TEST_F(SlicePlanTest, NegativeStrideWithOutputShorterThanWindowStillStartsAtWindowEnd) {
  // DirectML: the window end is the start even when fewer elements are taken.
  Plan({{0, 1}, {4, 5}, {1, -2}}, {4, 2});
  EXPECT_EQ(copy_.src_offset, 5 * 4);
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, -8));
}

TEST_F(SlicePlanTest, FullyReversedPackedInputIsOneNegativeRun) {
  Plan({{0, 0}, {4, 6}, {-1, -1}}, {4, 6});
  EXPECT_EQ(copy_.src_offset, 23 * 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(24));
  EXPECT_THAT(copy_.src_strides, ElementsAre(-4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4));
}

TEST_F(SlicePlanTest, WindowStridesMultiplyIntoByteStrides) {
  Plan({{0, 1}, {4, 5}, {2, 2}}, {2, 3});
  EXPECT_EQ(copy_.src_offset, 4);
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy_.src_strides, ElementsAre(48, 8));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(12, 4));
}

TEST_F(SlicePlanTest, BroadcastInputGivesZeroSourceStride) {
  SetInput(DType::kFloat32, {3, 4}, {0, 1}, 4);
  Plan({{0, 0}, {3, 4}, {1, 1}}, {3, 4});
  EXPECT_THAT(copy_.sizes, ElementsAre(3, 4));
  EXPECT_THAT(copy_.src_strides, ElementsAre(0, 4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(16, 4));
}

TEST_F(SlicePlanTest, PaddedFloat64InputKeepsItsPitchInBytes) {
  // Rows of 5 at a pitch of 8: 1 + 2*8 + 4 = 21 elements.
  SetInput(DType::kFloat64, {3, 5}, {8, 1}, 21);
  Plan({{0, 0}, {3, 5}, {1, 1}}, {3, 5});
  EXPECT_EQ(copy_.element_size, 8);
  EXPECT_THAT(copy_.sizes, ElementsAre(3, 5));
  EXPECT_THAT(copy_.src_strides, ElementsAre(64, 8));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(40, 8));
}

TEST_F(SlicePlanTest, ColumnMajorOutputGetsItsByteStrides) {
  Plan({{0, 0}, {2, 3}, {1, 1}}, {2, 3}, {1, 2});
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy_.src_strides, ElementsAre(24, 4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(4, 8));
}

TEST_F(SlicePlanTest, NhwcInputToNchwOutput) {
  // float16 N=1, C=2, H=3, W=2 stored NHWC: strides [12, 1, 4, 2].
  SetInput(DType::kFloat16, {1, 2, 3, 2}, {12, 1, 4, 2}, 12);
  Plan({{0, 0, 0, 0}, {1, 2, 3, 2}, {1, 1, 1, 1}}, {1, 2, 3, 2});
  EXPECT_EQ(copy_.element_size, 2);
  EXPECT_THAT(copy_.sizes, ElementsAre(2, 6));
  EXPECT_THAT(copy_.src_strides, ElementsAre(2, 4));
  EXPECT_THAT(copy_.dst_strides, ElementsAre(12, 2));
}

}  // namespace
}  // namespace tensorop
