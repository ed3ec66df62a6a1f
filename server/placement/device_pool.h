// The OpenCL device pool: which devices are healthy, how loaded each is, and a
// bounded queue per device with a FIFO of requests waiting for a slot
// (server/placement/device_queue.h). Failures mark a device unhealthy for a while.
#ifndef TENSOROP_SERVER_PLACEMENT_DEVICE_POOL_H_
#define TENSOROP_SERVER_PLACEMENT_DEVICE_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"
#include "kernels/opencl/device.h"
#include "server/placement/device_queue.h"

namespace tensorop::server {

struct DevicePoolOptions {
  // Requests queued or running per device; past it a device takes no more.
  int queue_depth = 8;
  // How long a failed device is left alone before it is tried again.
  std::chrono::milliseconds unhealthy_for{30'000};
  // Testing aid: the first N executions fail as a device would (UNAVAILABLE),
  // to exercise the fallback to the CPU in a real server.
  int inject_failures = 0;
  // How long an OPENCL request waits for a slot of a busy device before it
  // ends DEADLINE_EXCEEDED (--opencl_max_wait_seconds; 0: it does not wait).
  std::chrono::milliseconds max_wait{30'000};
  // How often waiting requests are asked whether they should stop (deadline,
  // cancel): a cancelled waiter leaves its FIFO within about this long.
  std::chrono::milliseconds stop_poll{10};
  // Bytes of tensors that stay on each device (handles) at most
  // (--opencl_max_resident_bytes); < 0: 70% of each device's global memory.
  int64_t max_resident_bytes = -1;
};

// A tensor's buffer on one device of the pool, its bytes reserved in the
// device's resident limit until it is freed.
class DeviceResident {
 public:
  DeviceResident(std::unique_ptr<opencl_backend::ResidentBuffer> buffer,
                 std::function<void()> unreserve)
      : buffer_(std::move(buffer)), unreserve_(std::move(unreserve)) {}
  ~DeviceResident() {
    buffer_.reset();
    unreserve_();
  }
  DeviceResident(const DeviceResident&) = delete;
  DeviceResident& operator=(const DeviceResident&) = delete;
  const opencl_backend::ResidentBuffer& buffer() const { return *buffer_; }

 private:
  std::unique_ptr<opencl_backend::ResidentBuffer> buffer_;
  std::function<void()> unreserve_;
};

class DevicePool {
 public:
  DevicePool(std::vector<std::unique_ptr<opencl_backend::Device>> devices,
             const DevicePoolOptions& options);
  // Ends the waits still pending (CANCELLED) and stops the sweeping thread.
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  size_t size() const { return devices_.size(); }
  // "opencl:<device name>", what responses report.
  std::string Label(int index) const;
  const std::string& Name(int index) const { return devices_[index]->name(); }

  // Takes a queue slot on device `index`, or on the healthy device with the
  // fewest requests when `index` < 0. UNAVAILABLE when no (such) device is
  // healthy, RESOURCE_EXHAUSTED when its queue is full. Release() gives it back.
  // Never waits; waiters keep their turn (a full queue or one with waiters is
  // RESOURCE_EXHAUSTED here).
  absl::StatusOr<int> Acquire(int index);
  void Release(int index);
  // The device Acquire would take, without taking a slot: `index` when it is
  // healthy, else (< 0) the healthy device with the fewest requests.
  absl::StatusOr<int> Choose(int index) const;

  // Acquire that waits: takes a slot on device `index` (< 0: the healthy
  // device with the fewest requests running and waiting), at once or when one
  // frees, and tells `done` which device (exactly once, possibly on this
  // thread before Wait returns, else on the thread that freed the slot or
  // swept the FIFO). Errors: as Acquire's, but never RESOURCE_EXHAUSTED for a
  // full queue; DEADLINE_EXCEEDED past options' max_wait; `stop`'s status when
  // it says stop while waiting (asked every stop_poll); CANCELLED when the
  // pool is destroyed first. UNAVAILABLE (no healthy device) is the CPU's to
  // answer, so a wait never ends with it. `stop` must stay callable until `done` runs.
  using WaitDone = std::function<void(absl::StatusOr<int>)>;
  void Wait(int index, StopCheck stop, WaitDone done);

  // Ends every pending wait with `status` (server shutdown).
  void CancelWaiters(const absl::Status& status);

  // Runs `plan` on device `index` (which the caller acquired).
  absl::Status Execute(int index, const ExecutionPlan& plan,
                       std::span<const std::span<const std::byte>> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop);

  // Execute with resident inputs read in place and resident outputs written
  // in place, as `io` says (opencl_backend::DeviceIo).
  absl::Status ExecuteResident(int index, const ExecutionPlan& plan,
                               const opencl_backend::DeviceIo& io, const StopCheck& stop);

  // A buffer on device `index` for a `bytes`-byte tensor that stays there,
  // reserved first in the device's resident limit. RESOURCE_EXHAUSTED naming
  // --opencl_max_resident_bytes, or the device's own limit, and `what`;
  // INVALID_ARGUMENT for an index outside the pool. An allocation that fails
  // is not a device failure.
  absl::StatusOr<std::unique_ptr<DeviceResident>> AllocateResident(int index, int64_t bytes,
                                                                   bool zero,
                                                                   absl::string_view what);
  absl::Status WriteResident(int index, const DeviceResident& resident,
                             std::span<const std::byte> host, const StopCheck& stop);
  // `host.size()` bytes of `resident` from its byte `byte_offset` (a view's).
  absl::Status ReadResident(int index, const DeviceResident& resident, int64_t byte_offset,
                            std::span<std::byte> host, const StopCheck& stop);
  int64_t resident_bytes(int index) const {
    return states_[index].resident_bytes.load(std::memory_order_relaxed);
  }
  int64_t max_resident_bytes(int index) const { return states_[index].max_resident_bytes; }
  // Whether device `index` keeps its buffers in host memory
  // (opencl_backend::Device::host_memory): its handles count in the budget.
  bool HostMemory(int index) const { return devices_[index]->host_memory(); }

  // Called with a device's index each time it fails (MarkFailed): what lives
  // on it (handles) is lost. Set before the pool is shared.
  void SetFailureListener(std::function<void(int index)> listener) {
    failure_listener_ = std::move(listener);
  }

  // Records a device failure: counted, the device is skipped for a while,
  // and the failure listener learns it.
  void MarkFailed(int index);

  bool AnyHealthy() const;
  bool Healthy(int index) const;
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // Failures of device `index` (for its metrics series).
  int64_t failures(int index) const;
  int in_flight(int index) const;
  // Input bytes uploaded to device `index` by executions so far.
  int64_t uploaded_bytes(int index) const { return devices_[index]->uploaded_bytes(); }
  // Requests waiting for a slot of device `index`, and how long the finished
  // waits took (for tensorop_opencl_waiting and tensorop_opencl_wait_seconds).
  int waiting(int index) const;
  WaitHistogram wait_histogram(int index) const;

 private:
  struct State {
    std::unique_ptr<DeviceQueue> queue;
    std::atomic<int64_t> failures{0};
    std::chrono::steady_clock::time_point unhealthy_until{};
    std::atomic<int64_t> resident_bytes{0};
    int64_t max_resident_bytes = 0;
  };
  bool HealthyLocked(size_t index, std::chrono::steady_clock::time_point now) const;
  absl::StatusOr<int> ChooseLocked(int index) const;
  // Asks the waiters of every device whether their wait is over, until the
  // pool goes away: at least every stop_poll while any waits.
  void SweepLoop();

  const DevicePoolOptions options_;
  std::vector<std::unique_ptr<opencl_backend::Device>> devices_;
  std::unique_ptr<State[]> states_;
  mutable std::mutex mutex_;  // guards unhealthy_until and slot choices
  std::atomic<int64_t> failures_{0};
  std::atomic<int> injected_left_;
  std::function<void(int index)> failure_listener_;

  std::mutex sweep_mutex_;
  std::condition_variable sweep_wake_;
  bool sweep_pending_ = false;  // guarded by sweep_mutex_: a wait began
  bool stopping_ = false;       // guarded by sweep_mutex_
  std::thread sweeper_;         // started with the first device
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_DEVICE_POOL_H_
