// Expand validation (core/validate/expand.h), through core's entry point: every
// rule of OPERATORS.md "Expand" with its status and message, and the window
// (stride 0 where it broadcasts) the output is.
#include "core/validate/expand.h"

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

TEST(ExpandValidationTest, NewAndSizeOneDimensionsStepZero) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {3, 1}}.Plan(ExpandAttrs{{2, 1, 6}})));
  EXPECT_EQ(plan.op, "expand");
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 3, 6));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(0, 1, 0));
}

TEST(ExpandValidationTest, SizesShorterOrSmallerKeepTheInputsSizes) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(ExpandAttrs{{1}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(3, 1));
}

TEST(ExpandValidationTest, BroadcastsBothWays) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {3, 1}}.Plan(ExpandAttrs{{1, 4}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(3, 4));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(1, 0));
}

TEST(ExpandValidationTest, InputStridesCarryThrough) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3}, .strides = {1, 2}}.Plan(ExpandAttrs{{2, 2, 3}})));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(0, 1, 2));
}

TEST(ExpandValidationTest, SizesThatDoNotBroadcastAreRejected) {
  EXPECT_THAT((OneInput{.sizes = {3}}.Plan(ExpandAttrs{{4}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("expand.sizes[0] = 4 does not broadcast with input.sizes[0] = 3: they "
                          "must be equal or one of them 1")));
  // Aligned at the last entry: sizes[1] meets input.sizes[0].
  EXPECT_THAT((OneInput{.sizes = {5, 3}}.Plan(ExpandAttrs{{4, 2, 3}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("expand.sizes[1] = 2 does not broadcast with input.sizes[0] = 5: they "
                          "must be equal or one of them 1")));
}

TEST(ExpandValidationTest, SizesBelowOneAreRejected) {
  EXPECT_THAT(
      (OneInput{.sizes = {1}}.Plan(ExpandAttrs{{0, 3}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("expand.sizes[0] must be >= 1, got 0")));
  EXPECT_THAT(
      (OneInput{.sizes = {1}}.Plan(ExpandAttrs{{3, -1}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("expand.sizes[1] must be >= 1, got -1")));
}

TEST(ExpandValidationTest, SizesOfNoneOrNineEntriesAreRejected) {
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ExpandAttrs{std::vector<int64_t>(9, 1)})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("expand.sizes has 9 entries; expand takes 1..8")));
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ExpandAttrs{})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("expand.sizes has 0 entries; expand takes 1..8")));
}

TEST(ExpandValidationTest, InputRankNineIsRejected) {
  EXPECT_THAT((OneInput{.sizes = std::vector<int64_t>(9, 1)}.Plan(ExpandAttrs{{1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; expand takes rank 1..8")));
}

TEST(ExpandValidationTest, MoreThanTheElementLimitIsExhausted) {
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ExpandAttrs{{65536, 65536}})),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("outputs[0].sizes [65536, 65536] hold 4294967296 elements; the limit "
                          "is 4294967295")));
}

TEST(ExpandValidationTest, ASizeProductPast64BitsIsInvalid) {
  constexpr int64_t k2To32 = int64_t{1} << 32;
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ExpandAttrs{{k2To32, k2To32, k2To32}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes [4294967296, 4294967296, 4294967296]: the element "
                          "count overflows 64 bits")));
}

TEST(ExpandValidationTest, OutputSizesGivenMustBeTheOutputs) {
  EXPECT_THAT((OneInput{.sizes = {3, 1}}.Plan(ExpandAttrs{{3, 4}}, {OutputDesc{{3, 1}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [3, 1]; expand produces [3, 4]")));
}

TEST(ExpandValidationTest, OutputSizesFollowFromTheAttributesAlone) {
  ASSERT_OK_AND_ASSIGN(
      auto sizes, OutputSizes(ExpandAttrs{{2, 1, 6}}, {{"input", {DType::kBfloat16, {3, 1}}}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(2, 3, 6)));
}

}  // namespace
}  // namespace tensorop
