// StridedSlice on oneTBB against the naive reference: every dtype and layout,
// ranks 1..8 and 32, random begin/end/stride and all five masks.
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

int64_t Between(std::mt19937_64& rng, int64_t low, int64_t high) {
  return low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
}

// A valid random step list: at most one ellipsis, no step with two special
// bits, never more consuming steps than the rank.
StridedSliceAttrs MakeRandomStridedSlice(std::span<const int64_t> sizes, std::mt19937_64& rng) {
  StridedSliceAttrs attrs;
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const int64_t consuming = Between(rng, 0, rank);
  const bool with_ellipsis = rng() % 3 == 0;
  const int64_t new_axes = Between(rng, 0, 2);
  const int64_t steps = consuming + new_axes + (with_ellipsis ? 1 : 0);
  std::vector<int> kinds;  // 0 range, 1 shrink, 2 new axis, 3 ellipsis
  for (int64_t i = 0; i < consuming; ++i) kinds.push_back(rng() % 5 == 0 ? 1 : 0);
  for (int64_t i = 0; i < new_axes; ++i) kinds.push_back(2);
  if (with_ellipsis) kinds.push_back(3);
  std::shuffle(kinds.begin(), kinds.end(), rng);

  // Which input dimension each consuming step lands on, to pick valid shrinks.
  const int64_t ellipsis_dims = with_ellipsis ? rank - consuming : 0;
  int64_t dim = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t n = dim < rank ? sizes[dim] : 1;
    // No index of an empty dimension can be shrunk to: make it a range step.
    const int kind = kinds[i] == 1 && n == 0 ? 0 : kinds[i];
    attrs.begin.push_back(Between(rng, -n - 2, n + 2));
    attrs.end.push_back(Between(rng, -n - 2, n + 2));
    int64_t stride = Between(rng, 1, 3) * (rng() % 2 ? 1 : -1);
    attrs.stride.push_back(stride);
    attrs.begin_mask.push_back(rng() % 4 == 0);
    attrs.end_mask.push_back(rng() % 4 == 0);
    attrs.new_axis_mask.push_back(kind == 2);
    attrs.shrink_axis_mask.push_back(kind == 1);
    attrs.ellipsis_mask.push_back(kind == 3);
    if (kind == 1) {
      attrs.begin.back() = n == 0 ? 0 : Between(rng, -n, n - 1);
      if (rng() % 2) attrs.stride.back() = 0;  // ignored on a shrink step
    }
    if (kind == 0 || kind == 1) ++dim;
    if (kind == 3) dim += ellipsis_dims;
  }
  // Masks of other lengths: short lists pad with 0, long ones are cut at M.
  if (rng() % 2 && !attrs.begin_mask.empty()) attrs.begin_mask.pop_back();
  if (rng() % 2) attrs.end_mask.push_back(1);
  return attrs;
}

using StridedSliceKernelTest = KernelMatrixTest;

TEST_P(StridedSliceKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  int ran = 0;
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 8; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) {
        // StridedSlice allows empty dimensions; keep a few.
        sizes.push_back(rng() % 11 == 0 ? 0 : 1 + rng() % (rank > 5 ? 3 : 5));
      }
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      StridedSliceAttrs attrs = MakeRandomStridedSlice(sizes, rng);
      std::optional<Expected> expected = ReferenceStridedSlice(attrs, input);
      ASSERT_TRUE(expected.has_value());
      OpRequest request{attrs, {{"input", input.view()}}, {}};
      if (trial % 2) {
        request.outputs = {{expected->sizes, OutputStrides(expected->sizes, trial, rng)}};
      }
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], *expected));
      ++ran;
    }
  }
  EXPECT_EQ(ran, 64);
}

INSTANTIATE_KERNEL_MATRIX(StridedSliceKernelTest);

using StridedSliceKernelLargeTest = BackendTest;
using StridedSliceKernelRankTest = BackendTest;

TEST_P(StridedSliceKernelRankTest, Rank32InputWithEllipsisAndReversal) {
  std::mt19937_64 rng(32);
  std::vector<int64_t> sizes(32, 1);
  sizes[0] = 3;
  sizes[15] = 2;
  sizes[31] = 4;
  OwnedTensor input = MakeTensor(DType::kInt16, sizes, LayoutKind::kPadded, rng);
  StridedSliceAttrs attrs;
  attrs.begin = {2, 0, 0};
  attrs.end = {0, 0, 0};
  attrs.stride = {-1, 1, -1};
  attrs.end_mask = {1, 0, 1};
  attrs.begin_mask = {0, 0, 1};
  attrs.ellipsis_mask = {0, 1, 0};
  std::optional<Expected> expected = ReferenceStridedSlice(attrs, input);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(expected->sizes.size(), 32u);
  EXPECT_EQ(expected->sizes[0], 3);
  EXPECT_EQ(expected->sizes[31], 4);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs,
                       Run({attrs, {{"input", input.view()}}, {}}));
  EXPECT_TRUE(OutputMatches(outputs[0], *expected));
}

TEST_P(StridedSliceKernelRankTest, AllShrunkGivesOneElementOfRankZero) {
  std::mt19937_64 rng(0);
  OwnedTensor input = MakeTensor(DType::kFloat64, {2, 3}, LayoutKind::kPermuted, rng);
  StridedSliceAttrs attrs;
  attrs.begin = {-1, 1};
  attrs.end = {0, 0};
  attrs.shrink_axis_mask = {1, 1};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs,
                       Run({attrs, {{"input", input.view()}}, {}}));
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].layout.sizes.empty());
  ASSERT_EQ(outputs[0].bytes.size(), 8u);
  const int64_t coords[] = {1, 1};
  uint64_t bits;
  std::memcpy(&bits, outputs[0].bytes.data(), 8);
  EXPECT_EQ(bits, ElementBits(input.desc, input.bytes, coords));
}

TEST_P(StridedSliceKernelLargeTest, ReversedRowsOfABigTensorMatchReference) {
  std::mt19937_64 rng(11);
  OwnedTensor input = MakeTensor(DType::kFloat32, {600, 700}, LayoutKind::kPacked, rng);
  StridedSliceAttrs attrs;
  attrs.begin = {-1, 10};
  attrs.end = {0, -10};
  attrs.stride = {-1, 3};
  attrs.end_mask = {1, 0};
  std::optional<Expected> expected = ReferenceStridedSlice(attrs, input);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs,
                       Run({attrs, {{"input", input.view()}}, {}}));
  EXPECT_THAT(outputs[0].layout.sizes, ::testing::ElementsAre(600, 227));
  EXPECT_TRUE(OutputMatches(outputs[0], *expected));
}

INSTANTIATE_BACKENDS(StridedSliceKernelLargeTest);
INSTANTIATE_BACKENDS(StridedSliceKernelRankTest);

}  // namespace
}  // namespace tensorop::testing
