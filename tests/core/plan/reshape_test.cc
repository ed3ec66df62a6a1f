// Reshape planning (core/plan/reshape.h): a window when the input's strides
// allow it (NumPy's no-copy rule), else a copy walking the side that is not
// stepped evenly, else stretches; the bytes each copy moves.
#include "core/plan/reshape.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/one_input.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::OneInput;
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ReshapePlanTest, APackedInputIsAWindow) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3, 4}}.Plan(ReshapeAttrs{{4, 6}})));
  ASSERT_EQ(plan.windows.size(), 1u);
  EXPECT_EQ(plan.windows[0].base, 0);
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(6, 1));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_THAT(plan.copies[0].sizes, ElementsAre(24));  // one run of bytes
}

TEST(ReshapePlanTest, APaddedPitchBetweenRunsStaysAWindow) {
  // Rows of 6 in a pitch of 8: splitting the rows keeps every run even.
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan plan,
      (OneInput{.sizes = {4, 6}, .strides = {8, 1}}.Plan(ReshapeAttrs{{2, 2, 6}})));
  ASSERT_EQ(plan.windows.size(), 1u);
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(16, 8, 1));
}

TEST(ReshapePlanTest, SizeOneDimensionsStepZero) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {1, 6}}.Plan(ReshapeAttrs{{2, 1, 3}})));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(3, 0, 1));
}

TEST(ReshapePlanTest, APaddedPitchInsideARunIsACopyInTheInputsOrder) {
  // [2, 3] in a pitch of 4, as [3, 2]: the rows' padding falls inside the run.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3}, .strides = {4, 1}}.Plan(ReshapeAttrs{{3, 2}})));
  EXPECT_TRUE(plan.windows.empty());
  ASSERT_EQ(plan.copies.size(), 1u);
  const StridedCopy& copy = plan.copies[0];
  EXPECT_THAT(copy.sizes, ElementsAre(2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(16, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(12, 4));
  EXPECT_EQ(copy.element_count, 6);
}

TEST(ReshapePlanTest, ABroadcastInputIsACopy) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3}, .strides = {0, 1}}.Plan(ReshapeAttrs{{3, 2}})));
  EXPECT_TRUE(plan.windows.empty());
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_THAT(plan.copies[0].src_strides, ElementsAre(0, 4));
}

TEST(ReshapePlanTest, OnlyBroadcastIsStillAWindow) {
  // Every element is the same one: stride 0 throughout is even.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3}, .strides = {0, 0}}.Plan(ReshapeAttrs{{6}})));
  ASSERT_EQ(plan.windows.size(), 1u);
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(0));
}

TEST(ReshapePlanTest, AnEvenInputIntoPaddedOutputWalksTheOutput) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {6}}.Plan(ReshapeAttrs{{2, 3}},
                                                                        {OutputDesc{{}, {1, 2}}})));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_THAT(plan.copies[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan.copies[0].src_strides, ElementsAre(12, 4));
  EXPECT_THAT(plan.copies[0].dst_strides, ElementsAre(4, 8));
}

TEST(ReshapePlanTest, RunsNeitherSideStepsEvenlyGoInStretches) {
  // Column-major [2, 3] into column-major [3, 2]: stretches of gcd(3, 2) = 1.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}, .strides = {1, 2}}.Plan(
                                               ReshapeAttrs{{3, 2}}, {OutputDesc{{}, {1, 3}}})));
  ASSERT_EQ(plan.copies.size(), 6u);
  std::vector<int64_t> reads, writes;
  for (const StridedCopy& copy : plan.copies) {
    EXPECT_EQ(copy.element_count, 1);
    reads.push_back(copy.src_offset / 4);
    writes.push_back(copy.dst_offset / 4);
  }
  // Element L of the row-major order: input (L / 3, L % 3), output (L / 2, L % 2).
  EXPECT_THAT(reads, ElementsAre(0, 2, 4, 1, 3, 5));
  EXPECT_THAT(writes, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(ReshapePlanTest, TooManyStretchesAreExhausted) {
  // gcd(4099, 3) = 1: 12297 stretches of one element.
  EXPECT_THAT((OneInput{.sizes = {3, 4099}, .strides = {1, 3}}.Plan(ReshapeAttrs{{4099, 3}},
                                                                    {OutputDesc{{}, {1, 4099}}})),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("takes more than 4096 copies; ask for a packed output")));
}

}  // namespace
}  // namespace tensorop
