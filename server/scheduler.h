// Where and when requests run. Today every request runs on oneTBB workers; the
// OpenCL device pool will plug in behind Place()/Submit()/Execute().
#ifndef TENSOROP_SERVER_SCHEDULER_H_
#define TENSOROP_SERVER_SCHEDULER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

enum class Device { kCpu, kOpenCl };

// Where one request runs.
struct Placement {
  Device device = Device::kCpu;
  // What responses report as `backend`: "cpu", later "opencl:<device>".
  std::string label = "cpu";
};

struct SchedulerOptions {
  int worker_threads = 1;
  // Requests queued or running at once; past it Submit refuses.
  int max_queued_requests = 256;
  // Where AUTO requests go (the --backend flag). AUTO here means "choose".
  v1::Backend default_backend = v1::AUTO;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);
  // Waits for every submitted task.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Where a request asking for `requested` (a v1::Backend wire value) runs.
  // UNAVAILABLE for OPENCL (no device pool yet), INVALID_ARGUMENT for a value
  // that names no backend.
  absl::StatusOr<Placement> Place(int requested) const;

  // Queues `task` to run once on a worker of `placement`'s device and returns
  // at once, never blocking the caller (a gRPC reaction). RESOURCE_EXHAUSTED,
  // without queueing, when max_queued_requests are already queued or running.
  absl::Status Submit(const Placement& placement, std::function<void()> task);

  // Runs `plan` on `placement`'s device. Call from inside a submitted task: the
  // CPU kernels' parallel loops use the task's arena.
  absl::Status Execute(const Placement& placement, const ExecutionPlan& plan,
                       std::span<const std::byte* const> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop);

  // Blocks until every task submitted so far has finished. Used at shutdown,
  // after the gRPC server stopped handing out new work.
  void Wait();

  // Tasks queued or running now.
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  const SchedulerOptions options_;
  // Present when --worker_threads asks for more threads than TBB allows by
  // default (the hardware concurrency).
  std::unique_ptr<tbb::global_control> parallelism_;
  tbb::task_arena arena_;
  tbb::task_group group_;
  std::atomic<int> in_flight_{0};
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SCHEDULER_H_
