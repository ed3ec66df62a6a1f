// The per-operator descriptions (core/operator_info.h) every layer reads: the
// table follows OpAttrs, and the output rules give validation's messages.
#include "core/operator_info.h"

#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/operator.h"
#include "core/plan/plan.h"
#include "core/validate/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

TEST(OperatorInfoTest, TableFollowsOpAttrsAndOperatorsMd) {
  static_assert(InfoOf<SliceAttrs>().name == "slice");
  static_assert(InfoOf<StridedSliceAttrs>().name == "strided_slice");
  static_assert(InfoOf<SplitAttrs>().name == "split");
  static_assert(InfoOf<ScatterElementsAttrs>().name == "scatter_elements");
  EXPECT_EQ(&InfoOf(OpAttrs{SplitAttrs{}}), &InfoOf<SplitAttrs>());
  EXPECT_EQ(OpName(OpAttrs{ScatterElementsAttrs{}}), "scatter_elements");
  EXPECT_EQ(OpName(OpAttrs{StridedSliceAttrs{}}), "strided_slice");
}

TEST(OperatorInfoTest, InputNamesInSlotOrder) {
  EXPECT_THAT(InfoOf<SliceAttrs>().input_names, ElementsAre("input"));
  EXPECT_THAT(InfoOf<StridedSliceAttrs>().input_names, ElementsAre("input"));
  EXPECT_THAT(InfoOf<SplitAttrs>().input_names, ElementsAre("input"));
  EXPECT_THAT(InfoOf<ScatterElementsAttrs>().input_names,
              ElementsAre("input", "indices", "updates"));
  const ExecutionPlan plan = EmptyPlan(InfoOf<ScatterElementsAttrs>());
  EXPECT_EQ(plan.op, "scatter_elements");
  EXPECT_THAT(plan.input_names, ElementsAre("input", "indices", "updates"));
}

TEST(OperatorInfoTest, RankRules) {
  for (const OperatorInfo& op : kOperators) {
    EXPECT_EQ(op.input_rank.op, op.name);
    EXPECT_EQ(op.input_rank.min_rank, 1) << op.name;
  }
  EXPECT_EQ(InfoOf<SliceAttrs>().input_rank.max_rank, 8);
  EXPECT_FALSE(InfoOf<SliceAttrs>().input_rank.allow_zero_sizes);
  EXPECT_EQ(InfoOf<StridedSliceAttrs>().input_rank.max_rank, 32);
  EXPECT_TRUE(InfoOf<StridedSliceAttrs>().input_rank.allow_zero_sizes);
  EXPECT_EQ(InfoOf<SplitAttrs>().input_rank.max_rank, 8);
  EXPECT_EQ(InfoOf<ScatterElementsAttrs>().input_rank.max_rank, 8);
}

TEST(OperatorInfoTest, OutputNames) {
  EXPECT_EQ(OutputName(0), "outputs[0]");
  EXPECT_EQ(OutputName(12), "outputs[12]");
}

TEST(OperatorInfoTest, OutputCountPerRule) {
  const OperatorInfo& slice = InfoOf<SliceAttrs>();
  EXPECT_TRUE(CheckOutputCount(slice, 1).ok());
  EXPECT_THAT(CheckOutputCount(slice, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 0 entries; slice has exactly one output")));
  EXPECT_THAT(CheckOutputCount(slice, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 2 entries; slice has exactly one output")));

  const OperatorInfo& scatter = InfoOf<ScatterElementsAttrs>();
  EXPECT_TRUE(CheckOutputCount(scatter, 0).ok());
  EXPECT_TRUE(CheckOutputCount(scatter, 1).ok());
  EXPECT_THAT(CheckOutputCount(scatter, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 3 entries; scatter_elements has exactly one output")));
  EXPECT_TRUE(CheckOutputCount(InfoOf<StridedSliceAttrs>(), 0).ok());

  const OperatorInfo& split = InfoOf<SplitAttrs>();
  EXPECT_TRUE(CheckOutputCount(split, 1).ok());
  EXPECT_TRUE(CheckOutputCount(split, 5).ok());
  EXPECT_THAT(CheckOutputCount(split, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs is empty; split needs at least one output")));
}

TEST(OperatorInfoTest, OptionalAttributesAreStridedSlicesDefaults) {
  EXPECT_THAT(InfoOf<StridedSliceAttrs>().optional_attrs,
              ElementsAre("stride", "begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask",
                          "ellipsis_mask"));
  EXPECT_THAT(InfoOf<SliceAttrs>().optional_attrs, ElementsAre());
  EXPECT_THAT(InfoOf<SplitAttrs>().optional_attrs, ElementsAre());
  EXPECT_THAT(InfoOf<ScatterElementsAttrs>().optional_attrs, ElementsAre());
}

// OutputSizes' answer for `attrs` on `input`, or a failed expectation.
std::vector<std::vector<int64_t>> SizesOf(const OpAttrs& attrs, const TensorDesc& input,
                                          std::vector<int64_t> split_sizes = {}) {
  absl::StatusOr<std::vector<std::vector<int64_t>>> sizes =
      OutputSizes(attrs, {{"input", input}}, split_sizes);
  EXPECT_TRUE(sizes.ok()) << sizes.status();
  return sizes.value_or(std::vector<std::vector<int64_t>>{});
}

TEST(OperatorInfoTest, OutputSizesFollowFromAttributesAndInputSizes) {
  const TensorDesc input{.dtype = DType::kFloat32, .sizes = {4, 5}};
  // Slice: each window's elements its stride reaches.
  EXPECT_THAT(
      SizesOf(SliceAttrs{.offsets = {0, 0}, .window_sizes = {2, 5}, .window_strides = {1, -2}},
              input),
      ElementsAre(ElementsAre(2, 3)));
  // A window that breaks a rule keeps its size, for planning to name.
  EXPECT_THAT(
      SizesOf(SliceAttrs{.offsets = {0, 0}, .window_sizes = {0, 5}, .window_strides = {1, 0}},
              input),
      ElementsAre(ElementsAre(0, 5)));
  // Strided slice: checked as planning checks it.
  EXPECT_THAT(SizesOf(StridedSliceAttrs{.begin = {1}, .end = {3}}, input),
              ElementsAre(ElementsAre(2, 5)));
  EXPECT_THAT(
      OutputSizes(StridedSliceAttrs{.begin = {1}, .end = {3}, .stride = {0}}, {{"input", input}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("stride[0]")));
  // Split: the given sizes along the axis, from either end; an axis out of
  // range is left for planning to name.
  EXPECT_THAT(SizesOf(SplitAttrs{.axis = 1}, input, {2, 3}),
              ElementsAre(ElementsAre(4, 2), ElementsAre(4, 3)));
  EXPECT_THAT(SizesOf(SplitAttrs{.axis = -2}, input, {2, 3}),
              ElementsAre(ElementsAre(2, 5), ElementsAre(3, 5)));
  EXPECT_THAT(SizesOf(SplitAttrs{.axis = 2}, input, {2, 3}),
              ElementsAre(ElementsAre(4, 5), ElementsAre(4, 5)));
  // Scatter: the input's sizes.
  EXPECT_THAT(SizesOf(ScatterElementsAttrs{.axis = 1}, input), ElementsAre(ElementsAre(4, 5)));
}

TEST(OperatorInfoTest, OutputSizesAreThoseThePlanGives) {
  const std::vector<float> values(20);
  const TensorView input{.desc = {.dtype = DType::kFloat32, .sizes = {4, 5}},
                         .data = std::as_bytes(std::span(values))};
  const OpAttrs slice =
      SliceAttrs{.offsets = {1, 0}, .window_sizes = {3, 5}, .window_strides = {2, -3}};
  const std::vector<std::vector<int64_t>> slice_sizes = SizesOf(slice, input.desc);
  ASSERT_THAT(slice_sizes, ElementsAre(ElementsAre(2, 2)));
  ASSERT_OK_AND_ASSIGN(ExecutionPlan slice_plan,
                       PlanOperator(OpRequest{.attrs = slice,
                                              .inputs = {{"input", input}},
                                              .outputs = {OutputDesc{.sizes = slice_sizes[0]}}},
                                    Limits{}));
  EXPECT_EQ(slice_plan.outputs[0].sizes, slice_sizes[0]);

  const OpAttrs strided = StridedSliceAttrs{.begin = {3, 0}, .end = {0, 5}, .stride = {-1, 2}};
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan strided_plan,
      PlanOperator(OpRequest{.attrs = strided, .inputs = {{"input", input}}}, Limits{}));
  EXPECT_THAT(SizesOf(strided, input.desc), ElementsAre(strided_plan.outputs[0].sizes));
}

}  // namespace
}  // namespace tensorop
