// What the pipeline's tests share: a scheduler with one worker, options, a
// budget, the call context of a request, and a small slice request.
#ifndef TENSOROP_TESTS_SERVER_PIPELINE_PIPELINE_FIXTURE_H_
#define TENSOROP_TESTS_SERVER_PIPELINE_PIPELINE_FIXTURE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "tests/support/set_ints.h"

namespace tensorop::server {

// int32 values, little-endian like the wire.
inline std::string Int32Bytes(std::initializer_list<int32_t> values) {
  std::string bytes;
  for (int32_t value : values) {
    char word[4];
    std::memcpy(word, &value, sizeof(word));
    bytes.append(word, sizeof(word));
  }
  return bytes;
}

// input[0:2, 1:3] of [[0 1 2] [3 4 5]]: [[1 2] [4 5]].
inline v1::RunRequest TwoByThreeSliceRequest() {
  v1::RunRequest request;
  request.set_id("slice-1");
  request.set_backend(v1::CPU);
  v1::SliceAttrs* slice = request.mutable_slice();
  ::tensorop::testing::SetInts(slice->mutable_offsets(), {0, 1});
  ::tensorop::testing::SetInts(slice->mutable_window_sizes(), {2, 2});
  ::tensorop::testing::SetInts(slice->mutable_window_strides(), {1, 1});
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::INT32);
  ::tensorop::testing::SetInts(input.mutable_sizes(), {2, 3});
  input.set_data(Int32Bytes({0, 1, 2, 3, 4, 5}));
  ::tensorop::testing::SetInts(request.add_outputs()->mutable_sizes(), {2, 2});
  return request;
}

inline const StopCheck kNeverStop = NeverStop;

class PipelineTest : public ::testing::Test {
 protected:
  // Runs `work` on a scheduler worker (where the CPU kernels expect to run)
  // and waits for it.
  absl::Status OnWorker(std::function<absl::Status()> work) {
    std::promise<absl::Status> done;
    const absl::Status submitted = scheduler_.Submit(Placement{}, [&] { done.set_value(work()); });
    if (!submitted.ok()) return submitted;
    return done.get_future().get();
  }

  // AnswerWithReceivedBytes of a run parsed by ParseReceivedRunIfLight; the
  // plan it leaves in `planned` when given.
  absl::StatusOr<std::optional<OutputBuffers>> AnswerWithItsBytes(
      ReceivedRun& run, Placement& placement, MemoryBudget::Reservation& reservation,
      std::unique_ptr<PlannedRun>* planned = nullptr) {
    std::unique_ptr<PlannedRun> dropped;
    CallContext call = Call(run.request, placement, reservation);
    call.uploaded = &run.uploaded;
    call.received = &run.received;
    return AnswerWithReceivedBytes(call, {.too_big_hint = "hint"},
                                   planned != nullptr ? *planned : dropped);
  }

  // The call of `request` through the pipeline under test, stopped by `stop`
  // (which outlives the call).
  CallContext Call(const v1::RunRequest& request, Placement& placement,
                   MemoryBudget::Reservation& reservation, const StopCheck& stop = kNeverStop) {
    return CallContext{.request = request,
                       .options = options_,
                       .scheduler = scheduler_,
                       .placement = placement,
                       .stop = stop,
                       .reservation = reservation};
  }

  Placement CpuPlacement() {
    absl::StatusOr<Placement> placement = scheduler_.Place(v1::CPU, std::nullopt);
    EXPECT_TRUE(placement.ok()) << placement.status();
    return *placement;
  }

  ServiceOptions options_;
  // Held by pointer: ~Scheduler may throw (its task group's destructor), and
  // a fixture's destructor may not.
  std::unique_ptr<Scheduler> scheduler_holder_ =
      std::make_unique<Scheduler>(SchedulerOptions{.worker_threads = 1});
  Scheduler& scheduler_ = *scheduler_holder_;
  MemoryBudget budget_{int64_t{1} << 30};
};

}  // namespace tensorop::server

#endif  // TENSOROP_TESTS_SERVER_PIPELINE_PIPELINE_FIXTURE_H_
