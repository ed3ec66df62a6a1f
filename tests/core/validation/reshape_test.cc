// Reshape validation (core/validate/reshape.h), through core's entry point:
// every rule of OPERATORS.md "Reshape" with its status and message.
#include "core/validate/reshape.h"

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

const OneInput kTwoByThree{.sizes = {2, 3}};

TEST(ReshapeValidationTest, SizesAreTheOutputs) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3, 4}}.Plan(ReshapeAttrs{{4, 2, 3}})));
  EXPECT_EQ(plan.op, "reshape");
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(4, 2, 3));
}

TEST(ReshapeValidationTest, MinusOneTakesTheRestOfTheCount) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3, 4}}.Plan(ReshapeAttrs{{2, -1, 2}})));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 6, 2));
  ASSERT_OK_AND_ASSIGN(plan, kTwoByThree.Plan(ReshapeAttrs{{-1}}));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(6));
}

TEST(ReshapeValidationTest, ASecondMinusOneIsRejected) {
  EXPECT_THAT(
      (kTwoByThree.Plan(ReshapeAttrs{{-1, -1}})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("reshape.sizes[1] is a second -1 (reshape.sizes[0] is one); at most one")));
}

TEST(ReshapeValidationTest, ZeroIsRejectedNotCopied) {
  EXPECT_THAT((OneInput{.sizes = {2, 3, 4}}.Plan(ReshapeAttrs{{2, 0, 4}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes[1] must be >= 1 or -1, got 0")));
}

TEST(ReshapeValidationTest, OtherNegativeSizesAreRejected) {
  EXPECT_THAT((OneInput{.sizes = {6}}.Plan(ReshapeAttrs{{-2, -3}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes[0] must be >= 1 or -1, got -2")));
}

TEST(ReshapeValidationTest, ACountThatDiffersIsRejected) {
  EXPECT_THAT((kTwoByThree.Plan(ReshapeAttrs{{4, 2}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes [4, 2] hold 8 elements; the input has 6")));
  EXPECT_THAT((kTwoByThree.Plan(ReshapeAttrs{{5}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes [5] hold 5 elements; the input has 6")));
}

TEST(ReshapeValidationTest, AMinusOneThatDoesNotDivideIsRejected) {
  EXPECT_THAT((kTwoByThree.Plan(ReshapeAttrs{{4, -1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes [4, -1]: the input's 6 elements are not a multiple of "
                          "4, the product of the other entries")));
}

TEST(ReshapeValidationTest, SizesPastTheCountStopBeforeTheyOverflow) {
  constexpr int64_t kHuge = int64_t{1} << 40;
  EXPECT_THAT((kTwoByThree.Plan(ReshapeAttrs{{kHuge, kHuge, -1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes [1099511627776, 1099511627776, -1] hold more than the "
                          "input's 6 elements")));
}

TEST(ReshapeValidationTest, SizesOfNoneOrNineEntriesAreRejected) {
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ReshapeAttrs{std::vector<int64_t>(9, 1)})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes has 9 entries; reshape takes 1..8")));
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(ReshapeAttrs{})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("reshape.sizes has 0 entries; reshape takes 1..8")));
}

TEST(ReshapeValidationTest, InputRankNineIsRejected) {
  EXPECT_THAT((OneInput{.sizes = std::vector<int64_t>(9, 1)}.Plan(ReshapeAttrs{{1}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; reshape takes rank 1..8")));
}

TEST(ReshapeValidationTest, OutputSizesGivenMustBeTheOutputs) {
  EXPECT_THAT((kTwoByThree.Plan(ReshapeAttrs{{3, -1}}, {OutputDesc{{2, 3}}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [2, 3]; reshape produces [3, 2]")));
}

TEST(ReshapeValidationTest, OutputSizesFollowFromTheInputsCount) {
  ASSERT_OK_AND_ASSIGN(auto sizes,
                       OutputSizes(ReshapeAttrs{{-1, 4}}, {{"input", {DType::kBool, {2, 3, 4}}}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(6, 4)));
}

}  // namespace
}  // namespace tensorop
