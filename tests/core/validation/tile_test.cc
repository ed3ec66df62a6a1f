// Tile validation (core/validate/tile.h), through core's entry point: every rule
// of OPERATORS.md "Tile" with its status and message, and the one copy it plans.
#include "core/validate/tile.h"

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
using ::testing::Eq;
using ::testing::IsEmpty;

TEST(TileValidationTest, EachSizeIsTheInputsTimesItsRepeats) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(TileAttrs{{3, 2}})));
  EXPECT_EQ(plan.op, "tile");
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(6, 6));
  // Not a window on the input: a chain cannot carry it onto the input's bytes.
  EXPECT_THAT(plan.windows, IsEmpty());
}

TEST(TileValidationTest, OneCopyRepeatsTheInputsRowsWithStrideZero) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(TileAttrs{{3, 2}})));
  ASSERT_EQ(plan.copies.size(), 1u);
  const StridedCopy& copy = plan.copies[0];
  // [repeat 3, row 2, repeat 2, column 3] of 4-byte elements into [6, 6].
  EXPECT_THAT(copy.sizes, ElementsAre(3, 2, 2, 3));
  EXPECT_THAT(copy.src_strides, ElementsAre(0, 12, 0, 4));
  EXPECT_THAT(copy.dst_strides, ElementsAre(48, 24, 12, 4));
  EXPECT_EQ(copy.element_count, 36);
}

TEST(TileValidationTest, RepeatsOfOneCopyTheInput) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(TileAttrs{{1, 1}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan.copies[0].sizes, ElementsAre(6));
}

TEST(TileValidationTest, RepeatsBelowOneAreRejected) {
  EXPECT_THAT(
      (OneInput{.sizes = {2, 2}}.Plan(TileAttrs{{1, 0}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("tile.repeats[1] must be >= 1, got 0")));
  EXPECT_THAT(
      (OneInput{.sizes = {2}}.Plan(TileAttrs{{-1}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("tile.repeats[0] must be >= 1, got -1")));
}

TEST(TileValidationTest, RepeatsNeedOneEntryPerDimension) {
  EXPECT_THAT((OneInput{.sizes = {2, 2}}.Plan(TileAttrs{{2}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("tile.repeats has 1 entries; the input has rank 2 and takes one "
                          "repeat count per dimension")));
}

TEST(TileValidationTest, InputRankNineIsRejected) {
  EXPECT_THAT(
      (OneInput{.sizes = std::vector<int64_t>(9, 1)}.Plan(TileAttrs{std::vector<int64_t>(9, 1)})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("input.sizes has 9 dimensions; tile takes rank 1..8")));
}

TEST(TileValidationTest, MoreThanTheElementLimitIsExhausted) {
  EXPECT_THAT((OneInput{.sizes = {1, 1}}.Plan(TileAttrs{{65536, 65536}})),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("outputs[0].sizes [65536, 65536] hold 4294967296 elements; the limit "
                          "is 4294967295")));
}

TEST(TileValidationTest, ASizeOrProductPast64BitsIsInvalid) {
  constexpr int64_t k2To32 = int64_t{1} << 32;
  EXPECT_THAT((OneInput{.sizes = {2, 2, 2}}.Plan(TileAttrs{{k2To32, k2To32, k2To32}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes [8589934592, 8589934592, 8589934592]: the element "
                          "count overflows 64 bits")));
  constexpr int64_t k2To62 = int64_t{1} << 62;
  EXPECT_THAT((OneInput{.sizes = {4}}.Plan(TileAttrs{{k2To62}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("tile.repeats[0] = 4611686018427387904 times input.sizes[0] = 4 does "
                          "not fit 64 bits")));
}

TEST(TileValidationTest, OutputSizesGivenMustBeTheOutputs) {
  EXPECT_THAT((OneInput{.sizes = {3, 1}}.Plan(TileAttrs{{1, 4}}, {OutputDesc{{3, 1}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [3, 1]; tile produces [3, 4]")));
}

TEST(TileValidationTest, OutputSizesFollowFromTheAttributesAlone) {
  ASSERT_OK_AND_ASSIGN(auto sizes,
                       OutputSizes(TileAttrs{{2, 1, 3}}, {{"input", {DType::kBool, {3, 1, 2}}}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(6, 1, 6)));
}

}  // namespace
}  // namespace tensorop
