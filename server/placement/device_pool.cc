#include "server/placement/device_pool.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace tensorop::server {

DevicePool::DevicePool(std::vector<std::unique_ptr<opencl_backend::Device>> devices,
                       const DevicePoolOptions& options)
    : options_(options),
      devices_(std::move(devices)),
      states_(new State[devices_.size()]),
      injected_left_(options.inject_failures) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    states_[i].queue = std::make_unique<DeviceQueue>(
        options_.queue_depth,
        absl::StrCat("OpenCL device ", i, " (", Name(static_cast<int>(i)), ")"), options_.max_wait);
    states_[i].max_resident_bytes = options_.max_resident_bytes >= 0
                                        ? options_.max_resident_bytes
                                        : devices_[i]->global_memory_bytes() / 10 * 7;
  }
  if (!devices_.empty()) sweeper_ = std::thread([this] { SweepLoop(); });
}

DevicePool::~DevicePool() {
  CancelWaiters(absl::CancelledError("the server is shutting down"));
  if (sweeper_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(sweep_mutex_);
      stopping_ = true;
    }
    sweep_wake_.notify_all();
    sweeper_.join();
  }
}

std::string DevicePool::Label(int index) const {
  return absl::StrCat("opencl:", devices_[index]->name());
}

bool DevicePool::HealthyLocked(size_t index, std::chrono::steady_clock::time_point now) const {
  return now >= states_[index].unhealthy_until;
}

absl::StatusOr<int> DevicePool::ChooseLocked(int index) const {
  const auto now = std::chrono::steady_clock::now();
  if (index >= 0) {
    if (static_cast<size_t>(index) >= devices_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_index = ", index, " is outside [0, ", devices_.size(), ")"));
    }
    if (!HealthyLocked(index, now)) {
      return absl::UnavailableError(
          absl::StrCat("OpenCL device ", index, " (", Name(index), ") is unhealthy"));
    }
    return index;
  }
  int chosen = -1;
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (!HealthyLocked(i, now)) continue;
    if (chosen < 0 || states_[i].queue->in_flight() < states_[chosen].queue->in_flight()) {
      chosen = static_cast<int>(i);
    }
  }
  if (chosen < 0) return absl::UnavailableError("no OpenCL device is healthy");
  return chosen;
}

absl::StatusOr<int> DevicePool::Choose(int index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ChooseLocked(index);
}

absl::StatusOr<int> DevicePool::Acquire(int index) {
  std::lock_guard<std::mutex> lock(mutex_);
  ASSIGN_OR_RETURN(const int chosen, ChooseLocked(index));
  if (!states_[chosen].queue->TryAcquire()) {
    return absl::ResourceExhaustedError(absl::StrCat("OpenCL device ", chosen, " (", Name(chosen),
                                                     ") has ", options_.queue_depth,
                                                     " requests queued (--opencl_queue_depth)"));
  }
  return chosen;
}

void DevicePool::Release(int index) { states_[index].queue->Release(); }

void DevicePool::Wait(int index, StopCheck stop, WaitDone done) {
  int chosen = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (index >= 0) {
      if (static_cast<size_t>(index) >= devices_.size()) {
        done(absl::InvalidArgumentError(
            absl::StrCat("device_index = ", index, " is outside [0, ", devices_.size(), ")")));
        return;
      }
      if (HealthyLocked(index, now)) chosen = index;
    } else {
      // The healthy device with the least work, counting its waiters.
      int best_load = 0;
      for (size_t i = 0; i < devices_.size(); ++i) {
        if (!HealthyLocked(i, now)) continue;
        const int load = states_[i].queue->in_flight() + states_[i].queue->waiting();
        if (chosen < 0 || load < best_load) {
          chosen = static_cast<int>(i);
          best_load = load;
        }
      }
    }
  }
  if (chosen < 0) {
    done(absl::UnavailableError(
        index >= 0 ? absl::StrCat("OpenCL device ", index, " (", Name(index), ") is unhealthy")
                   : std::string("no OpenCL device is healthy")));
    return;
  }
  states_[chosen].queue->Wait(std::move(stop),
                              [chosen, done = std::move(done)](absl::Status status) {
                                if (status.ok()) {
                                  done(chosen);
                                } else {
                                  done(std::move(status));
                                }
                              });
  {
    std::lock_guard<std::mutex> lock(sweep_mutex_);
    sweep_pending_ = true;
  }
  sweep_wake_.notify_one();
}

void DevicePool::CancelWaiters(const absl::Status& status) {
  for (size_t i = 0; i < devices_.size(); ++i) states_[i].queue->CancelAll(status);
}

void DevicePool::SweepLoop() {
  std::unique_lock<std::mutex> lock(sweep_mutex_);
  while (!stopping_) {
    sweep_pending_ = false;
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> next;
    for (size_t i = 0; i < devices_.size(); ++i) {
      std::optional<std::chrono::steady_clock::time_point> expires = states_[i].queue->Sweep(now);
      if (expires.has_value() && (!next.has_value() || *expires < *next)) next = expires;
    }
    lock.lock();
    if (stopping_ || sweep_pending_) continue;
    if (!next.has_value()) {
      // Nobody waits: sleep until a wait begins.
      sweep_wake_.wait(lock, [this] { return stopping_ || sweep_pending_; });
      continue;
    }
    // Someone waits: look again at its expiry or after stop_poll.
    sweep_wake_.wait_until(lock, std::min(*next, now + options_.stop_poll),
                           [this] { return stopping_; });
  }
}

absl::Status DevicePool::Execute(int index, const ExecutionPlan& plan,
                                 std::span<const std::span<const std::byte>> inputs,
                                 std::span<std::byte* const> outputs, const StopCheck& stop) {
  return ExecuteResident(index, plan, {.inputs = inputs, .outputs = outputs}, stop);
}

absl::Status DevicePool::ExecuteResident(int index, const ExecutionPlan& plan,
                                         const opencl_backend::DeviceIo& io,
                                         const StopCheck& stop) {
  if (injected_left_.load(std::memory_order_relaxed) > 0 && injected_left_.fetch_sub(1) > 0) {
    return absl::UnavailableError(
        absl::StrCat("OpenCL device ", index, " failed: injected (--inject_opencl_failures)"));
  }
  return devices_[index]->ExecuteResident(plan, io, stop);
}

absl::StatusOr<std::unique_ptr<DeviceResident>> DevicePool::AllocateResident(
    int index, int64_t bytes, bool zero, absl::string_view what) {
  if (index < 0 || index >= static_cast<int>(devices_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("device_index is ", index, "; the server has ",
                                                   devices_.size(), " OpenCL devices"));
  }
  State& state = states_[index];
  const int64_t held = state.resident_bytes.fetch_add(bytes, std::memory_order_relaxed);
  auto unreserve = [&state, bytes] {
    state.resident_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  };
  if (held + bytes > state.max_resident_bytes) {
    unreserve();
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": ", bytes, " bytes more on OpenCL device ", index,
                     " would pass its limit of ", state.max_resident_bytes,
                     " resident bytes (--opencl_max_resident_bytes; ", held, " held)"));
  }
  absl::StatusOr<std::unique_ptr<opencl_backend::ResidentBuffer>> buffer =
      devices_[index]->AllocateResident(bytes, zero);
  if (!buffer.ok()) {
    unreserve();
    if (buffer.status().code() == absl::StatusCode::kResourceExhausted) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": OpenCL device ", index, ": ", buffer.status().message()));
    }
    return buffer.status();
  }
  return std::make_unique<DeviceResident>(*std::move(buffer), std::move(unreserve));
}

absl::Status DevicePool::WriteResident(int index, const DeviceResident& resident,
                                       std::span<const std::byte> host, const StopCheck& stop) {
  return devices_[index]->WriteResident(resident.buffer(), host, stop);
}

absl::Status DevicePool::ReadResident(int index, const DeviceResident& resident,
                                      int64_t byte_offset, std::span<std::byte> host,
                                      const StopCheck& stop) {
  return devices_[index]->ReadResident(resident.buffer(), byte_offset, host, stop);
}

void DevicePool::MarkFailed(int index) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  states_[index].failures.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[index].unhealthy_until = std::chrono::steady_clock::now() + options_.unhealthy_for;
  }
  if (failure_listener_) failure_listener_(index);
}

bool DevicePool::Healthy(int index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return HealthyLocked(static_cast<size_t>(index), std::chrono::steady_clock::now());
}

bool DevicePool::AnyHealthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (HealthyLocked(i, now)) return true;
  }
  return false;
}

int DevicePool::in_flight(int index) const { return states_[index].queue->in_flight(); }

int DevicePool::waiting(int index) const { return states_[index].queue->waiting(); }

WaitHistogram DevicePool::wait_histogram(int index) const {
  return states_[index].queue->wait_histogram();
}

int64_t DevicePool::failures(int index) const {
  return states_[index].failures.load(std::memory_order_relaxed);
}

}  // namespace tensorop::server
