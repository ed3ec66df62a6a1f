// Transpose validation (core/validate/transpose.h), through core's entry point:
// every rule of OPERATORS.md "Transpose" with its status and message, and the
// window (the input's strides, permuted) the output is.
#include "core/validate/transpose.h"

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

TEST(TransposeValidationTest, PermutesSizesAndStrides) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3, 4}}.Plan(TransposeAttrs{{1, 2, 0}})));
  EXPECT_EQ(plan.op, "transpose");
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(3, 4, 2));
  EXPECT_THAT(plan.outputs[0].strides, ElementsAre(8, 2, 1));  // packed
  ASSERT_EQ(plan.windows.size(), 1u);
  EXPECT_EQ(plan.windows[0].base, 0);
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(4, 1, 12));
}

TEST(TransposeValidationTest, AbsentOrEmptyPermReverses) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3, 4}}.Plan(TransposeAttrs{})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(4, 3, 2));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(1, 4, 12));
}

TEST(TransposeValidationTest, InputStridesArePermutedAsGiven) {
  // Broadcast rows (stride 0) and a padded pitch of 5.
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan plan,
      (OneInput{.sizes = {3, 2, 4}, .strides = {0, 5, 1}}.Plan(TransposeAttrs{{2, 0, 1}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(4, 3, 2));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(1, 0, 5));
}

TEST(TransposeValidationTest, SizeOneDimensionsStepZero) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {1, 3}}.Plan(TransposeAttrs{{1, 0}})));
  EXPECT_THAT(plan.windows[0].strides, ElementsAre(1, 0));
}

TEST(TransposeValidationTest, PermOfAnotherLengthIsRejected) {
  EXPECT_THAT((OneInput{.sizes = {2, 3, 4}}.Plan(TransposeAttrs{{1, 0}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("transpose.perm has 2 entries; input has rank 3")));
}

TEST(TransposeValidationTest, RepeatedAxisIsRejectedNamingBothEntries) {
  EXPECT_THAT((OneInput{.sizes = {2, 3, 4}}.Plan(TransposeAttrs{{0, 0, 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("transpose.perm[1] = 0 repeats transpose.perm[0]")));
}

TEST(TransposeValidationTest, AxisOutsideTheRankIsRejected) {
  EXPECT_THAT(
      (OneInput{.sizes = {2, 3, 4}}.Plan(TransposeAttrs{{0, 1, 3}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("transpose.perm[2] = 3 is outside [0, 3)")));
  EXPECT_THAT(
      (OneInput{.sizes = {2, 3}}.Plan(TransposeAttrs{{-1, 0}})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("transpose.perm[0] = -1 is outside [0, 2)")));
}

TEST(TransposeValidationTest, InputRankNineIsRejected) {
  EXPECT_THAT((OneInput{.sizes = std::vector<int64_t>(9, 1)}.Plan(TransposeAttrs{})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; transpose takes rank 1..8")));
}

TEST(TransposeValidationTest, InputZeroSizeIsRejected) {
  EXPECT_THAT(
      (OneInput{.sizes = {2, 0}}.Plan(TransposeAttrs{})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.sizes[1] must be >= 1, got 0")));
}

TEST(TransposeValidationTest, OutputSizesGivenMustBeTheOutputs) {
  EXPECT_THAT((OneInput{.sizes = {2, 3}}.Plan(TransposeAttrs{{1, 0}}, {OutputDesc{{2, 3}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [2, 3]; transpose produces [3, 2]")));
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(TransposeAttrs{{1, 0}},
                                                                           {OutputDesc{{3, 2}}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(3, 2));
}

TEST(TransposeValidationTest, OutputStridesLayTheOutputOut) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, (OneInput{.sizes = {2, 3}}.Plan(
                                               TransposeAttrs{{1, 0}}, {OutputDesc{{}, {1, 3}}})));
  EXPECT_THAT(plan.outputs[0].strides, ElementsAre(1, 3));
  EXPECT_THAT((OneInput{.sizes = {2, 3}}.Plan(TransposeAttrs{{1, 0}}, {OutputDesc{{}, {0, 1}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("outputs[0]")));
}

TEST(TransposeValidationTest, TwoOutputsAreRejected) {
  EXPECT_THAT((OneInput{.sizes = {2, 3}}.Plan(TransposeAttrs{}, {OutputDesc{}, OutputDesc{}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 2 entries; transpose has exactly one output")));
}

TEST(TransposeValidationTest, OutputSizesFollowFromTheAttributesAlone) {
  ASSERT_OK_AND_ASSIGN(
      auto sizes, OutputSizes(TransposeAttrs{{2, 0, 1}}, {{"input", {DType::kInt8, {2, 3, 4}}}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(4, 2, 3)));
  EXPECT_THAT((OutputSizes(TransposeAttrs{{0}}, {{"input", {DType::kInt8, {2, 3}}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("transpose.perm has 1 entries; input has rank 2")));
}

}  // namespace
}  // namespace tensorop
