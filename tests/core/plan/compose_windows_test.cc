// ComposeWindows (core/plan/compose_windows.h): a window read through a
// window on a source gives, element for element, what reading the source
// through the composed window gives. Reference: gather twice.
#include "core/plan/compose_windows.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/layout.h"

namespace tensorop {
namespace {

using ::tensorop::testing::MakeLayout;
using ::testing::ElementsAre;

// The elements `window` reads from `source` for an output of `sizes`, row-major.
std::vector<int64_t> Gather(const std::vector<int64_t>& source, const InputWindow& window,
                            const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) count *= size;
  std::vector<int64_t> out;
  std::vector<int64_t> c(sizes.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t address = window.base;
    for (size_t j = 0; j < sizes.size(); ++j) address += c[j] * window.strides[j];
    out.push_back(source.at(static_cast<size_t>(address)));
    for (size_t j = sizes.size(); j-- > 0;) {
      if (++c[j] < sizes[j]) break;
      c[j] = 0;
    }
  }
  return out;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), 100);
  return values;
}

// Composes, and checks the composition against gathering twice.
InputWindow ExpectSameAsTwoGathers(const std::vector<int64_t>& source, const InputWindow& inner,
                                   const std::vector<int64_t>& middle_sizes,
                                   const InputWindow& outer,
                                   const std::vector<int64_t>& output_sizes) {
  const Layout middle = MakeLayout(DType::kInt64, middle_sizes);
  EXPECT_TRUE(ComposableMiddle(middle));
  EXPECT_TRUE(ComposesOver(middle, outer, output_sizes));
  const std::vector<int64_t> through_middle =
      Gather(Gather(source, inner, middle_sizes), outer, output_sizes);
  const InputWindow composed = ComposeWindows(inner, middle, outer, output_sizes);
  EXPECT_EQ(Gather(source, composed, output_sizes), through_middle);
  return composed;
}

TEST(ComposeWindowsTest, SlicesOfSlicesWithNegativeStrides) {
  // 6x8 source; inner: rows 1, 3, 5 with columns reversed; outer: rows 1, 0
  // (backwards) and columns 2, 4, 6.
  const InputWindow composed =
      ExpectSameAsTwoGathers(Iota(48), InputWindow{.base = 1 * 8 + 7, .strides = {16, -1}}, {3, 8},
                             InputWindow{.base = 1 * 8 + 2, .strides = {-8, 2}}, {2, 3});
  EXPECT_EQ(composed.base, 3 * 8 + 5);
  EXPECT_THAT(composed.strides, ElementsAre(-16, -2));
}

TEST(ComposeWindowsTest, BroadcastStridesStayZero) {
  // A row of 4 read 3 times (stride 0), then every other column.
  const InputWindow composed =
      ExpectSameAsTwoGathers(Iota(4), InputWindow{.base = 0, .strides = {0, 1}}, {3, 4},
                             InputWindow{.base = 1, .strides = {4, 2}}, {3, 2});
  EXPECT_EQ(composed.base, 1);
  EXPECT_THAT(composed.strides, ElementsAre(0, 2));
}

TEST(ComposeWindowsTest, AxesAddedAndDroppedAcrossSteps) {
  // Inner: a 2x3x4 source read as 3x4 (axis 0 shrunk at index 1); outer: a
  // new size-1 axis, then column 3 of every row (axis 1 shrunk).
  const InputWindow composed =
      ExpectSameAsTwoGathers(Iota(24), InputWindow{.base = 12, .strides = {4, 1}}, {3, 4},
                             InputWindow{.base = 3, .strides = {0, 4}}, {1, 3});
  EXPECT_EQ(composed.base, 15);
  EXPECT_THAT(composed.strides, ElementsAre(0, 4));
}

TEST(ComposeWindowsTest, OnlyPackedMiddlesWithElementsCompose) {
  EXPECT_TRUE(ComposableMiddle(MakeLayout(DType::kFloat32, {2, 3})));
  EXPECT_FALSE(ComposableMiddle(MakeLayout(DType::kFloat32, {2, 3}, {4, 1})));  // padded rows
  EXPECT_FALSE(ComposableMiddle(MakeLayout(DType::kFloat32, {2, 0})));          // empty
}

// Layout steps: a transpose's and an expand's windows, and a reshape that
// splits a dimension, compose; a reshape that merges dimensions carries from
// one into the next, and does not.
TEST(ComposeWindowsTest, TransposeExpandAndSplittingReshapesCompose) {
  const std::vector<int64_t> source = Iota(40);
  // The middle [4, 3] is rows 1..4 of a [5, 8] source, every other column.
  const InputWindow inner{.base = 8, .strides = {8, 2}};
  ExpectSameAsTwoGathers(source, inner, {4, 3}, {.base = 0, .strides = {1, 3}}, {3, 4});
  ExpectSameAsTwoGathers(source, inner, {4, 3}, {.base = 0, .strides = {0, 3, 1}}, {2, 4, 3});
  ExpectSameAsTwoGathers(source, inner, {4, 3}, {.base = 0, .strides = {6, 3, 1}}, {2, 2, 3});
}

TEST(ComposeWindowsTest, MergingReshapesDoNotCompose) {
  const Layout middle = MakeLayout(DType::kInt64, {4, 3});
  EXPECT_FALSE(ComposesOver(middle, {.base = 0, .strides = {1}}, std::vector<int64_t>{12}));
  EXPECT_FALSE(ComposesOver(middle, {.base = 0, .strides = {6, 1}}, std::vector<int64_t>{2, 6}));
  // A run inside one row, or rows whole, stays inside.
  EXPECT_TRUE(ComposesOver(middle, {.base = 3, .strides = {1}}, std::vector<int64_t>{3}));
  EXPECT_FALSE(ComposesOver(middle, {.base = 2, .strides = {1}}, std::vector<int64_t>{3}));
  EXPECT_TRUE(ComposesOver(middle, {.base = 11, .strides = {-3, -1}}, std::vector<int64_t>{4, 3}));
}

}  // namespace
}  // namespace tensorop
