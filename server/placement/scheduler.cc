#include "server/placement/scheduler.h"

#include <cstring>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include <oneapi/tbb/task.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/sanitizers.h"
#include "core/status_macros.h"
#include "core/tsan_annotations.h"
#include "kernels/tbb/execute.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {
namespace {

std::unique_ptr<tbb::global_control> RaiseParallelism(int worker_threads) {
  // The arena's threads come from TBB's global pool, which by default has one
  // thread less than the hardware concurrency (it counts a caller thread). We
  // never join the arena from a caller, so ask for one more.
  const size_t wanted = static_cast<size_t>(worker_threads) + 1;
  if (tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism) >= wanted) {
    return nullptr;
  }
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               wanted);
}

// `f` as the arena runs it. Debian's libtbb is not built with TSan, so the
// hand-off of an enqueued task to a worker is invisible to it; this says that
// edge (core/tsan_annotations.h) on the task's own address: oneTBB moves the
// functor into the task's storage once, on the submitting thread, and the
// worker calls it there. No-ops in other builds.
template <typename F>
class HandOff {
 public:
  explicit HandOff(F f) : f_(std::move(f)) {}
  HandOff(HandOff&& other) : f_(std::move(other.f_)) { TsanRelease(this); }
  void operator()() const {
    TsanAcquire(this);
    f_();
  }

 private:
  mutable F f_;  // oneTBB calls its functor const; ours moves its task out to run it
};

// The sanitizers cannot follow oneTBB's switch of stacks when a task is
// suspended (Debian's libtbb is not instrumented: TSan's shadow call stack
// would end on another thread, ASan's stack bookkeeping misses the switch;
// oneTBB itself uses threads instead of coroutines when built with them):
// their builds hold the worker while waiting.
#if defined(TENSOROP_ASAN_ENABLED) || defined(TENSOROP_TSAN_ENABLED)
#define TENSOROP_SCHEDULER_SANITIZED 1
#endif
#ifdef TENSOROP_SCHEDULER_SANITIZED
constexpr bool kSuspendToWait = false;
#else
constexpr bool kSuspendToWait = true;
#endif

// The scheduler whose submitted task this thread is running, if any: only
// such a task may suspend itself to wait for a device slot.
thread_local const Scheduler* running_task_of = nullptr;

// Marks the running task's scheduler for its duration. A task resumed after a
// wait ends on whichever worker took it up, which was then between tasks, as
// the thread that started it was: restoring the saved value keeps both right.
class RunningTask {
 public:
  explicit RunningTask(const Scheduler* scheduler) : saved_(running_task_of) {
    running_task_of = scheduler;
  }
  ~RunningTask() { running_task_of = saved_; }
  RunningTask(const RunningTask&) = delete;
  RunningTask& operator=(const RunningTask&) = delete;

 private:
  const Scheduler* const saved_;
};

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options),
      parallelism_(RaiseParallelism(options.worker_threads)),
      // No slot is reserved for callers: work only enters through enqueue().
      arena_(options.worker_threads, /*reserved_for_masters=*/0),
      sleeping_workers_(options.worker_threads) {}

Scheduler::~Scheduler() { Wait(); }

absl::StatusOr<Placement> Scheduler::Place(int requested, std::optional<int> device_index) const {
  if (!v1::Backend_IsValid(requested)) {
    return absl::InvalidArgumentError(absl::StrCat("backend: ", requested, " is not a backend"));
  }
  v1::Backend backend = static_cast<v1::Backend>(requested);
  if (device_index.has_value() && backend != v1::OPENCL) {
    return absl::InvalidArgumentError(absl::StrCat("device_index = ", *device_index,
                                                   " needs backend OPENCL, not ",
                                                   v1::Backend_Name(backend)));
  }
  if (backend == v1::AUTO) backend = options_.default_backend;
  const size_t device_count = options_.devices == nullptr ? 0 : options_.devices->size();
  switch (backend) {
    case v1::AUTO:
      if (device_count == 0) return Placement{.device = Device::kCpu};
      return Placement{
          .device = Device::kAuto,
          .cost_model = options_.auto_opencl_min_bytes.has_value() ? nullptr : cost_model()};
    case v1::CPU:
      return Placement{.device = Device::kCpu};
    case v1::OPENCL:
      if (device_count == 0) {
        return absl::FailedPreconditionError(
            "backend OPENCL: no OpenCL device is enabled on this server");
      }
      if (device_index.has_value() &&
          (*device_index < 0 || static_cast<size_t>(*device_index) >= device_count)) {
        return absl::InvalidArgumentError(
            absl::StrCat("device_index = ", *device_index, " is outside [0, ", device_count, ")"));
      }
      return Placement{
          .device = Device::kOpenCl, .device_index = device_index.value_or(-1), .label = "opencl"};
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("backend: ", requested, " is not a backend"));
}

bool Scheduler::SuspendsWaitingTasks() { return kSuspendToWait; }

absl::Status Scheduler::Admit() {
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= options_.max_queued_requests) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(
        absl::StrCat("server busy: ", options_.max_queued_requests,
                     " requests are queued or running (--max_queued_requests); retry later"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(const Placement& placement, std::function<void()> task) {
  if (placement.device == Device::kOpenCl) return Submit(std::move(task));
  RETURN_IF_ERROR(Admit());
  sleeping_workers_.Run([this, task = std::move(task)]() mutable {
    {
      std::function<void()> run = std::move(task);  // its captures die here, as below
      run();
    }
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  });
  return absl::OkStatus();
}

absl::Status Scheduler::RunHere(const std::function<void()>& task) {
  RETURN_IF_ERROR(Admit());
  absl::Cleanup done = [this] { in_flight_.fetch_sub(1, std::memory_order_relaxed); };
  task();
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(std::function<void()> task) {
  RETURN_IF_ERROR(Admit());
  // arena.execute([&]{ group.run(f); }) would block this thread whenever every
  // arena slot is taken; enqueueing a deferred task of the group never blocks,
  // and the group still lets Wait() see every task.
  arena_.enqueue(group_.defer(HandOff([this, task = std::move(task)]() mutable {
    {
      RunningTask running(this);
      // Moved out so that the task's captures are destroyed here, inside the
      // task and before the release below, not later in oneTBB's clean-up.
      std::function<void()> run = std::move(task);
      run();
    }
    TsanRelease(&group_);  // TSan only: every task's end happens before Wait()
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
  })));
  return absl::OkStatus();
}

absl::Status Scheduler::RunOnCpu(Placement& placement, const ExecutionPlan& plan,
                                 std::span<const std::span<const std::byte>> inputs,
                                 std::span<std::byte* const> outputs, const StopCheck& stop) {
  placement.device = Device::kCpu;
  placement.label = "cpu";
  std::vector<const std::byte*> pointers;
  pointers.reserve(inputs.size());
  for (std::span<const std::byte> input : inputs) pointers.push_back(input.data());
  // Small work needs no other thread, and then a sleeping worker's request
  // leaves oneTBB's threads asleep.
  if (running_task_of == this || tbb_backend::RunsOnCallingThread(plan)) {
    return tbb_backend::Execute(plan, pointers, outputs, stop);
  }
  // Not on a oneTBB worker: the parallel loops run as a task of the arena
  // while this thread waits. (Joining the arena with execute() would work as
  // well, but TSan cannot follow oneTBB's hand-offs from a thread outside it.)
  std::promise<absl::Status> done;
  arena_.enqueue(HandOff([&] {
    absl::Status status = tbb_backend::Execute(plan, pointers, outputs, stop);
    TsanRelease(&done);  // TSan only: the loops' end happens before the wait ends
    done.set_value(std::move(status));
  }));
  absl::Status status = done.get_future().get();
  TsanAcquire(&done);
  return status;
}

absl::Status Scheduler::RunOnDevice(int index, Placement& placement, const ExecutionPlan& plan,
                                    std::span<const std::span<const std::byte>> inputs,
                                    std::span<std::byte* const> outputs, const StopCheck& stop) {
  DevicePool& devices = *options_.devices;
  placement.device = Device::kOpenCl;
  placement.device_index = index;
  placement.label = devices.Label(index);
  absl::Status status = devices.Execute(index, plan, inputs, outputs, stop);
  devices.Release(index);
  // UNAVAILABLE is the device's fault (cl_error.h): mark it, say so, and answer
  // from the CPU. Cancellation and deadlines pass through as they are.
  if (status.code() != absl::StatusCode::kUnavailable) return status;
  devices.MarkFailed(index);
  LogDeviceFailure(placement.label, status);
  for (size_t i = 0; i < outputs.size(); ++i) {  // a failed download may have written
    std::memset(outputs[i], 0, static_cast<size_t>(plan.outputs[i].buffer_bytes()));
  }
  return RunOnCpu(placement, plan, inputs, outputs, stop);
}

absl::Status Scheduler::ExecuteOnDevice(int index, Placement& placement, const ExecutionPlan& plan,
                                        const opencl_backend::DeviceIo& io, const StopCheck& stop) {
  if (options_.devices == nullptr || index < 0 ||
      index >= static_cast<int>(options_.devices->size())) {
    return absl::FailedPreconditionError(absl::StrCat("OpenCL device ", index, " does not exist"));
  }
  DevicePool& devices = *options_.devices;
  ASSIGN_OR_RETURN(const int slot, AcquireDevice(index, stop));
  placement.device = Device::kOpenCl;
  placement.device_index = slot;
  placement.label = devices.Label(slot);
  absl::Status status = devices.ExecuteResident(slot, plan, io, stop);
  devices.Release(slot);
  if (status.code() == absl::StatusCode::kUnavailable) {
    devices.MarkFailed(slot);
    LogDeviceFailure(placement.label, status);
  }
  return status;
}

absl::Status Scheduler::Execute(Placement& placement, const ExecutionPlan& plan,
                                std::span<const std::span<const std::byte>> inputs,
                                std::span<std::byte* const> outputs, const StopCheck& stop) {
  switch (placement.device) {
    case Device::kCpu:
      break;
    case Device::kAuto: {
      if (!options_.auto_opencl_min_bytes.has_value()) {
        std::optional<int> index = AcquireForAuto(placement, plan);
        if (!index.has_value()) break;
        return RunOnDevice(*index, placement, plan, inputs, outputs, stop);
      }
      // --auto_opencl_min_bytes: small work stays on the CPU; large work takes
      // the least-loaded healthy device with room, else the CPU.
      if (plan.bytes_moved < *options_.auto_opencl_min_bytes) break;
      absl::StatusOr<int> index = options_.devices->Acquire(-1);
      if (!index.ok()) break;
      return RunOnDevice(*index, placement, plan, inputs, outputs, stop);
    }
    case Device::kOpenCl: {
      absl::StatusOr<int> index = AcquireDevice(placement.device_index, stop);
      // No healthy device: the CPU answers, as after a failure. A wait that
      // ended (max wait, deadline, cancel) or a bad index is the caller's to see.
      if (!index.ok() && index.status().code() != absl::StatusCode::kUnavailable) {
        return index.status();
      }
      if (!index.ok()) break;
      return RunOnDevice(*index, placement, plan, inputs, outputs, stop);
    }
  }
  return RunOnCpu(placement, plan, inputs, outputs, stop);
}

absl::StatusOr<int> Scheduler::AcquireDevice(int index, const StopCheck& stop) {
  DevicePool& devices = *options_.devices;
  absl::StatusOr<int> slot = devices.Acquire(index);
  if (slot.ok() || slot.status().code() != absl::StatusCode::kResourceExhausted) return slot;
  // The device is busy: wait for a slot in its FIFO.
  absl::StatusOr<int> granted = absl::InternalError("the wait for an OpenCL slot never ended");
  if (kSuspendToWait && running_task_of == this) {
    // Suspend this task: its worker goes on with other tasks, and oneTBB
    // enqueues the task again once resumed, when the FIFO hands it a slot or
    // its wait ends. The callback runs after the switch, so an immediate
    // resume is safe.
    tbb::task::suspend([&](tbb::task::suspend_point tag) {
      try {
        devices.Wait(index, stop, [&granted, tag](absl::StatusOr<int> result) {
          granted = std::move(result);
          TsanRelease(&granted);  // TSan only: oneTBB's resume is not instrumented
          tbb::task::resume(tag);
        });
      } catch (...) {
        // Only allocating can throw, before the FIFO holds the waiter: nothing
        // else will resume this task.
        granted = absl::ResourceExhaustedError("out of memory queueing for an OpenCL device");
        tbb::task::resume(tag);
      }
    });
    TsanAcquire(&granted);
  } else {
    // Not one of our tasks (a caller of Execute outside Submit): this thread
    // waits. The promise is shared so that setting it never races its end.
    auto result = std::make_shared<std::promise<absl::StatusOr<int>>>();
    std::future<absl::StatusOr<int>> ready = result->get_future();
    devices.Wait(index, stop,
                 [result](absl::StatusOr<int> outcome) { result->set_value(std::move(outcome)); });
    granted = ready.get();
  }
  if (granted.ok() && !devices.Healthy(*granted)) {
    // The device failed while this request waited: the CPU answers, as when
    // no device is healthy.
    const int failed = *granted;
    devices.Release(failed);
    return absl::UnavailableError(
        absl::StrCat("OpenCL device ", failed, " (", devices.Name(failed), ") is unhealthy"));
  }
  return granted;
}

bool Scheduler::MayRunOnDevice(const Placement& placement, const ExecutionPlan& plan) const {
  if (placement.device == Device::kOpenCl) return true;
  if (placement.device != Device::kAuto) return false;
  if (options_.auto_opencl_min_bytes.has_value()) {
    return plan.bytes_moved >= *options_.auto_opencl_min_bytes;
  }
  // Idle devices: load only makes a device slower, so Execute never picks a
  // device this did not.
  return placement.cost_model != nullptr &&
         !FasterThanCpu(*placement.cost_model, FootprintOf(plan), {}).empty();
}

std::optional<int> Scheduler::AcquireForAuto(const Placement& placement,
                                             const ExecutionPlan& plan) {
  if (placement.cost_model == nullptr) return std::nullopt;  // not calibrated (yet)
  DevicePool& devices = *options_.devices;
  std::vector<DeviceLoad> loads(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    loads[i].in_flight = devices.in_flight(static_cast<int>(i));
  }
  // Fastest first; a device that is unhealthy or full now is passed over
  // (Acquire never waits), and the CPU answers when none is left. The
  // footprint is MayRunOnDevice's (a valid plan reads inside its inputs), so
  // no device is taken that the memory reservation did not count.
  for (int index : FasterThanCpu(*placement.cost_model, FootprintOf(plan), loads)) {
    if (absl::StatusOr<int> acquired = devices.Acquire(index); acquired.ok()) return *acquired;
  }
  return std::nullopt;
}

void Scheduler::SetCostModel(CostModel model) {
  auto shared = std::make_shared<const CostModel>(std::move(model));
  std::lock_guard<std::mutex> lock(model_mutex_);
  model_ = std::move(shared);
}

std::shared_ptr<const CostModel> Scheduler::cost_model() const {
  std::lock_guard<std::mutex> lock(model_mutex_);
  return model_;
}

void Scheduler::Wait() {
  // Again while a task of one kind submitted one of the other.
  do {
    sleeping_workers_.Wait();
    arena_.execute([this] { group_.wait(); });
    TsanAcquire(&group_);
  } while (in_flight() != 0);
}

}  // namespace tensorop::server
