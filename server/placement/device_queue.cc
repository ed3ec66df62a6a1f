#include "server/placement/device_queue.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

constexpr size_t kWaitBuckets = std::size(kWaitBucketsUs) + 1;  // and +Inf

// Runs the callbacks of waiters that left the FIFO, after the lock is dropped:
// a callback resumes a task, which may at once take the lock again.
void Notify(std::vector<std::pair<DeviceQueue::Granted, absl::Status>>& finished) {
  for (auto& [granted, status] : finished) granted(std::move(status));
}

}  // namespace

DeviceQueue::DeviceQueue(int depth, std::string describe, std::chrono::milliseconds max_wait)
    : depth_(depth),
      describe_(std::move(describe)),
      max_wait_(max_wait),
      wait_buckets_(kWaitBuckets, 0) {}

bool DeviceQueue::TryAcquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fifo_.empty() || in_flight_.load(std::memory_order_relaxed) >= depth_) return false;
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DeviceQueue::Wait(StopCheck stop, Granted granted, Clock::time_point now) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fifo_.empty() && in_flight_.load(std::memory_order_relaxed) < depth_) {
      in_flight_.fetch_add(1, std::memory_order_relaxed);
    } else if (max_wait_.count() <= 0) {
      // --opencl_max_wait_seconds=0: a busy device is not waited for.
      RecordWaitLocked(Clock::duration::zero());
      status = MaxWaitStatus();
    } else {
      fifo_.push_back(Waiter{.stop = std::move(stop),
                             .granted = std::move(granted),
                             .since = now,
                             .expires = now + max_wait_});
      waiting_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  granted(std::move(status));
}

void DeviceQueue::Release(Clock::time_point now) {
  Granted next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fifo_.empty()) {
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    // The slot passes to the first waiter: in_flight stays as it is.
    next = std::move(fifo_.front().granted);
    RecordWaitLocked(now - fifo_.front().since);
    fifo_.pop_front();
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  next(absl::OkStatus());
}

std::optional<DeviceQueue::Clock::time_point> DeviceQueue::Sweep(Clock::time_point now) {
  std::vector<std::pair<Granted, absl::Status>> finished;
  std::optional<Clock::time_point> next;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = fifo_.begin(); it != fifo_.end();) {
      absl::Status status;
      if (now >= it->expires) {
        status = MaxWaitStatus();
      } else {
        // The request's own deadline or cancellation (StopCheck is cheap and
        // thread-safe).
        status = it->stop();
        if (!status.ok()) {
          status = absl::Status(
              status.code(),
              absl::StrCat(status.message(), " (while waiting for a slot on ", describe_, ")"));
        }
      }
      if (status.ok()) {
        if (!next.has_value() || it->expires < *next) next = it->expires;
        ++it;
        continue;
      }
      RecordWaitLocked(now - it->since);
      finished.emplace_back(std::move(it->granted), std::move(status));
      it = fifo_.erase(it);
      waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  Notify(finished);
  return next;
}

void DeviceQueue::CancelAll(const absl::Status& status, Clock::time_point now) {
  std::vector<std::pair<Granted, absl::Status>> finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Waiter& waiter : fifo_) {
      RecordWaitLocked(now - waiter.since);
      finished.emplace_back(std::move(waiter.granted), status);
    }
    fifo_.clear();
    waiting_.store(0, std::memory_order_relaxed);
  }
  Notify(finished);
}

WaitHistogram DeviceQueue::wait_histogram() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return WaitHistogram{.buckets = wait_buckets_, .sum_us = wait_sum_us_};
}

void DeviceQueue::RecordWaitLocked(Clock::duration waited) {
  const int64_t micros =
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::microseconds>(waited).count());
  const auto bound = std::lower_bound(std::begin(kWaitBucketsUs), std::end(kWaitBucketsUs), micros);
  ++wait_buckets_[static_cast<size_t>(bound - std::begin(kWaitBucketsUs))];
  wait_sum_us_ += static_cast<uint64_t>(micros);
}

absl::Status DeviceQueue::MaxWaitStatus() const {
  const double seconds = static_cast<double>(max_wait_.count()) / 1000.0;
  return absl::DeadlineExceededError(
      absl::StrCat("waited ", seconds, " s for a slot on ", describe_, ": its ", depth_,
                   " slots (--opencl_queue_depth) stayed busy for the longest wait allowed "
                   "(--opencl_max_wait_seconds=",
                   seconds, ")"));
}

}  // namespace tensorop::server
