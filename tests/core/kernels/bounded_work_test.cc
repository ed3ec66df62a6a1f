// Long loops ask the call's stop check at bounded intervals (every
// kStopEvery items): validation of a scatter's 2^20 index values, its walk on
// the CPU (2^20 stride-0 updates colliding), and the outputs of a split. A stop that says so ends
// the work with its status.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/operator.h"
#include "gtest/gtest.h"
#include "kernels/tbb/execute.h"

namespace tensorop {
namespace {

constexpr int64_t kCount = int64_t{1} << 20;

// A stop that counts its calls and says CANCELLED from call `stop_at` on.
struct CountingStop {
  std::atomic<int64_t> calls{0};
  int64_t stop_at = INT64_MAX;
  StopCheck Check() {
    return [this] {
      return ++calls >= stop_at ? absl::CancelledError("stopped by the test") : absl::OkStatus();
    };
  }
};

struct ScatterBytes {
  int32_t index = 0;
  float update = 1.0f;
  float input = 0.0f;
};

// input float32 [1]; indices and updates [kCount] with stride 0: every update
// collides on input[0].
OpRequest StrideZeroScatter(const ScatterBytes& bytes) {
  OpRequest request;
  request.attrs = ScatterElementsAttrs{.axis = 0};
  const auto view = [](const void* at, size_t size) {
    return std::span<const std::byte>(static_cast<const std::byte*>(at), size);
  };
  request.inputs.push_back(
      {"input", TensorView{{DType::kFloat32, {1}, {}}, view(&bytes.input, 4)}});
  request.inputs.push_back(
      {"indices", TensorView{{DType::kInt32, {kCount}, {0}}, view(&bytes.index, 4)}});
  request.inputs.push_back(
      {"updates", TensorView{{DType::kFloat32, {kCount}, {0}}, view(&bytes.update, 4)}});
  return request;
}

TEST(BoundedWorkTest, ScatterValidationAsksTheStopEveryBlockOfIndices) {
  // kCount indices in a padded buffer (stride 2): each is read, through the
  // row-major walk. (Stride-0 indices are one value, read once.)
  const ScatterBytes bytes;
  const std::vector<int32_t> padded(2 * kCount, 0);
  OpRequest request = StrideZeroScatter(bytes);
  request.inputs[1].tensor =
      TensorView{{DType::kInt32, {kCount}, {2}},
                 std::span<const std::byte>(reinterpret_cast<const std::byte*>(padded.data()),
                                            (2 * kCount - 1) * sizeof(int32_t))};
  CountingStop counting;
  ASSERT_TRUE(PlanOperator(request, Limits{}, counting.Check()).ok());
  EXPECT_GE(counting.calls.load(), kCount / kStopEvery);

  CountingStop stopping;
  stopping.stop_at = 3;
  EXPECT_EQ(PlanOperator(request, Limits{}, stopping.Check()).status(),
            absl::CancelledError("stopped by the test"));
  EXPECT_EQ(stopping.calls.load(), 3);

  CountingStop once;
  ASSERT_TRUE(PlanOperator(StrideZeroScatter(bytes), Limits{}, once.Check()).ok());
  EXPECT_LE(once.calls.load(), 1);
}

TEST(BoundedWorkTest, ScatterWalkOfCollidingUpdatesAsksTheStopEveryBlock) {
  const ScatterBytes bytes;
  const OpRequest request = StrideZeroScatter(bytes);
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(request, Limits{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<const std::byte*> inputs = {reinterpret_cast<const std::byte*>(&bytes.input),
                                          reinterpret_cast<const std::byte*>(&bytes.index),
                                          reinterpret_cast<const std::byte*>(&bytes.update)};
  float output = 0.0f;
  std::vector<std::byte*> outputs = {reinterpret_cast<std::byte*>(&output)};

  CountingStop counting;
  ASSERT_TRUE(tbb_backend::Execute(*plan, inputs, outputs, counting.Check()).ok());
  EXPECT_EQ(output, 1.0f);
  // One walk of kCount collisions: at least one check per kStopEvery of them.
  EXPECT_GE(counting.calls.load(), kCount / kStopEvery);

  CountingStop stopping;
  stopping.stop_at = 4;
  EXPECT_EQ(tbb_backend::Execute(*plan, inputs, outputs, stopping.Check()),
            absl::CancelledError("stopped by the test"));
  EXPECT_EQ(stopping.calls.load(), 4);
}

TEST(BoundedWorkTest, SplitIntoManyOutputsAsksTheStopWhileValidating) {
  // uint8 [kCount] of stride 0, split into kCount outputs of one element.
  const std::byte value{7};
  OpRequest request;
  request.attrs = SplitAttrs{.axis = 0};
  request.inputs.push_back(
      {"input", TensorView{{DType::kUint8, {kCount}, {0}}, std::span<const std::byte>(&value, 1)}});
  request.outputs.assign(kCount, OutputDesc{{1}, {}});
  CountingStop stopping;
  stopping.stop_at = 2;
  EXPECT_EQ(PlanOperator(request, Limits{}, stopping.Check()).status(),
            absl::CancelledError("stopped by the test"));
  EXPECT_EQ(stopping.calls.load(), 2);
}

}  // namespace
}  // namespace tensorop
