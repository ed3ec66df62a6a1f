// Join validation (core/validate/join.h), the binding of its numbered inputs
// (core/operator.cc) and its plan: every rule of OPERATORS.md "Join" with its
// status and message, and the copies it plans.
#include "core/validate/join.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/plan/join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/held_tensor.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::HeldTensor;
using ::tensorop::testing::StatusIs;
using ::tensorop::testing::Zeros;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

class JoinValidationTest : public ::testing::Test {
 protected:
  // Default request: inputs_0 float32 [2, 3] and inputs_1 float32 [2, 4], axis 1.
  JoinValidationTest() { held_ = {Zeros(DType::kFloat32, {2, 3}), Zeros(DType::kFloat32, {2, 4})}; }

  // PlanOperator's answer for the held tensors named inputs_0, inputs_1, ...
  // (or `names`, in turn).
  absl::StatusOr<ExecutionPlan> Plan(int64_t axis, std::vector<std::string> names = {},
                                     std::vector<OutputDesc> outputs = {}) {
    OpRequest request{.attrs = JoinAttrs{axis}, .outputs = std::move(outputs)};
    for (size_t k = 0; k < held_.size(); ++k) {
      request.inputs.push_back(
          {k < names.size() ? names[k] : absl::StrCat("inputs_", k), held_[k].view()});
    }
    return PlanOperator(request, limits_);
  }

  std::vector<HeldTensor> held_;
  Limits limits_;
};

TEST_F(JoinValidationTest, OutputIsTheInputsOneAfterAnotherAlongTheAxis) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(1));
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 7));
  EXPECT_THAT(plan.input_names, ElementsAre("inputs_0", "inputs_1"));
  // One copy per input, each into its columns of the packed [2, 7] output.
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.copies[0].input_slot, 0);
  EXPECT_EQ(plan.copies[0].dst_offset, 0);
  EXPECT_THAT(plan.copies[0].sizes, ElementsAre(2, 3));
  EXPECT_THAT(plan.copies[0].dst_strides, ElementsAre(28, 4));
  EXPECT_EQ(plan.copies[1].input_slot, 1);
  EXPECT_EQ(plan.copies[1].dst_offset, 3 * 4);
  EXPECT_THAT(plan.copies[1].sizes, ElementsAre(2, 4));
  EXPECT_EQ(plan.bytes_moved, 2 * 7 * 4);
}

TEST_F(JoinValidationTest, AlongTheOutermostAxisEachInputIsOneRun) {
  held_ = {Zeros(DType::kInt8, {1, 5}), Zeros(DType::kInt8, {3, 5})};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(0));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(4, 5));
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_THAT(plan.copies[1].sizes, ElementsAre(15));
  EXPECT_EQ(plan.copies[1].dst_offset, 5);
}

TEST_F(JoinValidationTest, OneInputIsACopy) {
  held_ = {Zeros(DType::kUint8, {2, 3})};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(1));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(2, 3));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_THAT(plan.copies[0].sizes, ElementsAre(6));
}

TEST_F(JoinValidationTest, OutputStridesAreFollowed) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(1, {}, {OutputDesc{{2, 7}, {1, 2}}}));
  EXPECT_THAT(plan.outputs[0].strides, ElementsAre(1, 2));
  EXPECT_EQ(plan.copies[1].dst_offset, 3 * 2 * 4);
}

TEST_F(JoinValidationTest, InputsAreBoundInNumericOrder) {
  held_.clear();
  for (int k = 0; k < 12; ++k) held_.push_back(Zeros(DType::kInt8, {1 + k}));
  std::vector<std::string> names;
  for (int k = 11; k >= 0; --k) names.push_back(absl::StrCat("inputs_", k));
  std::reverse(held_.begin(), held_.end());  // held_[i] is named names[i]
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(0, names));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(78));
  ASSERT_EQ(plan.copies.size(), 12u);
  // inputs_10 (11 elements) follows inputs_9 (10), from 1 + 2 + ... + 10.
  EXPECT_EQ(plan.input_names[10], "inputs_10");
  EXPECT_EQ(plan.copies[10].dst_offset, 55);
  EXPECT_EQ(plan.copies[10].element_count, 11);
}

TEST_F(JoinValidationTest, NoInputIsRejected) {
  held_.clear();
  EXPECT_THAT(Plan(0), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("inputs is empty; join takes one or more, \"inputs_0\" first")));
}

TEST_F(JoinValidationTest, AGapInTheNumbersIsRejected) {
  EXPECT_THAT(Plan(1, {"inputs_0", "inputs_2"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("inputs has \"inputs_2\" but not \"inputs_1\"; join's inputs are "
                          "numbered from \"inputs_0\" without gaps")));
}

TEST_F(JoinValidationTest, NamesOutsideTheNumberingAreRejected) {
  for (const char* name : {"input", "inputs_01", "inputs_", "inputs_1x", "inputs_-1"}) {
    EXPECT_THAT(Plan(1, {"inputs_0", name}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         Eq(absl::StrCat("inputs has \"", name,
                                         "\"; join takes \"inputs_0\", \"inputs_1\", ... "
                                         "(numbered from 0 in decimal)"))))
        << name;
  }
}

TEST_F(JoinValidationTest, ANumberGivenTwiceIsRejected) {
  EXPECT_THAT(
      Plan(1, {"inputs_0", "inputs_0"}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("inputs has \"inputs_0\" more than once")));
}

TEST_F(JoinValidationTest, MoreThanTheMostInputsIsResourceExhausted) {
  held_.assign(kMaxNumberedInputs + 1, Zeros(DType::kInt8, {1}));
  EXPECT_THAT(Plan(0), StatusIs(absl::StatusCode::kResourceExhausted,
                                Eq("inputs has 4097 entries; join takes at most 4096")));
  held_.pop_back();
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, Plan(0));
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(4096));
  EXPECT_EQ(plan.input_names.back(), "inputs_4095");
}

TEST_F(JoinValidationTest, DtypesThatDifferAreRejected) {
  held_[1] = Zeros(DType::kFloat64, {2, 4});
  EXPECT_THAT(Plan(1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("inputs_1.dtype is float64; inputs_0.dtype is float32 (join's inputs "
                          "have one dtype)")));
}

TEST_F(JoinValidationTest, RanksThatDifferAreRejected) {
  held_[1] = Zeros(DType::kFloat32, {2});
  EXPECT_THAT(Plan(0), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("inputs_1 has rank 1; inputs_0 has rank 2 (join's inputs have "
                                   "one rank)")));
}

TEST_F(JoinValidationTest, AnAxisOutsideTheRankIsRejected) {
  EXPECT_THAT(Plan(2),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("join.axis = 2 is outside [0, 2)")));
  // ONNX's negative axis is not taken (as in Split and DirectML).
  EXPECT_THAT(Plan(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("join.axis = -1 is outside [0, 2)")));
}

TEST_F(JoinValidationTest, SizesOutsideTheAxisMustAgree) {
  held_[1] = Zeros(DType::kFloat32, {3, 4});
  EXPECT_THAT(Plan(1), StatusIs(absl::StatusCode::kInvalidArgument,
                                Eq("inputs_1.sizes[0] = 3 must equal inputs_0.sizes[0] = 2 "
                                   "(only join.axis = 1 may differ)")));
}

TEST_F(JoinValidationTest, GivenOutputSizesMustBeTheJoinedOnes) {
  EXPECT_THAT(Plan(1, {}, {OutputDesc{{2, 6}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[2, 7]")));
}

TEST_F(JoinValidationTest, AnInputBreakingItsOwnRulesIsNamed) {
  held_[1] = Zeros(DType::kFloat32, {2, 0});
  EXPECT_THAT(Plan(1), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inputs_1.sizes")));
}

// Two broadcast inputs of 2^31 elements each (4 bytes of data between them)
// would join into 2^32: refused before anything is allocated.
TEST_F(JoinValidationTest, AnOutputPastTheElementLimitIsResourceExhausted) {
  for (HeldTensor& input : held_) {
    input = Zeros(DType::kUint8, {1});
    input.desc.sizes = {32768, 65536};
    input.desc.strides = {0, 0};
  }
  EXPECT_THAT(Plan(0), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("4294967296")));
}

TEST(JoinOutputSizesTest, FollowFromTheNumberedInputs) {
  ASSERT_OK_AND_ASSIGN(auto sizes,
                       OutputSizes(JoinAttrs{0}, {{"inputs_1", {DType::kBool, {2, 3}}},
                                                  {"inputs_0", {DType::kBool, {1, 3}}}}));
  EXPECT_THAT(sizes, ElementsAre(ElementsAre(3, 3)));
  EXPECT_THAT(OutputSizes(JoinAttrs{0}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inputs is empty")));
  EXPECT_THAT(OutputSizes(JoinAttrs{1}, {{"inputs_0", {DType::kBool, {2, 3}}},
                                         {"inputs_1", {DType::kBool, {1, 3}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inputs_1.sizes[0] = 1")));
}

}  // namespace
}  // namespace tensorop
