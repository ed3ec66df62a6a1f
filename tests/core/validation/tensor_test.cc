// Validation of single tensors (core/validate/tensor.h): the rank, size, stride
// and buffer rules of OPERATORS.md "Tensors", and the output layouts a caller
// may ask for. Each test pins one rule with its exact status code and message.
#include "core/validate/tensor.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "core/limits.h"
#include "core/operator_info.h"
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
using ::testing::IsEmpty;

// Validates a tensor over `bytes` zero bytes. The buffer outlives the call.
absl::StatusOr<Layout> Validate(DType dtype, std::vector<int64_t> sizes,
                                std::vector<int64_t> strides, size_t bytes,
                                const RankRule& rule = InfoOf<SliceAttrs>().input_rank,
                                const Limits& limits = Limits{}) {
  const std::vector<std::byte> data(bytes);
  const TensorView view{TensorDesc{dtype, std::move(sizes), std::move(strides)}, data};
  return ValidateInput(view, "input", rule, limits);
}

absl::StatusOr<Layout> Output(std::vector<int64_t> sizes, std::vector<int64_t> strides,
                              DType dtype = DType::kFloat32, const Limits& limits = Limits{}) {
  return ValidateOutputLayout(dtype, sizes, strides, "outputs[0]", limits);
}

// --- Rank -------------------------------------------------------------------

TEST(TensorValidationTest, DmlRankZeroIsRejected) {
  EXPECT_THAT(Validate(DType::kFloat32, {}, {}, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 0 dimensions; slice takes rank 1..8")));
}

TEST(TensorValidationTest, DmlRankNineIsRejectedAndNamesTheOperator) {
  EXPECT_THAT(Validate(DType::kUint8, std::vector<int64_t>(9, 1), {}, 1,
                       InfoOf<ScatterElementsAttrs>().input_rank),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 9 dimensions; scatter_elements takes rank 1..8")));
}

TEST(TensorValidationTest, DmlRankOneAndEightAreAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout one, Validate(DType::kUint8, {3}, {}, 3));
  EXPECT_THAT(one.sizes, ElementsAre(3));
  ASSERT_OK_AND_ASSIGN(Layout eight, Validate(DType::kUint8, std::vector<int64_t>(8, 1), {}, 1));
  EXPECT_EQ(eight.sizes.size(), 8u);
  EXPECT_EQ(eight.element_count, 1);
}

TEST(TensorValidationTest, StridedSliceRankThirtyThreeIsRejected) {
  EXPECT_THAT(Validate(DType::kUint8, std::vector<int64_t>(33, 1), {}, 1,
                       InfoOf<StridedSliceAttrs>().input_rank),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 33 dimensions; strided_slice takes rank 1..32")));
}

TEST(TensorValidationTest, StridedSliceRankThirtyTwoIsAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kUint8, std::vector<int64_t>(32, 1), {}, 1,
                                               InfoOf<StridedSliceAttrs>().input_rank));
  EXPECT_EQ(layout.sizes.size(), 32u);
}

TEST(TensorValidationTest, StridedSliceRankZeroIsRejected) {
  EXPECT_THAT(Validate(DType::kUint8, {}, {}, 1, InfoOf<StridedSliceAttrs>().input_rank),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes has 0 dimensions; strided_slice takes rank 1..32")));
}

// --- Sizes ------------------------------------------------------------------

TEST(TensorValidationTest, DmlZeroSizeNamesTheDimension) {
  EXPECT_THAT(
      Validate(DType::kFloat32, {2, 0, 3}, {}, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.sizes[1] must be >= 1, got 0")));
}

TEST(TensorValidationTest, DmlNegativeSizeIsRejected) {
  EXPECT_THAT(
      Validate(DType::kFloat32, {-2, 3}, {}, 0),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.sizes[0] must be >= 1, got -2")));
}

TEST(TensorValidationTest, StridedSliceNegativeSizeIsRejected) {
  EXPECT_THAT(
      Validate(DType::kFloat32, {2, -1}, {}, 0, InfoOf<StridedSliceAttrs>().input_rank),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.sizes[1] must be >= 0, got -1")));
}

TEST(TensorValidationTest, StridedSliceZeroSizeIsAnEmptyTensor) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kFloat32, {2, 0, 3}, {}, 0,
                                               InfoOf<StridedSliceAttrs>().input_rank));
  EXPECT_EQ(layout.element_count, 0);
  EXPECT_EQ(layout.buffer_elements, 0);
  EXPECT_EQ(layout.buffer_bytes(), 0);
}

TEST(TensorValidationTest, StridedSliceZeroSizeWithStridesNeedsNoData) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kFloat32, {2, 0}, {100, 1}, 0,
                                               InfoOf<StridedSliceAttrs>().input_rank));
  EXPECT_EQ(layout.element_count, 0);
  EXPECT_EQ(layout.buffer_elements, 0);
}

// --- Strides ----------------------------------------------------------------

TEST(TensorValidationTest, StridesCountMismatchIsRejected) {
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {3}, 24),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.strides has 1 entries; input.sizes has 2")));
}

TEST(TensorValidationTest, NegativeStrideNamesTheDimension) {
  EXPECT_THAT(
      Validate(DType::kFloat32, {2, 3}, {-3, 1}, 24),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("input.strides[0] must be >= 0, got -3")));
}

TEST(TensorValidationTest, ZeroStrideBroadcastsFromOneRow) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kFloat32, {3, 4}, {0, 1}, 16));
  EXPECT_THAT(layout.strides, ElementsAre(0, 1));
  EXPECT_EQ(layout.element_count, 12);
  EXPECT_EQ(layout.buffer_elements, 4);
}

TEST(TensorValidationTest, PackedLayoutGetsRowMajorStrides) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kInt16, {2, 3, 4}, {}, 48));
  EXPECT_EQ(layout.dtype, DType::kInt16);
  EXPECT_THAT(layout.strides, ElementsAre(12, 4, 1));
  EXPECT_EQ(layout.element_count, 24);
  EXPECT_EQ(layout.buffer_elements, 24);
  EXPECT_EQ(layout.buffer_bytes(), 48);
}

// --- Buffer size ------------------------------------------------------------

TEST(TensorValidationTest, PackedDataShortByOneElementIsRejected) {
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {}, 20),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.data has 20 bytes; packed float32 [2, 3] needs exactly 24")));
}

TEST(TensorValidationTest, PackedDataLongerThanTheTensorIsRejected) {
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {}, 28),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.data has 28 bytes; packed float32 [2, 3] needs exactly 24")));
}

TEST(TensorValidationTest, StridedDataShorterThanExtentIsRejected) {
  // 1 + (2-1)*4 + (3-1)*1 = 7 elements needed; 6 given.
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {4, 1}, 24),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.data has 6 elements; float32 [2, 3] with strides [4, 1] "
                          "needs at least 7")));
}

TEST(TensorValidationTest, StridedDataOfExactlyTheExtentIsAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kFloat32, {2, 3}, {4, 1}, 28));
  EXPECT_THAT(layout.strides, ElementsAre(4, 1));
  EXPECT_EQ(layout.buffer_elements, 7);
}

TEST(TensorValidationTest, StridedDataLongerThanTheExtentIsAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Validate(DType::kFloat32, {2, 3}, {4, 1}, 40));
  EXPECT_EQ(layout.buffer_elements, 7);
}

TEST(TensorValidationTest, StridedDataNotAMultipleOfElementSizeIsRejected) {
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {4, 1}, 30),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.data has 30 bytes, not a multiple of the float32 "
                          "element size 4")));
}

// --- Element count limits ----------------------------------------------------

TEST(TensorValidationTest, ElementCountOverTwoToThe32MinusOneIsResourceExhausted) {
  EXPECT_THAT(Validate(DType::kUint8, {65536, 65536}, {}, 0),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("input.sizes [65536, 65536] hold 4294967296 elements; "
                          "the limit is 4294967295")));
}

TEST(TensorValidationTest, ElementCountOfExactlyTwoToThe32MinusOneIsAccepted) {
  ASSERT_OK_AND_ASSIGN(int64_t count,
                       CheckedElementCount(std::vector<int64_t>{65535, 65537}, "input", Limits{}));
  EXPECT_EQ(count, kMaxTensorElements);
}

TEST(TensorValidationTest, LowerMaxTensorElementsIsResourceExhausted) {
  Limits limits;
  limits.max_tensor_elements = 5;
  EXPECT_THAT(Validate(DType::kFloat32, {2, 3}, {}, 24, InfoOf<SliceAttrs>().input_rank, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("input.sizes [2, 3] hold 6 elements; the limit is 5")));
}

TEST(TensorValidationTest, MaxTensorElementsAboveTheSpecCeilingIsCapped) {
  Limits limits;
  limits.max_tensor_elements = int64_t{1} << 40;
  EXPECT_THAT(
      Validate(DType::kUint8, {65536, 65536}, {}, 0, InfoOf<SliceAttrs>().input_rank, limits),
      StatusIs(absl::StatusCode::kResourceExhausted,
               Eq("input.sizes [65536, 65536] hold 4294967296 elements; "
                  "the limit is 4294967295")));
}

TEST(TensorValidationTest, SizeProductOverflowingInt64IsInvalidArgument) {
  EXPECT_THAT(Validate(DType::kUint8, {int64_t{1} << 32, int64_t{1} << 32}, {}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes [4294967296, 4294967296]: the element count "
                          "overflows 64 bits")));
}

// --- Stride extent overflow --------------------------------------------------

TEST(TensorValidationTest, StrideTimesSizeOverflowIsInvalidArgument) {
  // (3 - 1) * 2^62 = 2^63 does not fit.
  EXPECT_THAT(Validate(DType::kUint8, {3}, {int64_t{1} << 62}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input: sizes [3] with strides [4611686018427387904] reach "
                          "past 2^63 - 1 elements")));
}

TEST(TensorValidationTest, SumOfStrideReachesOverflowingIsInvalidArgument) {
  // Each product fits; their sum does not.
  EXPECT_THAT(Validate(DType::kUint8, {2, 2}, {kInt64Max, 1}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input: sizes [2, 2] with strides [9223372036854775807, 1] "
                          "reach past 2^63 - 1 elements")));
}

TEST(TensorValidationTest, ExtentPlusOneOverflowingIsInvalidArgument) {
  EXPECT_THAT(Validate(DType::kUint8, {2}, {kInt64Max}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input: sizes [2] with strides [9223372036854775807] reach "
                          "past 2^63 - 1 elements")));
}

TEST(TensorValidationTest, ExtentInBytesOverflowingIsInvalidArgument) {
  // 2^61 + 1 elements fit in 64 bits; 4 bytes each do not.
  EXPECT_THAT(Validate(DType::kFloat32, {2}, {int64_t{1} << 61}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input: 2305843009213693953 elements of float32 overflow 64 bits")));
}

TEST(TensorValidationTest, EmptyTensorStillNeedsStridesThatFit) {
  // No element is addressed, but (3 - 1) * INT64_MAX still does not fit.
  EXPECT_THAT(
      Validate(DType::kUint8, {0, 3}, {1, kInt64Max}, 0, InfoOf<StridedSliceAttrs>().input_rank),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("input: sizes [0, 3] with strides [1, 9223372036854775807] reach "
                  "past 2^63 - 1 elements")));
}

TEST(TensorValidationTest, ZeroSizeDoesNotHideAnOverflowingSizeProduct) {
  const int64_t big = int64_t{1} << 40;
  for (std::vector<int64_t> sizes :
       {std::vector<int64_t>{0, big, big}, std::vector<int64_t>{big, big, 0}}) {
    EXPECT_THAT(Validate(DType::kUint8, sizes, {}, 0, InfoOf<StridedSliceAttrs>().input_rank),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::EndsWith(": the element count overflows 64 bits")));
  }
}

// --- Output layouts -----------------------------------------------------------

TEST(OutputLayoutValidationTest, EmptyStridesArePacked) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Output({2, 3, 4}, {}));
  EXPECT_EQ(layout.dtype, DType::kFloat32);
  EXPECT_THAT(layout.sizes, ElementsAre(2, 3, 4));
  EXPECT_THAT(layout.strides, ElementsAre(12, 4, 1));
  EXPECT_EQ(layout.element_count, 24);
  EXPECT_EQ(layout.buffer_elements, 24);
}

TEST(OutputLayoutValidationTest, ZeroStrideIsRejected) {
  EXPECT_THAT(Output({2, 3}, {0, 1}), StatusIs(absl::StatusCode::kInvalidArgument,
                                               Eq("outputs[0].strides[0] must be >= 1, got 0")));
}

TEST(OutputLayoutValidationTest, ZeroStrideOnASizeOneDimensionIsStillRejected) {
  EXPECT_THAT(Output({1, 3}, {0, 1}), StatusIs(absl::StatusCode::kInvalidArgument,
                                               Eq("outputs[0].strides[0] must be >= 1, got 0")));
}

TEST(OutputLayoutValidationTest, NegativeStrideIsRejected) {
  EXPECT_THAT(Output({2, 3}, {3, -1}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                Eq("outputs[0].strides[1] must be >= 1, got -1")));
}

TEST(OutputLayoutValidationTest, StridesCountMismatchIsRejected) {
  EXPECT_THAT(Output({2, 3}, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides has 1 entries; outputs[0].sizes has 2")));
}

TEST(OutputLayoutValidationTest, EqualStridesOverlap) {
  EXPECT_THAT(Output({2, 2}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides [1, 1] overlap: dimension 1 (stride 1) steps inside "
                          "offsets 0..1, which the dimensions with smaller strides already "
                          "address")));
}

TEST(OutputLayoutValidationTest, OuterStrideShorterThanInnerRowOverlaps) {
  // Rows of 3 at a pitch of 2 share their last/first element.
  EXPECT_THAT(Output({2, 3}, {2, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0].strides [2, 1] overlap: dimension 0 (stride 2) steps inside "
                          "offsets 0..2, which the dimensions with smaller strides already "
                          "address")));
}

TEST(OutputLayoutValidationTest, SizeOneDimensionsNeverOverlap) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Output({1, 4}, {1, 1}));
  EXPECT_THAT(layout.strides, ElementsAre(1, 1));
  EXPECT_EQ(layout.buffer_elements, 4);
}

TEST(OutputLayoutValidationTest, ColumnMajorIsAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Output({2, 3}, {1, 2}));
  EXPECT_THAT(layout.strides, ElementsAre(1, 2));
  EXPECT_EQ(layout.element_count, 6);
  EXPECT_EQ(layout.buffer_elements, 6);
}

TEST(OutputLayoutValidationTest, PaddedRowsAreAccepted) {
  ASSERT_OK_AND_ASSIGN(Layout layout, Output({2, 3}, {4, 1}, DType::kFloat64));
  EXPECT_THAT(layout.strides, ElementsAre(4, 1));
  EXPECT_EQ(layout.element_count, 6);
  EXPECT_EQ(layout.buffer_elements, 7);
  EXPECT_EQ(layout.buffer_bytes(), 56);
}

TEST(OutputLayoutValidationTest, NhwcStridesForNchwSizesAreAccepted) {
  // N=2, C=3, H=4, W=5 stored as NHWC.
  ASSERT_OK_AND_ASSIGN(Layout layout, Output({2, 3, 4, 5}, {60, 1, 15, 3}));
  EXPECT_THAT(layout.strides, ElementsAre(60, 1, 15, 3));
  EXPECT_EQ(layout.element_count, 120);
  EXPECT_EQ(layout.buffer_elements, 120);
}

TEST(OutputLayoutValidationTest, ElementCountOverLimitIsResourceExhausted) {
  Limits limits;
  limits.max_tensor_elements = 5;
  EXPECT_THAT(Output({2, 3}, {}, DType::kFloat32, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("outputs[0].sizes [2, 3] hold 6 elements; the limit is 5")));
}

TEST(OutputLayoutValidationTest, StrideExtentOverflowIsInvalidArgument) {
  EXPECT_THAT(Output({2, 2}, {kInt64Max, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0]: sizes [2, 2] with strides [9223372036854775807, 1] "
                          "reach past 2^63 - 1 elements")));
}

TEST(OutputLayoutValidationTest, EmptyOutputStillNeedsStridesThatFit) {
  EXPECT_THAT(Output({0, 3}, {1, kInt64Max}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0]: sizes [0, 3] with strides [1, 9223372036854775807] "
                          "reach past 2^63 - 1 elements")));
}

TEST(OutputLayoutValidationTest, ExtentInBytesOverflowIsInvalidArgument) {
  EXPECT_THAT(Output({2}, {int64_t{1} << 61}, DType::kFloat64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("outputs[0]: 2305843009213693953 elements of float64 overflow "
                          "64 bits")));
}

// --- Helpers ------------------------------------------------------------------

TEST(TensorHelpersTest, FormatListJoinsWithCommas) {
  EXPECT_EQ(FormatList(std::vector<int64_t>{2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(FormatList(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(FormatList(std::vector<int64_t>(64, 1)).size(), 2 + 64 + 63 * 2u);
  EXPECT_EQ(FormatList(std::vector<int64_t>(60'000'000, 1)), "[1, 1, ...(60000000 entries)]");
  EXPECT_EQ(FormatList(std::vector<int64_t>{-1}), "[-1]");
}

TEST(TensorHelpersTest, PackedStridesKeepOuterStridesDistinctPastZeroSizes) {
  EXPECT_THAT(PackedStrides(std::vector<int64_t>{2, 0, 3}), ElementsAre(3, 3, 1));
  EXPECT_THAT(PackedStrides(std::vector<int64_t>{}), IsEmpty());
}

}  // namespace
}  // namespace tensorop
