// The copy planner (core/plan/strided_copy.h) on its own, from hand-made
// layouts and windows: element strides become byte strides, size-1 dimensions
// go, and neighbours contiguous on both sides merge (XNNPACK's normalization).
#include "core/plan/strided_copy.h"

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/layout.h"

namespace tensorop {
namespace {

using ::tensorop::testing::MakeLayout;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

InputWindow Window(int64_t base, std::vector<int64_t> strides) {
  return InputWindow{base, std::move(strides)};
}

TEST(StridedCopyPlanTest, PackedCopyMergesIntoOneDimension) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3, 4}), Window(0, {12, 4, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(24));
  EXPECT_THAT(copy.src_strides, ElementsAre(4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
  EXPECT_EQ(copy.element_size, 4);
  EXPECT_EQ(copy.element_count, 24);
  EXPECT_EQ(copy.src_offset, 0);
  EXPECT_EQ(copy.dst_offset, 0);
}

TEST(StridedCopyPlanTest, SlotsArePassedThrough) {
  const StridedCopy copy = PlanStridedCopy(MakeLayout(DType::kUint8, {4}), Window(0, {1}), 2, 3);
  EXPECT_EQ(copy.input_slot, 2);
  EXPECT_EQ(copy.output_slot, 3);
}

TEST(StridedCopyPlanTest, ByteStridesAreElementStridesTimesElementSize) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat64, {2, 3}), Window(2, {7, 2}), 0, 0);
  EXPECT_EQ(copy.element_size, 8);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(56, 16));
  EXPECT_THAT(copy.dst_strides, ElementsAre(24, 8));
  EXPECT_EQ(copy.src_offset, 16);
}

TEST(StridedCopyPlanTest, ByteStridesForTwoByteElements) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat16, {2, 3}), Window(1, {7, 2}), 0, 0);
  EXPECT_EQ(copy.element_size, 2);
  EXPECT_THAT(copy.src_strides, ElementsAre(14, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(6, 2));
  EXPECT_EQ(copy.src_offset, 2);
}

TEST(StridedCopyPlanTest, SizeOneDimensionsAreDroppedWhateverTheirStride) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 1, 3}), Window(0, {7, 99, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(28, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(12, 4));
  EXPECT_EQ(copy.element_count, 6);
}

TEST(StridedCopyPlanTest, SizeOneDimensionDoesNotBlockAMerge) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 1, 3}), Window(0, {3, 0, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(6));
  EXPECT_THAT(copy.src_strides, ElementsAre(4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
}

TEST(StridedCopyPlanTest, AllSizeOneLeavesNoDimensionsAndOneElement) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kInt32, {1, 1}), Window(5, {0, 0}), 0, 0);
  EXPECT_THAT(copy.sizes, IsEmpty());
  EXPECT_THAT(copy.src_strides, IsEmpty());
  EXPECT_THAT(copy.dst_strides, IsEmpty());
  EXPECT_EQ(copy.element_count, 1);
  EXPECT_EQ(copy.src_offset, 20);
}

TEST(StridedCopyPlanTest, RankZeroOutputCopiesOneElement) {
  const StridedCopy copy = PlanStridedCopy(MakeLayout(DType::kUint64, {}), Window(3, {}), 0, 0);
  EXPECT_THAT(copy.sizes, IsEmpty());
  EXPECT_EQ(copy.element_count, 1);
  EXPECT_EQ(copy.src_offset, 24);
}

TEST(StridedCopyPlanTest, EmptyOutputCopiesNothing) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {0, 3}), Window(0, {0, 1}), 0, 0);
  EXPECT_EQ(copy.element_count, 0);
  EXPECT_THAT(copy.sizes, IsEmpty());
  EXPECT_THAT(copy.src_strides, IsEmpty());
  EXPECT_THAT(copy.dst_strides, IsEmpty());
}

TEST(StridedCopyPlanTest, NegativeStrideStaysNegative) {
  const StridedCopy copy = PlanStridedCopy(MakeLayout(DType::kFloat32, {4}), Window(3, {-1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(4));
  EXPECT_THAT(copy.src_strides, ElementsAre(-4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
  EXPECT_EQ(copy.src_offset, 12);
}

TEST(StridedCopyPlanTest, ReversedOnBothAxesMergesIntoOneNegativeRun) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3}), Window(5, {-3, -1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(6));
  EXPECT_THAT(copy.src_strides, ElementsAre(-4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
  EXPECT_EQ(copy.src_offset, 20);
}

TEST(StridedCopyPlanTest, ReversedInnerAxisOnlyDoesNotMerge) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3}), Window(2, {3, -1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(12, -4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(12, 4));
}

TEST(StridedCopyPlanTest, BroadcastDimensionKeepsSourceStrideZero) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {3, 4}), Window(0, {0, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(3, 4));
  EXPECT_THAT(copy.src_strides, ElementsAre(0, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(16, 4));
}

TEST(StridedCopyPlanTest, BroadcastOfOneElementMergesIntoOneZeroStrideRun) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {3, 4}), Window(7, {0, 0}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(12));
  EXPECT_THAT(copy.src_strides, ElementsAre(0));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4));
  EXPECT_EQ(copy.src_offset, 28);
}

TEST(StridedCopyPlanTest, EvenlySpacedSourceMergesThoughNotPacked) {
  // Every other int16 of rows pitched at 10 elements is one run of stride 2.
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kInt16, {3, 5}), Window(0, {10, 2}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(15));
  EXPECT_THAT(copy.src_strides, ElementsAre(4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(2));
}

TEST(StridedCopyPlanTest, NoMergeWhenOnlyTheSourceIsContiguous) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3}, {1, 2}), Window(0, {3, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(12, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(4, 8));
}

TEST(StridedCopyPlanTest, NoMergeWhenOnlyTheDestinationIsContiguous) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3}), Window(0, {4, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(16, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(12, 4));
}

TEST(StridedCopyPlanTest, InnerDimensionsMergeBelowAPaddedOuterOne) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kFloat32, {2, 3, 4}), Window(0, {100, 4, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 12));
  EXPECT_THAT(copy.src_strides, ElementsAre(400, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(48, 4));
}

TEST(StridedCopyPlanTest, PaddedDestinationKeepsItsPitch) {
  const StridedCopy copy =
      PlanStridedCopy(MakeLayout(DType::kUint8, {2, 3}, {8, 1}), Window(0, {3, 1}), 0, 0);
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(3, 1));
  EXPECT_THAT(copy.dst_strides, ElementsAre(8, 1));
}

TEST(WindowCopyPlanTest, PlanHasOneCopyFromTheInputSlot) {
  const Layout output = MakeLayout(DType::kFloat32, {2, 3});
  const ExecutionPlan plan = PlanWindowCopy(InfoOf<StridedSliceAttrs>(), output, Window(4, {6, 1}));
  EXPECT_EQ(plan.op, "strided_slice");
  EXPECT_THAT(plan.input_names, ElementsAre("input"));
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 3));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].input_slot, 0);
  EXPECT_EQ(plan.copies[0].output_slot, 0);
  EXPECT_EQ(plan.copies[0].src_offset, 16);
  EXPECT_THAT(plan.scatters, IsEmpty());
}

}  // namespace
}  // namespace tensorop
