// The per-operator descriptions (core/operator_info.h) every layer reads: the
// table follows OpAttrs, and the output rules give validation's messages.
#include "core/operator_info.h"

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

}  // namespace
}  // namespace tensorop
