// Pad's plans (core/plan/pad.h): constant mode is the input once into the
// interior plus the value into the slabs around it, no element written twice;
// the other modes one copy per choice of runs, mirrored runs reading backwards.
#include "core/plan/pad.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/attrs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/one_input.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::OneInput;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// How many times each output element is written by the plan's copies and fills.
std::vector<int> Writes(const ExecutionPlan& plan) {
  std::vector<int> writes(static_cast<size_t>(plan.outputs[0].buffer_bytes()), 0);
  const auto walk = [&](const StridedCopy& copy) {
    std::vector<int64_t> at(copy.sizes.size(), 0);
    for (int64_t e = 0; e < copy.element_count; ++e) {
      int64_t offset = copy.dst_offset;
      for (size_t d = 0; d < at.size(); ++d) offset += at[d] * copy.dst_strides[d];
      ++writes[static_cast<size_t>(offset / copy.element_size)];
      for (size_t d = at.size(); d-- > 0;) {
        if (++at[d] < copy.sizes[d]) break;
        at[d] = 0;
      }
    }
  };
  for (const StridedCopy& copy : plan.copies) walk(copy);
  for (const StridedCopy& fill : plan.fills) walk(fill);
  writes.resize(static_cast<size_t>(plan.outputs[0].element_count));
  return writes;
}

TEST(PadPlanTest, ConstantCopiesTheInputOnceAndFillsEverySlab) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3, 4}}.Plan(PadAttrs{
                           .start_padding = {1, 0, 2}, .end_padding = {2, 1, 0}, .value = "7"})));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_EQ(plan.copies[0].element_count, 24);
  // Start and end of dimension 0, the end of 1, the start of 2.
  EXPECT_EQ(plan.fills.size(), 4u);
  EXPECT_EQ(plan.fill_value[0], std::byte{0});  // 7.0f is 0x40E00000
  EXPECT_EQ(plan.fill_value[2], std::byte{0xE0});
  EXPECT_EQ(plan.fill_value[3], std::byte{0x40});
  for (const StridedCopy& fill : plan.fills) EXPECT_THAT(fill.src_strides, ::testing::Each(0));
  const std::vector<int> writes = Writes(plan);
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), 5 * 4 * 6);
}

TEST(PadPlanTest, EdgeCopiesEveryPairOfRunsOnce) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {3, 4}}.Plan(PadAttrs{
                           .start_padding = {1, 2}, .end_padding = {1, 1}, .mode = "edge"})));
  EXPECT_EQ(plan.copies.size(), 9u);
  EXPECT_THAT(plan.fills, IsEmpty());
  const std::vector<int> writes = Writes(plan);
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), 5 * 7);
}

TEST(PadPlanTest, AMirroredRunReadsBackwards) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.dtype = DType::kInt16, .sizes = {4}}.Plan(
                           PadAttrs{.start_padding = {3}, .end_padding = {0}, .mode = "reflect"})));
  ASSERT_EQ(plan.copies.size(), 2u);
  // Output 0..2 reads input 3, 2, 1; then the input forwards.
  EXPECT_EQ(plan.copies[0].src_offset, 6);
  EXPECT_THAT(plan.copies[0].src_strides, ElementsAre(-2));
  EXPECT_EQ(plan.copies[1].dst_offset, 6);
  EXPECT_THAT(plan.copies[1].src_strides, ElementsAre(2));
}

TEST(PadPlanTest, WholePeriodsAreOneCopyThatRepeats) {
  // [a, b] reflected 1000 times on each side: two runs repeat, not 2000.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2}}.Plan(PadAttrs{
                           .start_padding = {2000}, .end_padding = {2000}, .mode = "reflect"})));
  EXPECT_LE(plan.copies.size(), 4u);
  const std::vector<int> writes = Writes(plan);
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), 4002);
}

}  // namespace
}  // namespace tensorop
