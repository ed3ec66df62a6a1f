// The OpenCL device pool: which devices are healthy, how loaded each is, and a
// bounded queue per device. Failures mark a device unhealthy for a while.
#ifndef TENSOROP_SERVER_DEVICE_POOL_H_
#define TENSOROP_SERVER_DEVICE_POOL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"
#include "kernels/opencl/device.h"

namespace tensorop::server {

struct DevicePoolOptions {
  // Requests queued or running per device; past it a device takes no more.
  int queue_depth = 8;
  // How long a failed device is left alone before it is tried again.
  std::chrono::milliseconds unhealthy_for{30'000};
  // Testing aid: the first N executions fail as a device would (UNAVAILABLE),
  // to exercise the fallback to the CPU in a real server.
  int inject_failures = 0;
};

class DevicePool {
 public:
  DevicePool(std::vector<std::unique_ptr<opencl_backend::Device>> devices,
             const DevicePoolOptions& options);

  size_t size() const { return devices_.size(); }
  // "opencl:<device name>", what responses report.
  std::string Label(int index) const;
  const std::string& Name(int index) const { return devices_[index]->name(); }

  // Takes a queue slot on device `index`, or on the healthy device with the
  // fewest requests when `index` < 0. UNAVAILABLE when no (such) device is
  // healthy, RESOURCE_EXHAUSTED when its queue is full. Release() gives it back.
  absl::StatusOr<int> Acquire(int index);
  void Release(int index);

  // Runs `plan` on device `index` (which the caller acquired).
  absl::Status Execute(int index, const ExecutionPlan& plan,
                       std::span<const std::span<const std::byte>> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop);

  // Records a device failure: counted, and the device is skipped for a while.
  void MarkFailed(int index);

  bool AnyHealthy() const;
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // Failures of device `index` (for its metrics series).
  int64_t failures(int index) const;
  int in_flight(int index) const;

 private:
  struct State {
    std::atomic<int> in_flight{0};
    std::atomic<int64_t> failures{0};
    std::chrono::steady_clock::time_point unhealthy_until{};
  };
  bool HealthyLocked(size_t index, std::chrono::steady_clock::time_point now) const;

  const DevicePoolOptions options_;
  std::vector<std::unique_ptr<opencl_backend::Device>> devices_;
  std::unique_ptr<State[]> states_;
  mutable std::mutex mutex_;  // guards unhealthy_until and slot choices
  std::atomic<int64_t> failures_{0};
  std::atomic<int> injected_left_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_DEVICE_POOL_H_
