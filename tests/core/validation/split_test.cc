// Split validation (core/validate/split.h): every rule of OPERATORS.md "Split"
// with its exact status code and message, and the windows it computes.
#include "core/validate/split.h"

#include <cstddef>
#include <cstdint>
#include <limits>
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
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;

class SplitValidationTest : public ::testing::Test {
 protected:
  // A packed float32 input of `sizes` over a zeroed buffer the fixture owns.
  void SetInput(std::vector<int64_t> sizes) {
    int64_t elements = 1;
    for (int64_t size : sizes) elements *= size;
    data_.assign(static_cast<size_t>(elements) * 4, std::byte{0});
    input_ = TensorView{TensorDesc{DType::kFloat32, std::move(sizes), {}}, data_};
  }

  absl::StatusOr<SplitGeometry> Run(int64_t axis, std::vector<OutputDesc> outputs) {
    outputs_ = std::move(outputs);
    return ValidateSplit(SplitAttrs{axis}, input_, outputs_, limits_);
  }

  std::vector<std::byte> data_;
  TensorView input_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

OutputDesc Sized(std::vector<int64_t> sizes, std::vector<int64_t> strides = {}) {
  return OutputDesc{std::move(sizes), std::move(strides)};
}

TEST_F(SplitValidationTest, InputRankNineIsRejected) {
  SetInput(std::vector<int64_t>(9, 1));
  EXPECT_THAT(Run(0, {Sized(std::vector<int64_t>(9, 1))}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; split takes rank 1..8")));
}

TEST_F(SplitValidationTest, InputZeroSizeIsRejected) {
  SetInput({0, 6});
  EXPECT_THAT(Run(0, {Sized({0, 6})}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                Eq("input.sizes[0] must be >= 1, got 0")));
}

TEST_F(SplitValidationTest, EmptyOutputsAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                   Eq("outputs is empty; split needs at least one output")));
}

TEST_F(SplitValidationTest, AxisEqualToRankIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(2, {Sized({4, 6})}),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("split.axis = 2 is outside [0, 2)")));
}

TEST_F(SplitValidationTest, NegativeAxisIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(-1, {Sized({4, 6})}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 Eq("split.axis = -1 is outside [0, 2)")));
}

TEST_F(SplitValidationTest, OutputRankMismatchNamesTheOutput) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {Sized({2, 6}), Sized({2})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[1].sizes has 1 entries; input has rank 2")));
}

TEST_F(SplitValidationTest, NonAxisSizeMismatchNamesOutputAndDimension) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {Sized({2, 6}), Sized({2, 5})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[1].sizes[1] = 5 must equal input.sizes[1] = 6 "
                          "(only split.axis = 0 may differ)")));
}

TEST_F(SplitValidationTest, ZeroAxisSizeIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run(1, {Sized({4, 6}), Sized({4, 0})}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("outputs[1].sizes[1] must be >= 1, got 0")));
}

TEST_F(SplitValidationTest, NegativeAxisSizeIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run(1, {Sized({4, -2}), Sized({4, 8})}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("outputs[0].sizes[1] must be >= 1, got -2")));
}

TEST_F(SplitValidationTest, SizesSummingUnderTheInputAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {Sized({1, 6}), Sized({2, 6})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs sizes along split.axis = 0 sum to 3; "
                          "input.sizes[0] = 4")));
}

TEST_F(SplitValidationTest, SizesSummingOverTheInputAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {Sized({2, 6}), Sized({2, 6}), Sized({1, 6})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0..2].sizes[0] sum to 5, past input.sizes[0] = 4")));
}

TEST_F(SplitValidationTest, OneOutputLargerThanTheInputIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(1, {Sized({4, 7})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0..0].sizes[1] sum to 7, past input.sizes[1] = 6")));
}

TEST_F(SplitValidationTest, SizesWhoseSumOverflowsInt64AreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run(0, {Sized({2, 6}), Sized({kInt64Max, 6})}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("outputs[0..1].sizes[0] sum to more than 2^63 - 1, past input.sizes[0] = 4")));
}

TEST_F(SplitValidationTest, OutputZeroStrideIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run(0, {Sized({2, 6}), Sized({2, 6}, {0, 1})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[1].strides[0] must be >= 1, got 0")));
}

TEST_F(SplitValidationTest, OneOutputIsACopyOfTheInput) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SplitGeometry geometry, Run(1, {Sized({4, 6})}));
  ASSERT_EQ(geometry.outputs.size(), 1u);
  EXPECT_THAT(geometry.outputs[0].sizes, ElementsAre(4, 6));
  EXPECT_THAT(geometry.outputs[0].strides, ElementsAre(6, 1));
  ASSERT_EQ(geometry.windows.size(), 1u);
  EXPECT_EQ(geometry.windows[0].base, 0);
  EXPECT_THAT(geometry.windows[0].strides, ElementsAre(6, 1));
}

TEST_F(SplitValidationTest, OutputsTakeConsecutiveRangesAlongTheAxis) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SplitGeometry geometry,
                       Run(1, {Sized({4, 1}), Sized({4, 3}), Sized({4, 2}, {1, 4})}));
  ASSERT_EQ(geometry.windows.size(), 3u);
  EXPECT_EQ(geometry.windows[0].base, 0);
  EXPECT_EQ(geometry.windows[1].base, 1);
  EXPECT_EQ(geometry.windows[2].base, 4);
  for (const InputWindow& window : geometry.windows) {
    EXPECT_THAT(window.strides, ElementsAre(6, 1));
  }
  ASSERT_EQ(geometry.outputs.size(), 3u);
  EXPECT_THAT(geometry.outputs[1].sizes, ElementsAre(4, 3));
  EXPECT_THAT(geometry.outputs[1].strides, ElementsAre(3, 1));
  EXPECT_THAT(geometry.outputs[2].strides, ElementsAre(1, 4));
  EXPECT_EQ(geometry.outputs[2].buffer_elements, 8);
}

}  // namespace
}  // namespace tensorop
