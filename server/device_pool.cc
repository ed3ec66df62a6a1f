#include "server/device_pool.h"

#include "absl/strings/str_cat.h"

namespace tensorop::server {

DevicePool::DevicePool(std::vector<std::unique_ptr<opencl_backend::Device>> devices,
                       const DevicePoolOptions& options)
    : options_(options),
      devices_(std::move(devices)),
      states_(new State[devices_.size()]),
      injected_left_(options.inject_failures) {}

std::string DevicePool::Label(int index) const {
  return absl::StrCat("opencl:", devices_[index]->name());
}

bool DevicePool::HealthyLocked(size_t index,
                               std::chrono::steady_clock::time_point now) const {
  return now >= states_[index].unhealthy_until;
}

absl::StatusOr<int> DevicePool::Acquire(int index) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  int chosen = -1;
  if (index >= 0) {
    if (static_cast<size_t>(index) >= devices_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device_index = ", index, " is outside [0, ", devices_.size(), ")"));
    }
    if (!HealthyLocked(index, now)) {
      return absl::UnavailableError(
          absl::StrCat("OpenCL device ", index, " (", Name(index), ") is unhealthy"));
    }
    chosen = index;
  } else {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (!HealthyLocked(i, now)) continue;
      if (chosen < 0 || states_[i].in_flight.load() < states_[chosen].in_flight.load()) {
        chosen = static_cast<int>(i);
      }
    }
    if (chosen < 0) return absl::UnavailableError("no OpenCL device is healthy");
  }
  if (states_[chosen].in_flight.load() >= options_.queue_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("OpenCL device ", chosen, " (", Name(chosen), ") has ",
                     options_.queue_depth, " requests queued (--opencl_queue_depth)"));
  }
  states_[chosen].in_flight.fetch_add(1);
  return chosen;
}

void DevicePool::Release(int index) { states_[index].in_flight.fetch_sub(1); }

absl::Status DevicePool::Execute(int index, const ExecutionPlan& plan,
                                 std::span<const std::span<const std::byte>> inputs,
                                 std::span<std::byte* const> outputs, const StopCheck& stop) {
  if (injected_left_.load(std::memory_order_relaxed) > 0 &&
      injected_left_.fetch_sub(1) > 0) {
    return absl::UnavailableError(
        absl::StrCat("OpenCL device ", index, " failed: injected (--inject_opencl_failures)"));
  }
  return devices_[index]->Execute(plan, inputs, outputs, stop);
}

void DevicePool::MarkFailed(int index) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  states_[index].failures.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  states_[index].unhealthy_until = std::chrono::steady_clock::now() + options_.unhealthy_for;
}

bool DevicePool::AnyHealthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (HealthyLocked(i, now)) return true;
  }
  return false;
}

int DevicePool::in_flight(int index) const { return states_[index].in_flight.load(); }

int64_t DevicePool::failures(int index) const {
  return states_[index].failures.load(std::memory_order_relaxed);
}

}  // namespace tensorop::server
