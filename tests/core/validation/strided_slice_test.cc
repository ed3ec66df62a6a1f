// StridedSlice validation (core/validate/strided_slice.h): every rule of
// OPERATORS.md "StridedSlice" with its exact status code and message, and the
// output geometry each semantic rule produces. (About 620 lines, past the
// project's ~600: one file per operator stem, as check_operators.py expects,
// with a test per rule in the spec's order; StridedSlice has the most rules.)
#include "core/validate/strided_slice.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/int64_extremes.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::kInt64Max;
using ::tensorop::testing::kInt64Min;
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::IsEmpty;

class StridedSliceValidationTest : public ::testing::Test {
 protected:
  // A packed float32 input of `sizes` over a zeroed buffer the fixture owns.
  void SetInput(std::vector<int64_t> sizes) {
    int64_t elements = 1;
    for (int64_t size : sizes) elements *= size;
    data_.assign(static_cast<size_t>(elements) * 4, std::byte{0});
    input_ = TensorView{TensorDesc{DType::kFloat32, std::move(sizes), {}}, data_};
  }

  // Validates without output descriptions (the output is packed).
  absl::StatusOr<StridedSliceGeometry> Run(const StridedSliceAttrs& attrs) {
    return ValidateStridedSlice(attrs, input_, {}, limits_);
  }

  absl::StatusOr<StridedSliceGeometry> RunWithOutputs(const StridedSliceAttrs& attrs,
                                                      std::vector<OutputDesc> outputs) {
    outputs_ = std::move(outputs);
    return ValidateStridedSlice(attrs, input_, outputs_, limits_);
  }

  std::vector<std::byte> data_;
  TensorView input_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

// Attrs for ranges only: begin, end and stride of one length.
StridedSliceAttrs Ranges(std::vector<int64_t> begin, std::vector<int64_t> end,
                         std::vector<int64_t> stride = {}) {
  StridedSliceAttrs attrs;
  attrs.begin = std::move(begin);
  attrs.end = std::move(end);
  attrs.stride = std::move(stride);
  return attrs;
}

// --- Input tensor ----------------------------------------------------------------

TEST_F(StridedSliceValidationTest, InputRankThirtyThreeIsRejected) {
  SetInput(std::vector<int64_t>(33, 1));
  EXPECT_THAT(Run(Ranges({}, {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 33 dimensions; strided_slice takes rank 1..32")));
}

TEST_F(StridedSliceValidationTest, InputRankThirtyTwoIsAccepted) {
  SetInput(std::vector<int64_t>(32, 1));
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({}, {})));
  EXPECT_EQ(geometry.output.sizes.size(), 32u);
}

TEST_F(StridedSliceValidationTest, InputZeroSizeIsAcceptedAndGivesAnEmptyOutput) {
  SetInput({0, 3});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({0, 1}, {0, 3})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(0, 2));
  EXPECT_EQ(geometry.output.element_count, 0);
  EXPECT_EQ(geometry.output.buffer_elements, 0);
  EXPECT_EQ(geometry.window.base, 0);
}

// --- Parameter lengths --------------------------------------------------------------

TEST_F(StridedSliceValidationTest, EndOfOtherLengthThanBeginIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(Ranges({0, 0}, {1})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice.end has 1 entries; strided_slice.begin has 2")));
}

TEST_F(StridedSliceValidationTest, StrideOfOtherLengthThanBeginIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(Ranges({0, 0}, {1, 1}, {1, 1, 1})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice.stride has 3 entries; strided_slice.begin has 2")));
}

TEST_F(StridedSliceValidationTest, EmptyStrideMeansAllOnes) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({1, 1}, {3, 5})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 4));
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 1));
}

TEST_F(StridedSliceValidationTest, NoStepsCopiesTheWholeInput) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({}, {})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(4, 6));
  EXPECT_EQ(geometry.window.base, 0);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 1));
}

// --- Mask values ---------------------------------------------------------------------

struct MaskCase {
  std::string name;
  std::vector<int64_t> StridedSliceAttrs::*field;
};

class StridedSliceMaskValueTest : public StridedSliceValidationTest,
                                  public ::testing::WithParamInterface<MaskCase> {};

TEST_P(StridedSliceMaskValueTest, ValueTwoNamesMaskAndIndex) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 0}, {1, 1});
  attrs.*GetParam().field = {0, 2};
  EXPECT_THAT(Run(attrs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice." + GetParam().name + "[1] must be 0 or 1, got 2")));
}

TEST_P(StridedSliceMaskValueTest, NegativeValueIsRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 0}, {1, 1});
  attrs.*GetParam().field = {-1};
  EXPECT_THAT(Run(attrs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice." + GetParam().name + "[0] must be 0 or 1, got -1")));
}

TEST_P(StridedSliceMaskValueTest, EntriesPastTheStepCountAreIgnoredEvenInvalid) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1}, {3});
  attrs.*GetParam().field = {0, 7, 1, 1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 6));
}

INSTANTIATE_TEST_SUITE_P(
    AllMasks, StridedSliceMaskValueTest,
    ::testing::Values(MaskCase{"begin_mask", &StridedSliceAttrs::begin_mask},
                      MaskCase{"end_mask", &StridedSliceAttrs::end_mask},
                      MaskCase{"new_axis_mask", &StridedSliceAttrs::new_axis_mask},
                      MaskCase{"shrink_axis_mask", &StridedSliceAttrs::shrink_axis_mask},
                      MaskCase{"ellipsis_mask", &StridedSliceAttrs::ellipsis_mask}),
    [](const ::testing::TestParamInfo<MaskCase>& info) { return info.param.name; });

TEST_F(StridedSliceValidationTest, MissingMaskEntriesAreZero) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1, 1}, {3, 5});
  attrs.begin_mask = {1};  // step 1 has no entry: not masked
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3, 4));
}

// --- Step kinds -------------------------------------------------------------------------

TEST_F(StridedSliceValidationTest, NewAxisAndShrinkAtOneStepAreRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 0}, {1, 1});
  attrs.new_axis_mask = {0, 1};
  attrs.shrink_axis_mask = {0, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice step 1 sets more than one of ellipsis_mask, "
                                      "new_axis_mask, shrink_axis_mask")));
}

TEST_F(StridedSliceValidationTest, EllipsisAndNewAxisAtOneStepAreRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0}, {1});
  attrs.ellipsis_mask = {1};
  attrs.new_axis_mask = {1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice step 0 sets more than one of ellipsis_mask, "
                                      "new_axis_mask, shrink_axis_mask")));
}

TEST_F(StridedSliceValidationTest, EllipsisAndShrinkAtOneStepAreRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0}, {1});
  attrs.ellipsis_mask = {1};
  attrs.shrink_axis_mask = {1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice step 0 sets more than one of ellipsis_mask, "
                                      "new_axis_mask, shrink_axis_mask")));
}

TEST_F(StridedSliceValidationTest, TwoEllipsisBitsNameBothSteps) {
  SetInput({2, 3, 4});
  StridedSliceAttrs attrs = Ranges({0, 0, 0}, {1, 1, 1});
  attrs.ellipsis_mask = {1, 0, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.ellipsis_mask has more than one bit set "
                                      "(steps 0 and 2)")));
}

TEST_F(StridedSliceValidationTest, MoreConsumingStepsThanRankAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(Ranges({0, 0, 0}, {1, 1, 1})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice consumes 3 input dimensions; input has rank 2")));
}

TEST_F(StridedSliceValidationTest, ShrinkStepsConsumeInputDimensions) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 0, 0}, {1, 1, 1});
  attrs.shrink_axis_mask = {1, 1, 1};
  EXPECT_THAT(Run(attrs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("strided_slice consumes 3 input dimensions; input has rank 2")));
}

TEST_F(StridedSliceValidationTest, NewAxisAndEllipsisStepsConsumeNothing) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 0, 0, 0}, {1, 1, 1, 1});
  attrs.new_axis_mask = {1, 0, 0, 1};
  attrs.ellipsis_mask = {0, 1, 0, 0};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  // new axis, ellipsis over dim 0, range 0:1 over dim 1, new axis.
  EXPECT_THAT(geometry.output.sizes, ElementsAre(1, 4, 1, 1));
}

// --- Shrink -----------------------------------------------------------------------------

TEST_F(StridedSliceValidationTest, ShrinkIndexPastTheEndIsRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 6}, {0, 0});
  attrs.shrink_axis_mask = {0, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.begin[1] = 6 is outside [-6, 6) of "
                                      "input.sizes[1] = 6 (shrink_axis_mask[1] is 1)")));
}

TEST_F(StridedSliceValidationTest, ShrinkIndexBeforeTheStartIsRejected) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, -7}, {0, 0});
  attrs.shrink_axis_mask = {0, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.begin[1] = -7 is outside [-6, 6) of "
                                      "input.sizes[1] = 6 (shrink_axis_mask[1] is 1)")));
}

TEST_F(StridedSliceValidationTest, ShrinkIndexInt64MinIsRejectedWithoutOverflow) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({kInt64Min}, {0});
  attrs.shrink_axis_mask = {1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.begin[0] = -9223372036854775808 is outside "
                                      "[-4, 4) of input.sizes[0] = 4 (shrink_axis_mask[0] is 1)")));
}

TEST_F(StridedSliceValidationTest, ShrinkErrorNamesStepAndInputDimensionSeparately) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 9}, {0, 0});
  attrs.new_axis_mask = {1, 0};
  attrs.shrink_axis_mask = {0, 1};
  // Step 1 consumes input dimension 0 (step 0 is a new axis).
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.begin[1] = 9 is outside [-4, 4) of "
                                      "input.sizes[0] = 4 (shrink_axis_mask[1] is 1)")));
}

TEST_F(StridedSliceValidationTest, ShrinkOnAnEmptyDimensionIsRejected) {
  SetInput({0, 6});
  StridedSliceAttrs attrs = Ranges({0}, {0});
  attrs.shrink_axis_mask = {1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("strided_slice.begin[0] = 0 is outside [0, 0) of "
                                      "input.sizes[0] = 0 (shrink_axis_mask[0] is 1)")));
}

TEST_F(StridedSliceValidationTest, ShrinkNegativeIndexCountsFromTheEnd) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1, -6}, {4, 0});
  attrs.shrink_axis_mask = {0, 1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3));
  EXPECT_EQ(geometry.window.base, 1 * 6 + 0);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6));
}

TEST_F(StridedSliceValidationTest, ShrinkIgnoresBeginMaskEndAndStride) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({2}, {0}, {0});
  attrs.begin_mask = {1};
  attrs.end_mask = {1};
  attrs.shrink_axis_mask = {1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(6));
  EXPECT_EQ(geometry.window.base, 2 * 6);
}

TEST_F(StridedSliceValidationTest, AllShrunkGivesARankZeroOutputOfOneElement) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({2, -1}, {0, 0});
  attrs.shrink_axis_mask = {1, 1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, IsEmpty());
  EXPECT_THAT(geometry.output.strides, IsEmpty());
  EXPECT_EQ(geometry.output.element_count, 1);
  EXPECT_EQ(geometry.output.buffer_elements, 1);
  EXPECT_EQ(geometry.window.base, 2 * 6 + 5);
  EXPECT_THAT(geometry.window.strides, IsEmpty());
}

// --- Stride ------------------------------------------------------------------------------

TEST_F(StridedSliceValidationTest, ZeroStrideOnARangeStepIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run(Ranges({0, 0}, {4, 6}, {1, 0})),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("strided_slice.stride[1] must not be 0")));
}

TEST_F(StridedSliceValidationTest, ZeroStrideOnShrinkStepIsIgnored) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1, 0}, {0, 6}, {0, 1});
  attrs.shrink_axis_mask = {1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(6));
}

TEST_F(StridedSliceValidationTest, NewAxisIgnoresBeginEndAndZeroStride) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1234, 0}, {-9876, 4}, {0, 1});
  attrs.new_axis_mask = {1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(1, 4, 6));
  EXPECT_THAT(geometry.window.strides, ElementsAre(0, 6, 1));
}

TEST_F(StridedSliceValidationTest, ZeroStrideOnEllipsisStepIsIgnored) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({0, 1}, {0, 3}, {0, 1});
  attrs.ellipsis_mask = {1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(4, 2));
}

// --- Output rank and outputs -----------------------------------------------------------

TEST_F(StridedSliceValidationTest, OutputRankOverTheLimitIsResourceExhausted) {
  SetInput({4, 6});
  limits_.max_output_rank = 3;
  StridedSliceAttrs attrs = Ranges({0, 0}, {0, 0});
  attrs.new_axis_mask = {1, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kResourceExhausted,
                                   Eq("strided_slice output has rank 4; the limit is 3")));
}

TEST_F(StridedSliceValidationTest, NewAxesAloneOverTheRankLimitAreResourceExhausted) {
  SetInput({4});
  limits_.max_output_rank = 2;
  StridedSliceAttrs attrs = Ranges({0, 0, 0}, {0, 0, 0});
  attrs.new_axis_mask = {1, 1, 1};
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kResourceExhausted,
                                   Eq("strided_slice.new_axis_mask adds 3 dimensions; "
                                      "the output rank limit is 2")));
}

TEST_F(StridedSliceValidationTest, DefaultLimitRefusesRank32InputPlus33NewAxes) {
  SetInput(std::vector<int64_t>(32, 1));
  const std::vector<int64_t> zeros(33, 0);
  StridedSliceAttrs attrs = Ranges(zeros, zeros);
  attrs.new_axis_mask.assign(33, 1);
  EXPECT_THAT(Run(attrs), StatusIs(absl::StatusCode::kResourceExhausted,
                                   Eq("strided_slice output has rank 65; the limit is 64")));
}

TEST_F(StridedSliceValidationTest, OutputRankAtTheLimitIsAccepted) {
  SetInput({4, 6});
  limits_.max_output_rank = 4;
  StridedSliceAttrs attrs = Ranges({0, 0}, {0, 0});
  attrs.new_axis_mask = {1, 1};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(1, 1, 4, 6));
}

TEST_F(StridedSliceValidationTest, OutputSizesMismatchNamesBoth) {
  SetInput({4, 6});
  EXPECT_THAT(RunWithOutputs(Ranges({0, 0}, {2, 2}), {OutputDesc{{2, 3}, {}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes is [2, 3]; strided_slice produces [2, 2]")));
}

TEST_F(StridedSliceValidationTest, TwoOutputsAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      RunWithOutputs(Ranges({0, 0}, {2, 2}), {OutputDesc{{2, 2}, {}}, OutputDesc{{2, 2}, {}}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("outputs has 2 entries; strided_slice has exactly one output")));
}

TEST_F(StridedSliceValidationTest, MatchingOutputSizesWithStridesAreUsed) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry,
                       RunWithOutputs(Ranges({0, 0}, {2, 3}), {OutputDesc{{2, 3}, {1, 2}}}));
  EXPECT_THAT(geometry.output.strides, ElementsAre(1, 2));
}

TEST_F(StridedSliceValidationTest, OutputOverlappingStridesAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(RunWithOutputs(Ranges({0, 0}, {2, 2}), {OutputDesc{{2, 2}, {1, 1}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides [1, 1] overlap: dimension 1 (stride 1) steps inside "
                          "offsets 0..1, which the dimensions with smaller strides already "
                          "address")));
}

// --- Range geometry (rank 1, n = 10) --------------------------------------------------

class StridedSliceRangeTest : public StridedSliceValidationTest {
 protected:
  void SetUp() override { SetInput({10}); }

  // The output size and (when non-empty) the first element and step of one
  // range step over the 10-element input.
  void ExpectRange(const StridedSliceAttrs& attrs, int64_t size, int64_t first, int64_t step) {
    ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
    EXPECT_THAT(geometry.output.sizes, ElementsAre(size));
    EXPECT_EQ(geometry.window.base, first);
    EXPECT_THAT(geometry.window.strides, ElementsAre(step));
  }
};

TEST_F(StridedSliceRangeTest, NegativeBeginAndEndCountFromTheEnd) {
  ExpectRange(Ranges({-3}, {-1}), 2, 7, 1);
}

TEST_F(StridedSliceRangeTest, NegativeBoundsAddTheSizeOnlyOnce) {
  // -15 + 10 = -5 clamps to 0 and -12 + 10 = -2 clamps to 0: empty. Adding the
  // size twice would give the range 5:8.
  ExpectRange(Ranges({-15}, {-12}), 0, 0, 0);
}

TEST_F(StridedSliceRangeTest, PositiveStrideClampsBelowToZero) {
  ExpectRange(Ranges({-100}, {3}), 3, 0, 1);
}

TEST_F(StridedSliceRangeTest, PositiveStrideClampsAboveToSize) {
  ExpectRange(Ranges({7}, {100}), 3, 7, 1);
}

TEST_F(StridedSliceRangeTest, BeginPastTheEndGivesEmpty) {
  ExpectRange(Ranges({100}, {200}), 0, 0, 0);
}

TEST_F(StridedSliceRangeTest, BeginEqualToEndGivesSizeZero) {
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({3}, {3})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(0));
  EXPECT_EQ(geometry.output.element_count, 0);
  EXPECT_EQ(geometry.output.buffer_elements, 0);
}

TEST_F(StridedSliceRangeTest, StepCountRoundsUp) {
  ExpectRange(Ranges({1}, {8}, {3}), 3, 1, 3);  // 1, 4, 7
}

TEST_F(StridedSliceRangeTest, BeginMaskWithPositiveStrideStartsAtZero) {
  StridedSliceAttrs attrs = Ranges({5}, {3});
  attrs.begin_mask = {1};
  ExpectRange(attrs, 3, 0, 1);
}

TEST_F(StridedSliceRangeTest, EndMaskWithPositiveStrideRunsToTheEnd) {
  StridedSliceAttrs attrs = Ranges({5}, {0}, {2});
  attrs.end_mask = {1};
  ExpectRange(attrs, 3, 5, 2);  // 5, 7, 9
}

TEST_F(StridedSliceRangeTest, BeginMaskWithNegativeStrideStartsAtTheLastElement) {
  StridedSliceAttrs attrs = Ranges({0}, {2}, {-1});
  attrs.begin_mask = {1};
  ExpectRange(attrs, 7, 9, -1);  // 9 down to 3
}

TEST_F(StridedSliceRangeTest, MaskedEndOnAReversedAxisIncludesElementZero) {
  StridedSliceAttrs attrs = Ranges({0}, {0}, {-1});
  attrs.begin_mask = {1};
  attrs.end_mask = {1};
  ExpectRange(attrs, 10, 9, -1);
}

TEST_F(StridedSliceRangeTest, UnmaskedEndMinusOneOnAReversedAxisIsTheLastElement) {
  // -1 counts from the end: end = 9, begin = 9, nothing in between.
  StridedSliceAttrs attrs = Ranges({0}, {-1}, {-1});
  attrs.begin_mask = {1};
  ExpectRange(attrs, 0, 0, 0);
}

TEST_F(StridedSliceRangeTest, NegativeStrideEndFarBelowClampsPastElementZero) {
  ExpectRange(Ranges({9}, {-100}, {-1}), 10, 9, -1);
}

TEST_F(StridedSliceRangeTest, NegativeStrideBeginAboveClampsToTheLastElement) {
  ExpectRange(Ranges({100}, {6}, {-2}), 2, 9, -2);  // 9, 7
}

TEST_F(StridedSliceRangeTest, NegativeStrideBeginBelowRangeClampsToZeroForOneElement) {
  // NumPy gives an empty range here; OPERATORS.md clamps begin to 0.
  ExpectRange(Ranges({-20}, {-30}, {-1}), 1, 0, 0);
}

TEST_F(StridedSliceRangeTest, NegativeStrideBeginBelowRangeWithMaskedEnd) {
  StridedSliceAttrs attrs = Ranges({-20}, {0}, {-3});
  attrs.end_mask = {1};
  ExpectRange(attrs, 1, 0, 0);
}

TEST_F(StridedSliceRangeTest, Int64BoundsWithUnitStrideCoverEverything) {
  ExpectRange(Ranges({kInt64Min}, {kInt64Max}), 10, 0, 1);
}

TEST_F(StridedSliceRangeTest, Int64BoundsWithReversedStrideCoverEverything) {
  ExpectRange(Ranges({kInt64Max}, {kInt64Min}, {-1}), 10, 9, -1);
}

TEST_F(StridedSliceRangeTest, Int64MaxStrideTakesOneElement) {
  ExpectRange(Ranges({2}, {kInt64Max}, {kInt64Max}), 1, 2, 0);
}

TEST_F(StridedSliceRangeTest, Int64MinStrideTakesOneElement) {
  StridedSliceAttrs attrs = Ranges({kInt64Max}, {kInt64Min}, {kInt64Min});
  ExpectRange(attrs, 1, 9, 0);
}

TEST_F(StridedSliceRangeTest, Int64MinStrideWithMasksTakesOneElement) {
  StridedSliceAttrs attrs = Ranges({0}, {0}, {kInt64Min});
  attrs.begin_mask = {1};
  attrs.end_mask = {1};
  ExpectRange(attrs, 1, 9, 0);
}

// --- Multi-dimensional geometry ----------------------------------------------------------

TEST_F(StridedSliceValidationTest, EllipsisCoveringZeroDimensions) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1, 0, 2}, {3, 0, 5});
  attrs.ellipsis_mask = {0, 1, 0};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 3));
  EXPECT_EQ(geometry.window.base, 1 * 6 + 2);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 1));
}

TEST_F(StridedSliceValidationTest, EllipsisCopiesTheDimensionsItStandsFor) {
  SetInput({2, 3, 4, 5});
  StridedSliceAttrs attrs = Ranges({0, 1}, {0, 3});
  attrs.ellipsis_mask = {1, 0};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 3, 4, 2));
  EXPECT_EQ(geometry.window.base, 1);
  EXPECT_THAT(geometry.window.strides, ElementsAre(60, 20, 5, 1));
}

TEST_F(StridedSliceValidationTest, EllipsisCountExcludesNewAxes) {
  // rank 4, M = 3 with one new axis: the ellipsis stands for 4 - (3 - 1 - 1) = 3.
  SetInput({2, 3, 4, 5});
  StridedSliceAttrs attrs = Ranges({0, 0, 1}, {0, 0, 2});
  attrs.ellipsis_mask = {1, 0, 0};
  attrs.new_axis_mask = {0, 1, 0};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 3, 4, 1, 1));
}

TEST_F(StridedSliceValidationTest, NewAxisInsertsSizeOneWithStrideZero) {
  SetInput({4, 6});
  StridedSliceAttrs attrs = Ranges({1, 0, 2}, {3, 0, 4});
  attrs.new_axis_mask = {0, 1, 0};
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(attrs));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 1, 2));
  EXPECT_EQ(geometry.window.base, 1 * 6 + 2);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 0, 1));
  EXPECT_THAT(geometry.output.strides, ElementsAre(2, 2, 1));
}

TEST_F(StridedSliceValidationTest, LeftoverDimensionsAreCopiedWhole) {
  SetInput({4, 6, 5});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({1}, {3})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 6, 5));
  EXPECT_EQ(geometry.window.base, 30);
  EXPECT_THAT(geometry.window.strides, ElementsAre(30, 5, 1));
}

TEST_F(StridedSliceValidationTest, SizeOneCopiedDimensionGetsStrideZero) {
  SetInput({4, 1, 5});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({1}, {3})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 1, 5));
  EXPECT_THAT(geometry.window.strides, ElementsAre(5, 0, 1));
}

TEST_F(StridedSliceValidationTest, EmptyDimensionResetsTheWindowBase) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(StridedSliceGeometry geometry, Run(Ranges({2, 3}, {3, 3})));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(1, 0));
  EXPECT_EQ(geometry.window.base, 0);
}

}  // namespace
}  // namespace tensorop
