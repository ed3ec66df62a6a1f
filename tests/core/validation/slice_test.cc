// Slice validation (core/validate/slice.h): every rule of OPERATORS.md "Slice",
// each with its exact status code and message, plus the window it computes.
#include "core/validate/slice.h"

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
using ::tensorop::testing::kInt64Min;
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;

// A float32 input of the given sizes (packed unless strides are given) over a
// zeroed buffer it owns, and the output descriptions of one slice request.
class SliceValidationTest : public ::testing::Test {
 protected:
  void SetInput(std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                int64_t buffer_elements = -1, DType dtype = DType::kFloat32) {
    if (buffer_elements < 0) {
      buffer_elements = 1;
      for (int64_t size : sizes) buffer_elements *= size;
    }
    data_.assign(static_cast<size_t>(buffer_elements) * ElementSize(dtype), std::byte{0});
    input_ = TensorView{TensorDesc{dtype, std::move(sizes), std::move(strides)}, data_};
  }

  absl::StatusOr<SliceGeometry> Run(SliceAttrs attrs, std::vector<int64_t> output_sizes,
                                    std::vector<int64_t> output_strides = {}) {
    outputs_ = {OutputDesc{std::move(output_sizes), std::move(output_strides)}};
    return ValidateSlice(attrs, input_, outputs_, limits_);
  }

  absl::StatusOr<SliceGeometry> RunWithOutputs(SliceAttrs attrs, std::vector<OutputDesc> outputs) {
    outputs_ = std::move(outputs);
    return ValidateSlice(attrs, input_, outputs_, limits_);
  }

  std::vector<std::byte> data_;
  TensorView input_;
  std::vector<OutputDesc> outputs_;
  Limits limits_;
};

// --- Input tensor ---------------------------------------------------------------

TEST_F(SliceValidationTest, InputRankNineIsRejected) {
  SetInput(std::vector<int64_t>(9, 1));
  const std::vector<int64_t> zeros(9, 0), ones(9, 1);
  EXPECT_THAT(Run({zeros, ones, ones}, ones),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; slice takes rank 1..8")));
}

TEST_F(SliceValidationTest, InputZeroSizeIsRejected) {
  SetInput({4, 0});
  EXPECT_THAT(
      Run({{0, 0}, {1, 1}, {1, 1}}, {1, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.sizes[1] must be >= 1, got 0")));
}

// --- Parameter array lengths ------------------------------------------------------

TEST_F(SliceValidationTest, OffsetsShorterThanRankIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0}, {4, 6}, {1, 1}}, {4, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.offsets has 1 entries; input has rank 2")));
}

TEST_F(SliceValidationTest, WindowSizesLongerThanRankIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6, 1}, {1, 1}}, {4, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.window_sizes has 3 entries; input has rank 2")));
}

TEST_F(SliceValidationTest, EmptyWindowStridesIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {}}, {4, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.window_strides has 0 entries; input has rank 2")));
}

TEST_F(SliceValidationTest, NoOutputIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(RunWithOutputs({{0, 0}, {4, 6}, {1, 1}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs has 0 entries; slice has exactly one output")));
}

TEST_F(SliceValidationTest, TwoOutputsAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(
      RunWithOutputs({{0, 0}, {4, 6}, {1, 1}}, {OutputDesc{{4, 6}, {}}, OutputDesc{{4, 6}, {}}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("outputs has 2 entries; slice has exactly one output")));
}

TEST_F(SliceValidationTest, OutputSizesOfWrongLengthAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, 1}}, {24}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes has 1 entries; input has rank 2")));
}

// --- Window bounds ---------------------------------------------------------------

TEST_F(SliceValidationTest, NegativeOffsetNamesFieldAndIndex) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run({{0, -1}, {4, 2}, {1, 1}}, {4, 2}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("slice.offsets[1] must be >= 0, got -1")));
}

TEST_F(SliceValidationTest, ZeroWindowSizeNamesFieldAndIndex) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {0, 6}, {1, 1}}, {1, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.window_sizes[0] must be >= 1, got 0")));
}

TEST_F(SliceValidationTest, WindowPastTheInputEndIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{1, 0}, {4, 6}, {1, 1}}, {4, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.offsets[0] + slice.window_sizes[0] = 1 + 4 exceeds "
                          "input.sizes[0] = 4")));
}

TEST_F(SliceValidationTest, WindowEndingExactlyAtTheInputEndIsAccepted) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{1, 2}, {3, 4}, {1, 1}}, {3, 4}));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(3, 4));
}

TEST_F(SliceValidationTest, OffsetPlusWindowOverflowingInt64IsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{kInt64Max, 0}, {1, 6}, {1, 1}}, {1, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.offsets[0] + slice.window_sizes[0] = 9223372036854775807 "
                          "+ 1 exceeds input.sizes[0] = 4")));
}

TEST_F(SliceValidationTest, HugeWindowSizeOverflowingInt64IsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 2}, {4, kInt64Max}, {1, 1}}, {4, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("slice.offsets[1] + slice.window_sizes[1] = 2 + "
                          "9223372036854775807 exceeds input.sizes[1] = 6")));
}

// --- Window strides ------------------------------------------------------------------

TEST_F(SliceValidationTest, ZeroWindowStrideNamesFieldAndIndex) {
  SetInput({4, 6});
  EXPECT_THAT(
      Run({{0, 0}, {4, 6}, {1, 0}}, {4, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("slice.window_strides[1] must not be 0")));
}

// --- Output sizes -----------------------------------------------------------------

TEST_F(SliceValidationTest, ZeroOutputSizeIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, 1}}, {4, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[1] = 0 is outside [1, 6]: 1 + "
                          "(slice.window_sizes[1] - 1) / |slice.window_strides[1]| = "
                          "1 + (6 - 1) / 1")));
}

TEST_F(SliceValidationTest, NegativeOutputSizeIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, 1}}, {-4, 6}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[0] = -4 is outside [1, 4]: 1 + "
                          "(slice.window_sizes[0] - 1) / |slice.window_strides[0]| = "
                          "1 + (4 - 1) / 1")));
}

TEST_F(SliceValidationTest, OutputSizePastStridedWindowIsRejected) {
  SetInput({4, 6});
  // A window of 6 with stride 2 holds elements 0, 2, 4: at most 3.
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, 2}}, {4, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[1] = 4 is outside [1, 3]: 1 + "
                          "(slice.window_sizes[1] - 1) / |slice.window_strides[1]| = "
                          "1 + (6 - 1) / 2")));
}

TEST_F(SliceValidationTest, NegativeStrideBoundsOutputSizeByItsMagnitude) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, -2}}, {4, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[1] = 4 is outside [1, 3]: 1 + "
                          "(slice.window_sizes[1] - 1) / |slice.window_strides[1]| = "
                          "1 + (6 - 1) / 2")));
}

TEST_F(SliceValidationTest, OutputSmallerThanTheWindowAllowsIsAccepted) {
  SetInput({4, 6});
  // DirectML lets the output take fewer elements than the window holds.
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{0, 0}, {4, 6}, {1, 2}}, {2, 2}));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 2));
}

TEST_F(SliceValidationTest, Int64MinStrideAllowsExactlyOneElement) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, kInt64Min}}, {4, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[1] = 2 is outside [1, 1]: 1 + "
                          "(slice.window_sizes[1] - 1) / |slice.window_strides[1]| = "
                          "1 + (6 - 1) / 9223372036854775808")));
}

TEST_F(SliceValidationTest, Int64MinStrideWithOneElementReadsTheWindowEnd) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{0, 1}, {4, 5}, {1, kInt64Min}}, {4, 1}));
  // start[1] = 1 + 5 - 1 = 5; a size-1 dimension gets stride 0.
  EXPECT_EQ(geometry.window.base, 5);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 0));
}

TEST_F(SliceValidationTest, Int64MaxStrideAllowsExactlyOneElement) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, kInt64Max}}, {4, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].sizes[1] = 2 is outside [1, 1]: 1 + "
                          "(slice.window_sizes[1] - 1) / |slice.window_strides[1]| = "
                          "1 + (6 - 1) / 9223372036854775807")));
}

// --- Output layout --------------------------------------------------------------------

TEST_F(SliceValidationTest, OutputZeroStrideIsRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {4, 6}, {1, 1}}, {4, 6}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides[0] must be >= 1, got 0")));
}

TEST_F(SliceValidationTest, OutputOverlappingStridesAreRejected) {
  SetInput({4, 6});
  EXPECT_THAT(Run({{0, 0}, {2, 2}, {1, 1}}, {2, 2}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides [1, 1] overlap: dimension 1 (stride 1) steps inside "
                          "offsets 0..1, which the dimensions with smaller strides already "
                          "address")));
}

TEST_F(SliceValidationTest, OutputColumnMajorLayoutIsKept) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{0, 0}, {2, 3}, {1, 1}}, {2, 3}, {1, 2}));
  EXPECT_THAT(geometry.output.strides, ElementsAre(1, 2));
  EXPECT_EQ(geometry.output.buffer_elements, 6);
  EXPECT_EQ(geometry.output.dtype, DType::kFloat32);
}

// --- Geometry ---------------------------------------------------------------------------

TEST_F(SliceValidationTest, PositiveStridesStartAtTheOffsets) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{1, 2}, {2, 3}, {1, 1}}, {2, 3}));
  EXPECT_EQ(geometry.window.base, 1 * 6 + 2);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, 1));
  EXPECT_THAT(geometry.output.sizes, ElementsAre(2, 3));
  EXPECT_THAT(geometry.output.strides, ElementsAre(3, 1));
  EXPECT_EQ(geometry.output.element_count, 6);
}

TEST_F(SliceValidationTest, NegativeStrideStartsAtWindowEnd) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{1, 1}, {2, 4}, {1, -1}}, {2, 4}));
  // start = offset + window_size - 1 = 1 + 4 - 1 = 4 along the reversed axis.
  EXPECT_EQ(geometry.window.base, 1 * 6 + 4);
  EXPECT_THAT(geometry.window.strides, ElementsAre(6, -1));
}

TEST_F(SliceValidationTest, WindowStridesScaleTheInputStrides) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{0, 0}, {4, 6}, {-2, 3}}, {2, 2}));
  // start[0] = 0 + 4 - 1 = 3.
  EXPECT_EQ(geometry.window.base, 3 * 6);
  EXPECT_THAT(geometry.window.strides, ElementsAre(-12, 3));
}

TEST_F(SliceValidationTest, SizeOneOutputDimensionGetsStrideZero) {
  SetInput({4, 6});
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{2, 0}, {1, 6}, {1, 1}}, {1, 6}));
  EXPECT_EQ(geometry.window.base, 12);
  EXPECT_THAT(geometry.window.strides, ElementsAre(0, 1));
}

TEST_F(SliceValidationTest, PaddedInputStridesCarryIntoTheWindow) {
  // Rows of 6 at a pitch of 8: 1 + 3*8 + 5 = 30 elements.
  SetInput({4, 6}, {8, 1}, 30);
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{1, 2}, {2, 3}, {1, 1}}, {2, 3}));
  EXPECT_EQ(geometry.window.base, 1 * 8 + 2);
  EXPECT_THAT(geometry.window.strides, ElementsAre(8, 1));
  EXPECT_THAT(geometry.input.strides, ElementsAre(8, 1));
  EXPECT_EQ(geometry.input.buffer_elements, 30);
}

TEST_F(SliceValidationTest, BroadcastInputKeepsStrideZero) {
  SetInput({3, 4}, {0, 1}, 4);
  ASSERT_OK_AND_ASSIGN(SliceGeometry geometry, Run({{0, 0}, {3, 4}, {1, 1}}, {3, 4}));
  EXPECT_EQ(geometry.window.base, 0);
  EXPECT_THAT(geometry.window.strides, ElementsAre(0, 1));
}

}  // namespace
}  // namespace tensorop
