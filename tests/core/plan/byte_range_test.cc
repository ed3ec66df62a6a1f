// The bytes a plan reads from each input (core/plan/byte_range.h): what the
// OpenCL device uploads. Hand-made copies for the arithmetic, planned
// operators for the hull over several copies and walks.
#include "core/plan/byte_range.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/attrs.h"
#include "core/dtype.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::testing::ElementsAre;

StridedCopy Copy(int element_size, std::vector<int64_t> sizes, std::vector<int64_t> src_strides,
                 int64_t src_offset) {
  StridedCopy copy;
  copy.element_size = element_size;
  copy.element_count = 1;
  for (int64_t size : sizes) copy.element_count *= size;
  copy.sizes = std::move(sizes);
  copy.src_strides = std::move(src_strides);
  copy.src_offset = src_offset;
  return copy;
}

TEST(ReadByteRangeTest, ContiguousRunFromItsOffset) {
  // 10 float32 from byte 12: bytes [12, 52).
  EXPECT_EQ(ReadByteRange(Copy(4, {10}, {4}, 12)), (ByteRange{12, 52}));
}

TEST(ReadByteRangeTest, StridedDimensionsEndAtTheLastElementPlusItsWidth) {
  // [3, 4] uint16 with strides 40 and 4 bytes from byte 6: last element at
  // 6 + 2*40 + 3*4 = 98, so [6, 100).
  EXPECT_EQ(ReadByteRange(Copy(2, {3, 4}, {40, 4}, 6)), (ByteRange{6, 100}));
}

TEST(ReadByteRangeTest, NegativeStridesReachBelowTheOffset) {
  // A reversed window: 5 int64 read from byte 80 down by 16: [80 - 64, 88).
  EXPECT_EQ(ReadByteRange(Copy(8, {5}, {-16}, 80)), (ByteRange{16, 88}));
  // Mixed signs: rows go down by 100, columns up by 1.
  EXPECT_EQ(ReadByteRange(Copy(1, {3, 7}, {-100, 1}, 250)), (ByteRange{50, 257}));
}

TEST(ReadByteRangeTest, BroadcastStridesReadOneElement) {
  EXPECT_EQ(ReadByteRange(Copy(4, {1000, 3}, {0, 0}, 20)), (ByteRange{20, 24}));
  EXPECT_EQ(ReadByteRange(Copy(4, {1000, 3}, {0, 4}, 20)), (ByteRange{20, 32}));
}

TEST(ReadByteRangeTest, OneElementAndEmptyCopies) {
  // Rank 0 after merging: one element at the offset.
  EXPECT_EQ(ReadByteRange(Copy(8, {}, {}, 24)), (ByteRange{24, 32}));
  StridedCopy empty = Copy(4, {0, 5}, {20, 4}, 8);
  ASSERT_EQ(empty.element_count, 0);
  EXPECT_TRUE(ReadByteRange(empty).empty());
  EXPECT_EQ(ReadByteRange(empty).size(), 0);
}

class InputReadRangesTest : public ::testing::Test {
 protected:
  TensorView Tensor(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides = {}) {
    int64_t elements = 1;
    for (size_t d = 0; d < sizes.size(); ++d) {
      elements += (sizes[d] - 1) * (strides.empty() ? 0 : strides[d]);
    }
    if (strides.empty()) {
      elements = 1;
      for (int64_t size : sizes) elements *= size;
    }
    buffers_.emplace_back(static_cast<size_t>(elements * ElementSize(dtype)), std::byte{0});
    return TensorView{TensorDesc{dtype, std::move(sizes), std::move(strides)}, buffers_.back()};
  }
  std::vector<std::vector<std::byte>> buffers_;
};

TEST_F(InputReadRangesTest, SliceReadsOnlyItsWindowRows) {
  // Rows 2..4 of a packed float32 [10, 6], columns 1..3: bytes of rows 2-4,
  // from column 1 of row 2 to column 3 of row 4.
  OpRequest request{SliceAttrs{{2, 1}, {3, 3}, {1, 1}},
                    {{"input", Tensor(DType::kFloat32, {10, 6})}},
                    {OutputDesc{{3, 3}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_THAT(InputReadRanges(plan), ElementsAre(ByteRange{(2 * 6 + 1) * 4, (4 * 6 + 4) * 4}));
}

TEST_F(InputReadRangesTest, ReversedSliceCoversTheSameWindow) {
  OpRequest request{SliceAttrs{{2, 1}, {3, 3}, {-1, -1}},
                    {{"input", Tensor(DType::kFloat32, {10, 6})}},
                    {OutputDesc{{3, 3}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_THAT(InputReadRanges(plan), ElementsAre(ByteRange{(2 * 6 + 1) * 4, (4 * 6 + 4) * 4}));
}

TEST_F(InputReadRangesTest, SplitOutputsTogetherReadTheWholeInput) {
  // Outputs of 2 and 3 rows of a [5, 4] int16: the hull of both copies.
  OpRequest request{SplitAttrs{0},
                    {{"input", Tensor(DType::kInt16, {5, 4})}},
                    {OutputDesc{{2, 4}, {}}, OutputDesc{{3, 4}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_THAT(InputReadRanges(plan), ElementsAre(ByteRange{0, 5 * 4 * 2}));
}

TEST_F(InputReadRangesTest, BroadcastInputOfAScatterIsOneRow) {
  // Input broadcast along dimension 0 (stride 0): only its one row is read.
  // Indices and updates are read from byte 0 to their last element.
  OpRequest request{ScatterElementsAttrs{1},
                    {{"input", Tensor(DType::kFloat32, {4, 5}, {0, 1})},
                     {"indices", Tensor(DType::kInt64, {4, 2})},
                     {"updates", Tensor(DType::kFloat32, {4, 2})}},
                    {}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  ASSERT_EQ(plan.input_names.size(), 3u);
  const std::vector<ByteRange> ranges = InputReadRanges(plan);
  ASSERT_EQ(ranges.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(plan.input_names[i]);
    const ByteRange expected = plan.input_names[i] == "input"     ? ByteRange{0, 5 * 4}
                               : plan.input_names[i] == "indices" ? ByteRange{0, 8 * 8}
                                                                  : ByteRange{0, 8 * 4};
    EXPECT_EQ(ranges[i], expected);
  }
}

using OutputAsInputBytesTest = InputReadRangesTest;

TEST_F(OutputAsInputBytesTest, WholeRowsAreTheInputsBytes) {
  // Rows 2..4 of a packed float32 [10, 6], every column: bytes [48, 120).
  OpRequest request{SliceAttrs{{2, 0}, {3, 6}, {1, 1}},
                    {{"input", Tensor(DType::kFloat32, {10, 6})}},
                    {OutputDesc{{3, 6}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  const std::optional<SlotBytes> bytes = OutputAsInputBytes(plan, 0);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_EQ(bytes->input_slot, 0);
  EXPECT_EQ(bytes->range, (ByteRange{2 * 6 * 4, 5 * 6 * 4}));
}

TEST_F(OutputAsInputBytesTest, EachOuterSplitOutputIsItsRows) {
  OpRequest request{SplitAttrs{0},
                    {{"input", Tensor(DType::kInt16, {5, 4})}},
                    {OutputDesc{{2, 4}, {}}, OutputDesc{{3, 4}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  const std::optional<SlotBytes> first = OutputAsInputBytes(plan, 0);
  const std::optional<SlotBytes> second = OutputAsInputBytes(plan, 1);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->range, (ByteRange{0, 2 * 4 * 2}));
  EXPECT_EQ(second->range, (ByteRange{2 * 4 * 2, 5 * 4 * 2}));
}

TEST_F(OutputAsInputBytesTest, OutputsThatAreNotOneForwardRunAreNot) {
  const TensorView input = Tensor(DType::kFloat32, {10, 6});
  const std::vector<OpRequest> requests = {
      // columns 1..3 of each row
      {SliceAttrs{{2, 1}, {3, 3}, {1, 1}}, {{"input", input}}, {OutputDesc{{3, 3}, {}}}},
      // the rows reversed
      {SliceAttrs{{2, 0}, {3, 6}, {-1, 1}}, {{"input", input}}, {OutputDesc{{3, 6}, {}}}},
      // every other row
      {SliceAttrs{{0, 0}, {6, 6}, {2, 1}}, {{"input", input}}, {OutputDesc{{3, 6}, {}}}},
      // whole rows into a padded output: its padding is no input byte
      {SliceAttrs{{2, 0}, {3, 6}, {1, 1}}, {{"input", input}}, {OutputDesc{{3, 6}, {8, 1}}}},
      // one row broadcast (stride 0) to three
      {SliceAttrs{{0, 0}, {3, 6}, {1, 1}},
       {{"input", Tensor(DType::kFloat32, {3, 6}, {0, 1})}},
       {OutputDesc{{3, 6}, {}}}},
      // halves of each row
      {SplitAttrs{1}, {{"input", input}}, {OutputDesc{{10, 3}, {}}, OutputDesc{{10, 3}, {}}}},
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(requests[i], Limits{}));
    EXPECT_FALSE(OutputAsInputBytes(plan, 0).has_value());
  }
}

TEST_F(OutputAsInputBytesTest, AScatterOutputIsNot) {
  OpRequest request{ScatterElementsAttrs{0},
                    {{"input", Tensor(DType::kFloat32, {4, 5})},
                     {"indices", Tensor(DType::kInt64, {1, 5})},
                     {"updates", Tensor(DType::kFloat32, {1, 5})}},
                    {}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, Limits{}));
  EXPECT_FALSE(OutputAsInputBytes(plan, 0).has_value());
}

using InputsReadAsRunsTest = InputReadRangesTest;

TEST_F(InputsReadAsRunsTest, WholeRowsOuterSplitsAndAScattersInputAreRuns) {
  const TensorView input = Tensor(DType::kFloat32, {10, 6});
  ASSERT_OK_AND_ASSIGN(ExecutionPlan rows, PlanOperator({SliceAttrs{{2, 0}, {3, 6}, {1, 1}},
                                                         {{"input", input}},
                                                         {OutputDesc{{3, 6}, {}}}},
                                                        Limits{}));
  EXPECT_THAT(InputsReadAsRuns(rows, 0), ElementsAre(true));
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan split,
      PlanOperator(
          {SplitAttrs{0}, {{"input", input}}, {OutputDesc{{4, 6}, {}}, OutputDesc{{6, 6}, {}}}},
          Limits{}));
  EXPECT_THAT(InputsReadAsRuns(split, 0), ElementsAre(true));
  // Its input is copied whole into the output as one run; indices and
  // updates are read by the walk.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan scatter,
                       PlanOperator({ScatterElementsAttrs{0},
                                     {{"input", input},
                                      {"indices", Tensor(DType::kInt64, {1, 6})},
                                      {"updates", Tensor(DType::kFloat32, {1, 6})}},
                                     {}},
                                    Limits{}));
  ASSERT_EQ(scatter.input_names.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(scatter.input_names[i]);
    EXPECT_EQ(InputsReadAsRuns(scatter, 0)[i], scatter.input_names[i] == "input");
  }
}

TEST_F(InputsReadAsRunsTest, SeveralRunsEachAtLeastTheBoundOrOneRunOfAnySize) {
  // An outer Split of a float32 [10, 6] into runs of 96 and 144 bytes.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan split,
                       PlanOperator({SplitAttrs{0},
                                     {{"input", Tensor(DType::kFloat32, {10, 6})}},
                                     {OutputDesc{{4, 6}, {}}, OutputDesc{{6, 6}, {}}}},
                                    Limits{}));
  EXPECT_THAT(InputsReadAsRuns(split, 96), ElementsAre(true));
  EXPECT_THAT(InputsReadAsRuns(split, 97), ElementsAre(false));
  // One run of 72 bytes, whatever the bound.
  ASSERT_OK_AND_ASSIGN(ExecutionPlan rows,
                       PlanOperator({SliceAttrs{{2, 0}, {3, 6}, {1, 1}},
                                     {{"input", Tensor(DType::kFloat32, {10, 6})}},
                                     {OutputDesc{{3, 6}, {}}}},
                                    Limits{}));
  EXPECT_THAT(InputsReadAsRuns(rows, int64_t{1} << 40), ElementsAre(true));
}

TEST_F(InputsReadAsRunsTest, StridedReversedOrRepeatedReadsAreNot) {
  const TensorView input = Tensor(DType::kFloat32, {10, 6});
  const std::vector<OpRequest> requests = {
      // columns 1..3 of each row
      {SliceAttrs{{2, 1}, {3, 3}, {1, 1}}, {{"input", input}}, {OutputDesc{{3, 3}, {}}}},
      // the rows reversed
      {SliceAttrs{{2, 0}, {3, 6}, {-1, 1}}, {{"input", input}}, {OutputDesc{{3, 6}, {}}}},
      // one row tiled three times: read three times over (stride 0)
      {TileAttrs{{3, 1}}, {{"input", Tensor(DType::kFloat32, {1, 6})}}, {}},
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(requests[i], Limits{}));
    EXPECT_THAT(InputsReadAsRuns(plan, 0), ElementsAre(false));
  }
}

TEST(InputsReadAsRunsPlainTest, ASlotAlsoWalkedReadTwiceOrNotReadIsNot) {
  ExecutionPlan plan;
  plan.input_names = {"a", "b", "c", "d"};
  StridedCopy run = Copy(4, {2}, {4}, 0);
  run.dst_strides = {4};
  plan.copies.push_back(run);  // a: one run
  run.input_slot = 1;
  plan.copies.push_back(run);  // b: one run, and a gather's indices
  plan.gathers.emplace_back();
  plan.gathers.back().input_slot = 3;
  plan.gathers.back().indices_slot = 1;
  run.input_slot = 2;
  plan.copies.push_back(run);  // c: the same run twice, 16 bytes of an 8-byte range
  plan.copies.push_back(run);
  EXPECT_THAT(InputsReadAsRuns(plan, 0), ElementsAre(true, false, false, false));
}

TEST(InputReadRangesPlainTest, SlotsNothingReadsAreEmpty) {
  ExecutionPlan plan;
  plan.input_names = {"a", "b"};
  plan.copies.push_back(Copy(4, {2}, {4}, 0));
  plan.copies[0].input_slot = 1;
  EXPECT_THAT(InputReadRanges(plan), ElementsAre(ByteRange{}, ByteRange{0, 8}));
}

}  // namespace
}  // namespace tensorop
