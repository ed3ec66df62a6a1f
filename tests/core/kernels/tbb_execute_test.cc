// RunsOnCallingThread agrees with Execute: a plan it calls small runs every
// block on the calling thread, so the server may run it outside oneTBB.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/operator.h"
#include "gtest/gtest.h"
#include "kernels/tbb/blocks.h"
#include "kernels/tbb/execute.h"

namespace tensorop {
namespace {

using tbb_backend::kSerialBytes;
using tbb_backend::RunsOnCallingThread;

StridedCopy CopyOf(int64_t elements, int element_size) {
  return {.element_size = element_size,
          .sizes = {elements},
          .src_strides = {element_size},
          .dst_strides = {element_size},
          .element_count = elements};
}

ScatterWalk WalkOf(int64_t updates) {
  ScatterWalk walk;
  walk.element_size = 4;
  walk.index_size = 8;
  walk.element_count = updates;
  return walk;
}

TEST(TbbExecuteTest, CopiesUpToTheSerialBoundRunOnTheCallingThread) {
  ExecutionPlan plan;
  plan.copies = {CopyOf(kSerialBytes / 16, 4), CopyOf(kSerialBytes / 16, 4)};  // half the bound
  EXPECT_TRUE(RunsOnCallingThread(plan));
  plan.copies.push_back(CopyOf(kSerialBytes / 4, 2));  // the whole bound
  EXPECT_TRUE(RunsOnCallingThread(plan));
  plan.copies.push_back(CopyOf(1, 1));  // one byte past it
  EXPECT_FALSE(RunsOnCallingThread(plan));
}

TEST(TbbExecuteTest, ScatterWalksCountTheirIndicesAndUpdates) {
  ExecutionPlan plan;
  plan.scatters = {WalkOf(kSerialBytes / 12)};  // 4-byte updates, 8-byte indices
  EXPECT_TRUE(RunsOnCallingThread(plan));
  plan.copies = {CopyOf(kSerialBytes - kSerialBytes / 12 * 12 + 1, 1)};
  EXPECT_FALSE(RunsOnCallingThread(plan));
}

// A uint8 input of `bytes` reversed by a Slice, run with a stop check that
// notes the thread of every call (one per block).
struct ReversedSlice {
  explicit ReversedSlice(int64_t bytes) : input(static_cast<size_t>(bytes)), output(input.size()) {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i * 7 + i / 251);
    const OpRequest request = {SliceAttrs{{0}, {bytes}, {-1}},
                               {{"input", {TensorDesc{DType::kUint8, {bytes}, {}}, input}}},
                               {{{bytes}, {}}}};
    plan = *PlanOperator(request, {});
  }
  absl::Status Run() {
    const std::byte* inputs[] = {input.data()};
    std::byte* outputs[] = {output.data()};
    return tbb_backend::Execute(plan, inputs, outputs, [this] {
      std::lock_guard<std::mutex> lock(mutex);
      threads.push_back(std::this_thread::get_id());
      return absl::OkStatus();
    });
  }
  bool Reversed() const {
    for (size_t i = 0; i < input.size(); ++i) {
      if (output[i] != input[input.size() - 1 - i]) return false;
    }
    return true;
  }

  std::vector<std::byte> input, output;
  ExecutionPlan plan;
  std::mutex mutex;
  std::vector<std::thread::id> threads;
};

TEST(TbbExecuteTest, APlanAtTheSerialBoundAsksEveryBlockOnTheCallingThread) {
  ReversedSlice slice(kSerialBytes);
  ASSERT_TRUE(RunsOnCallingThread(slice.plan));
  ASSERT_TRUE(slice.Run().ok());
  EXPECT_TRUE(slice.Reversed());
  // Execute's own check, then one per block of kBlockBytes.
  ASSERT_EQ(slice.threads.size(), 1 + kSerialBytes / tbb_backend::kBlockBytes);
  for (std::thread::id thread : slice.threads) EXPECT_EQ(thread, std::this_thread::get_id());
}

TEST(TbbExecuteTest, APlanPastTheBoundIsSplitIntoBlocksAndStillExact) {
  ReversedSlice slice(kSerialBytes + 3);
  ASSERT_FALSE(RunsOnCallingThread(slice.plan));
  ASSERT_TRUE(slice.Run().ok());
  EXPECT_TRUE(slice.Reversed());
  // Execute's own check, then one per block: the last holds the 3 bytes over.
  EXPECT_EQ(slice.threads.size(), 2 + kSerialBytes / tbb_backend::kBlockBytes);
}

}  // namespace
}  // namespace tensorop
