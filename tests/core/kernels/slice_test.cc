// Slice on oneTBB against the naive reference: every dtype, layout and rank,
// requested output layouts, the parallel path and cancellation.
#include <random>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/tbb/execute.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

struct RandomSlice {
  SliceAttrs attrs;
  std::vector<int64_t> output_sizes;
};

RandomSlice MakeRandomSlice(std::span<const int64_t> sizes, std::mt19937_64& rng) {
  RandomSlice slice;
  for (int64_t size : sizes) {
    const int64_t window = 1 + static_cast<int64_t>(rng() % size);
    const int64_t offset = static_cast<int64_t>(rng() % (size - window + 1));
    int64_t step = 1 + static_cast<int64_t>(rng() % 3);
    if (rng() % 2) step = -step;
    const int64_t max_size = 1 + (window - 1) / std::abs(step);
    slice.attrs.offsets.push_back(offset);
    slice.attrs.window_sizes.push_back(window);
    slice.attrs.window_strides.push_back(step);
    slice.output_sizes.push_back(1 + static_cast<int64_t>(rng() % max_size));
  }
  return slice;
}

using SliceKernelTest = KernelMatrixTest;

TEST_P(SliceKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 3 : 5));
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      RandomSlice slice = MakeRandomSlice(sizes, rng);
      OpRequest request{slice.attrs,
                        {{"input", input.view()}},
                        {{slice.output_sizes, OutputStrides(slice.output_sizes, trial, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(
          OutputMatches(outputs[0], ReferenceSlice(slice.attrs, input, slice.output_sizes)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(SliceKernelTest);

using SliceKernelLargeTest = BackendTest;

// Large enough for the parallel path (several 256 KiB blocks on both cores).
TEST_P(SliceKernelLargeTest, StridedWindowAcrossManyBlocksMatchesReference) {
  std::mt19937_64 rng(7);
  OwnedTensor input = MakeTensor(DType::kFloat32, {512, 1024}, LayoutKind::kPadded, rng);
  SliceAttrs attrs{{3, 5}, {500, 1000}, {-1, 2}};
  std::vector<int64_t> output_sizes = {500, 500};
  OpRequest request{attrs, {{"input", input.view()}}, {{output_sizes, {}}}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceSlice(attrs, input, output_sizes)));
}

TEST_P(SliceKernelLargeTest, ContiguousRowsMergeIntoOneCopy) {
  std::mt19937_64 rng(8);
  OwnedTensor input = MakeTensor(DType::kUint8, {64, 4096}, LayoutKind::kPacked, rng);
  SliceAttrs attrs{{8, 0}, {40, 4096}, {1, 1}};
  std::vector<int64_t> output_sizes = {40, 4096};
  OpRequest request{attrs, {{"input", input.view()}}, {{output_sizes, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
  ASSERT_EQ(plan.copies.size(), 1u);
  EXPECT_THAT(plan.copies[0].sizes, ::testing::ElementsAre(40 * 4096));
  EXPECT_EQ(plan.copies[0].src_offset, 8 * 4096);
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceSlice(attrs, input, output_sizes)));
}

// uint8 backwards goes eight bytes at a time: every run length around that
// width, from every offset in a word, against the bytes read one by one.
TEST(SliceKernelReversedBytesTest, EveryRunLengthIsTheBytesBackwards) {
  std::mt19937_64 rng(10);
  OwnedTensor input = MakeTensor(DType::kUint8, {64}, LayoutKind::kPacked, rng);
  const std::byte* inputs[] = {input.bytes.data()};
  for (int64_t offset = 0; offset < 8; ++offset) {
    for (int64_t length = 1; length <= 40; ++length) {
      SCOPED_TRACE(::testing::Message() << "offset " << offset << " length " << length);
      OpRequest request{
          SliceAttrs{{offset}, {length}, {-1}}, {{"input", input.view()}}, {{{length}, {}}}};
      ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
      std::vector<std::byte> output(static_cast<size_t>(length));
      std::byte* outputs[] = {output.data()};
      ASSERT_OK(tbb_backend::Execute(plan, inputs, outputs));
      for (int64_t i = 0; i < length; ++i) {
        ASSERT_EQ(output[static_cast<size_t>(i)],
                  input.bytes[static_cast<size_t>(offset + length - 1 - i)])
            << "element " << i;
      }
    }
  }
}

TEST(SliceKernelStopTest, StopBetweenBlocksReturnsItsStatusAndStartsNoMoreBlocks) {
  std::mt19937_64 rng(9);
  OwnedTensor input = MakeTensor(DType::kUint8, {64, 1 << 16}, LayoutKind::kPacked, rng);
  SliceAttrs attrs{{0, 0}, {64, 1 << 16}, {1, 1}};
  OpRequest request{attrs, {{"input", input.view()}}, {{{64, 1 << 16}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
  std::vector<std::byte> output(plan.outputs[0].buffer_bytes());
  std::atomic<int> checks{0};
  // Allows the up-front check and two blocks, then asks to stop.
  StopCheck stop = [&]() -> absl::Status {
    return ++checks > 3 ? absl::CancelledError("stop requested") : absl::OkStatus();
  };
  const std::byte* inputs[] = {input.bytes.data()};
  std::byte* outputs[] = {output.data()};
  EXPECT_THAT(tbb_backend::Execute(plan, inputs, outputs, stop),
              StatusIs(absl::StatusCode::kCancelled, "stop requested"));
  // 16 blocks of 256 KiB in all; after the stop at most the blocks already
  // running (one per thread) finish, so most of the output stays zero.
  int64_t copied = 0;
  for (std::byte b : output) copied += b != std::byte{0};
  EXPECT_LT(copied, static_cast<int64_t>(output.size()) / 2);
}

INSTANTIATE_BACKENDS(SliceKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
