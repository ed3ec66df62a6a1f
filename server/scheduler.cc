#include "server/scheduler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/tbb/execute.h"

namespace tensorop::server {
namespace {

std::unique_ptr<tbb::global_control> RaiseParallelism(int worker_threads) {
  // The arena's threads come from TBB's global pool, which by default has one
  // thread less than the hardware concurrency (it counts a caller thread). We
  // never join the arena from a caller, so ask for one more.
  const size_t wanted = static_cast<size_t>(worker_threads) + 1;
  if (tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism) >=
      wanted) {
    return nullptr;
  }
  return std::make_unique<tbb::global_control>(
      tbb::global_control::max_allowed_parallelism, wanted);
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options),
      parallelism_(RaiseParallelism(options.worker_threads)),
      // No slot is reserved for callers: work only enters through enqueue().
      arena_(options.worker_threads, /*reserved_for_masters=*/0) {}

Scheduler::~Scheduler() { Wait(); }

absl::StatusOr<Placement> Scheduler::Place(int requested) const {
  if (!v1::Backend_IsValid(requested)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend: ", requested, " is not a backend"));
  }
  v1::Backend backend = static_cast<v1::Backend>(requested);
  if (backend == v1::AUTO) backend = options_.default_backend;
  switch (backend) {
    case v1::AUTO:  // the server chooses: the CPU, until there are devices
    case v1::CPU:
      return Placement{.device = Device::kCpu, .label = "cpu"};
    case v1::OPENCL:
      return absl::UnavailableError(
          "backend OPENCL: no OpenCL device is enabled on this server");
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend: ", requested, " is not a backend"));
}

absl::Status Scheduler::Submit(const Placement& placement, std::function<void()> task) {
  if (placement.device != Device::kCpu) {
    return absl::UnavailableError("backend OPENCL: no OpenCL device is enabled on this server");
  }
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= options_.max_queued_requests) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrCat(
        "server busy: ", options_.max_queued_requests,
        " requests are queued or running (--max_queued_requests); retry later"));
  }
  // arena.execute([&]{ group.run(f); }) would block this thread whenever every
  // arena slot is taken; enqueueing a deferred task of the group never blocks,
  // and the group still lets Wait() see every task.
  arena_.enqueue(group_.defer([this, task = std::move(task)] {
    task();
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }));
  return absl::OkStatus();
}

absl::Status Scheduler::Execute(const Placement& placement, const ExecutionPlan& plan,
                                std::span<const std::byte* const> inputs,
                                std::span<std::byte* const> outputs,
                                const StopCheck& stop) {
  switch (placement.device) {
    case Device::kCpu:
      return tbb_backend::Execute(plan, inputs, outputs, stop);
    case Device::kOpenCl:
      break;
  }
  return absl::UnavailableError("backend OPENCL: no OpenCL device is enabled on this server");
}

void Scheduler::Wait() {
  arena_.execute([this] { group_.wait(); });
}

}  // namespace tensorop::server
