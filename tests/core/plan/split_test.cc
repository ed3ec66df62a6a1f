// Split planning (core/plan/split.h): one copy per output, each from its offset
// along the axis.
#include "core/plan/split.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/attrs.h"
#include "core/limits.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "core/validate/split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class SplitPlanTest : public ::testing::Test {
 protected:
  // A packed float32 [4, 6] input.
  SplitPlanTest()
      : data_(4 * 6 * 4, std::byte{0}), input_{TensorDesc{DType::kFloat32, {4, 6}, {}}, data_} {}

  void Plan(int64_t axis, std::vector<OutputDesc> outputs) {
    ASSERT_OK_AND_ASSIGN(SplitGeometry geometry,
                         ValidateSplit(SplitAttrs{axis}, input_, outputs, Limits{}));
    plan_ = PlanSplit(geometry);
  }

  std::vector<std::byte> data_;
  TensorView input_;
  ExecutionPlan plan_;
};

TEST_F(SplitPlanTest, PlanHasOneCopyPerOutputFromTheOneInput) {
  Plan(1, {OutputDesc{{4, 2}, {}}, OutputDesc{{4, 3}, {}}, OutputDesc{{4, 1}, {}}});
  EXPECT_EQ(plan_.op, "split");
  EXPECT_THAT(plan_.input_names, ElementsAre("input"));
  ASSERT_EQ(plan_.outputs.size(), 3u);
  EXPECT_THAT(plan_.outputs[2].sizes, ElementsAre(4, 1));
  EXPECT_THAT(plan_.scatters, IsEmpty());
  ASSERT_EQ(plan_.copies.size(), 3u);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(plan_.copies[j].input_slot, 0);
    EXPECT_EQ(plan_.copies[j].output_slot, j);
  }
}

TEST_F(SplitPlanTest, InnerAxisOutputsStartAtTheirColumnOffsets) {
  Plan(1, {OutputDesc{{4, 2}, {}}, OutputDesc{{4, 3}, {}}, OutputDesc{{4, 1}, {}}});
  ASSERT_EQ(plan_.copies.size(), 3u);
  EXPECT_EQ(plan_.copies[0].src_offset, 0);
  EXPECT_EQ(plan_.copies[1].src_offset, 2 * 4);
  EXPECT_EQ(plan_.copies[2].src_offset, 5 * 4);

  EXPECT_THAT(plan_.copies[0].sizes, ElementsAre(4, 2));
  EXPECT_THAT(plan_.copies[0].src_strides, ElementsAre(24, 4));
  EXPECT_THAT(plan_.copies[0].dst_strides, ElementsAre(8, 4));
  EXPECT_THAT(plan_.copies[1].sizes, ElementsAre(4, 3));
  EXPECT_THAT(plan_.copies[1].dst_strides, ElementsAre(12, 4));
  // A one-column output drops its size-1 axis: a column of stride one row.
  EXPECT_THAT(plan_.copies[2].sizes, ElementsAre(4));
  EXPECT_THAT(plan_.copies[2].src_strides, ElementsAre(24));
  EXPECT_THAT(plan_.copies[2].dst_strides, ElementsAre(4));
}

TEST_F(SplitPlanTest, OuterAxisOutputsAreContiguousRuns) {
  Plan(0, {OutputDesc{{1, 6}, {}}, OutputDesc{{3, 6}, {}}});
  ASSERT_EQ(plan_.copies.size(), 2u);
  EXPECT_EQ(plan_.copies[0].src_offset, 0);
  EXPECT_THAT(plan_.copies[0].sizes, ElementsAre(6));
  EXPECT_EQ(plan_.copies[0].element_count, 6);
  EXPECT_EQ(plan_.copies[1].src_offset, 6 * 4);
  EXPECT_THAT(plan_.copies[1].sizes, ElementsAre(18));
  EXPECT_THAT(plan_.copies[1].src_strides, ElementsAre(4));
  EXPECT_THAT(plan_.copies[1].dst_strides, ElementsAre(4));
  EXPECT_EQ(plan_.copies[1].element_count, 18);
}

TEST_F(SplitPlanTest, OneOutputIsOneWholeCopy) {
  Plan(1, {OutputDesc{{4, 6}, {}}});
  ASSERT_EQ(plan_.copies.size(), 1u);
  EXPECT_EQ(plan_.copies[0].src_offset, 0);
  EXPECT_THAT(plan_.copies[0].sizes, ElementsAre(24));
  EXPECT_THAT(plan_.copies[0].src_strides, ElementsAre(4));
  EXPECT_THAT(plan_.copies[0].dst_strides, ElementsAre(4));
}

TEST_F(SplitPlanTest, EachOutputKeepsItsOwnLayout) {
  Plan(1, {OutputDesc{{4, 2}, {1, 4}}, OutputDesc{{4, 4}, {8, 1}}});
  ASSERT_EQ(plan_.copies.size(), 2u);
  EXPECT_THAT(plan_.copies[0].dst_strides, ElementsAre(4, 16));
  EXPECT_THAT(plan_.copies[1].dst_strides, ElementsAre(32, 4));
  EXPECT_EQ(plan_.outputs[1].buffer_elements, 1 + 3 * 8 + 3);
}

}  // namespace
}  // namespace tensorop
