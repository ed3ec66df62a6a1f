// Where and when requests run: every request is planned on a worker thread,
// then executed there or on a device of the OpenCL pool, with one retry on the
// CPU when a device fails. Requests that may wait for a device slot run as
// oneTBB tasks, which suspend while they wait; the rest run on threads that
// sleep as soon as there is no work (server/placement/thread_pool.h says why).
#ifndef TENSOROP_SERVER_PLACEMENT_SCHEDULER_H_
#define TENSOROP_SERVER_PLACEMENT_SCHEDULER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"
#include "server/placement/cost_model.h"
#include "server/placement/device_pool.h"
#include "server/placement/thread_pool.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

enum class Device { kCpu, kOpenCl, kAuto };

// Where one request runs. Execute() settles kAuto and fallbacks, and leaves in
// `label` where the request really ran.
struct Placement {
  Device device = Device::kCpu;
  // kOpenCl: the pool index asked for (once run there: the one it ran on); -1: any.
  int device_index = -1;
  // What responses report as `backend`: "cpu" or "opencl:<device>".
  std::string label = "cpu";
  // kAuto: the cost model in force when the request was placed, so that the
  // memory reserved for it (MayRunOnDevice) and where it runs (Execute) agree
  // even if the calibration ends in between. Null: AUTO runs on the CPU.
  std::shared_ptr<const CostModel> cost_model = nullptr;
};

struct SchedulerOptions {
  int worker_threads = 1;
  // Requests queued or running at once; past it Submit refuses.
  int max_queued_requests = 256;
  // Where AUTO requests go (the --backend flag). AUTO here means "choose".
  v1::Backend default_backend = v1::AUTO;
  // The OpenCL devices; null or empty: the CPU only. Not owned.
  DevicePool* devices = nullptr;
  // --auto_opencl_min_bytes: when set, AUTO sends a request to a device when
  // it moves at least this many output bytes, instead of asking the cost model
  // (SetCostModel). Unset and without a model, AUTO runs on the CPU.
  std::optional<int64_t> auto_opencl_min_bytes = std::nullopt;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);
  // Waits for every submitted task.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Where a request asking for `requested` (a v1::Backend wire value) and
  // optionally one device runs. FAILED_PRECONDITION for OPENCL without devices,
  // INVALID_ARGUMENT for a value that names no backend or device.
  absl::StatusOr<Placement> Place(int requested, std::optional<int> device_index) const;

  // Queues `task`, the work of a request placed at `placement`, to run once on
  // a worker, and returns at once, never blocking the caller (a gRPC
  // reaction). CPU and AUTO requests, which take a device only if it has room
  // at once, go to the sleeping threads; OPENCL requests to oneTBB, as
  // Submit(task). RESOURCE_EXHAUSTED, without queueing, when
  // max_queued_requests are already queued or running.
  absl::Status Submit(const Placement& placement, std::function<void()> task);
  // The same for a task that may wait for a device slot whatever its
  // placement (ExecuteOnDevice), or is not placed yet: a oneTBB task.
  absl::Status Submit(std::function<void()> task);
  // Runs `task` on the calling thread, counted in flight like a queued task
  // (RESOURCE_EXHAUSTED past max_queued_requests; Wait() sees it): for work
  // smaller than the hand-off to a worker and back.
  absl::Status RunHere(const std::function<void()>& task);

  // Runs `plan` where `placement` says, settling AUTO by the plan's size and
  // the devices' health; a device failure marks the device unhealthy and the
  // plan runs again on the CPU. `placement.label` tells where it ran. CPU work
  // up to tbb_backend::kSerialBytes runs on the calling thread; larger work's
  // parallel loops run in the arena (as a task of it, the caller waiting, when
  // the caller is not one of its workers).
  // OPENCL on a busy device waits for a slot in the device's FIFO with its task
  // suspended (the worker takes other tasks meanwhile), until a slot frees, the
  // pool's max wait passes (DEADLINE_EXCEEDED) or `stop` says stop; called
  // from outside a submitted task, the calling thread waits instead.
  absl::Status Execute(Placement& placement, const ExecutionPlan& plan,
                       std::span<const std::span<const std::byte>> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop);

  // Runs `plan` on OpenCL device `index` and nowhere else (its inputs or
  // outputs stay there: no CPU fallback) with its bytes where `io` says,
  // waiting for a slot as OPENCL does. A device failure marks the device
  // failed (taking its handles with it) and is returned (UNAVAILABLE). Call
  // from inside a submitted task.
  absl::Status ExecuteOnDevice(int index, Placement& placement, const ExecutionPlan& plan,
                               const opencl_backend::DeviceIo& io, const StopCheck& stop);

  // Whether Execute may run `plan` on a device (OPENCL; AUTO at or above the
  // threshold, or predicted faster on an idle device by the placement's cost
  // model), so its device buffers count against the memory budget.
  bool MayRunOnDevice(const Placement& placement, const ExecutionPlan& plan) const;

  // AUTO's cost model from now on (the calibration's figures). Requests
  // placed before keep the model they were placed with.
  void SetCostModel(CostModel model);
  // The model in force, or null before the calibration ended.
  std::shared_ptr<const CostModel> cost_model() const;

  // Blocks until every task submitted so far has finished. Used at shutdown,
  // after the gRPC server stopped handing out new work.
  void Wait();

  // Whether a task waiting for a device slot lets go of its worker (true), or
  // holds it until the slot is free: sanitizer builds hold it, as they cannot
  // follow oneTBB's suspended stacks (server/placement/scheduler.cc).
  static bool SuspendsWaitingTasks();

  // Tasks queued or running now.
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  // Counts a task in, or says why not.
  absl::Status Admit();
  absl::Status RunOnCpu(Placement& placement, const ExecutionPlan& plan,
                        std::span<const std::span<const std::byte>> inputs,
                        std::span<std::byte* const> outputs, const StopCheck& stop);
  // A slot on device `index` (< 0: any) for an OPENCL request: at once, or
  // after waiting in the device's FIFO without holding a worker.
  absl::StatusOr<int> AcquireDevice(int index, const StopCheck& stop);
  absl::Status RunOnDevice(int index, Placement& placement, const ExecutionPlan& plan,
                           std::span<const std::span<const std::byte>> inputs,
                           std::span<std::byte* const> outputs, const StopCheck& stop);
  // AUTO by the cost model: a queue slot on the device predicted fastest, if
  // it beats the CPU and has room now (never waits); nullopt: the CPU.
  std::optional<int> AcquireForAuto(const Placement& placement, const ExecutionPlan& plan);

  const SchedulerOptions options_;
  mutable std::mutex model_mutex_;  // guards model_
  std::shared_ptr<const CostModel> model_;
  // Present when --worker_threads asks for more threads than TBB allows by
  // default (the hardware concurrency).
  std::unique_ptr<tbb::global_control> parallelism_;
  tbb::task_arena arena_;
  tbb::task_group group_;
  std::atomic<int> in_flight_{0};
  // Last: its threads may run tasks that use everything above.
  ThreadPool sleeping_workers_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_SCHEDULER_H_
