// One OpenCL device's queue slots and the FIFO of requests waiting for one.
// A request that finds every slot taken joins the FIFO and is handed a slot
// when one frees (first come, first served), or leaves it when its wait ends:
// past --opencl_max_wait_seconds, or when its StopCheck says stop (deadline,
// client cancel, server shutdown). The waiter is a callback, not a blocked
// thread: the scheduler suspends its oneTBB task and resumes it from the
// callback (server/placement/scheduler.cc), so a waiting request holds no worker.
//
// No thread and no clock of its own: the caller passes `now` and calls Sweep()
// (DevicePool runs a thread for that), which keeps the FIFO testable without
// timing.
#ifndef TENSOROP_SERVER_PLACEMENT_DEVICE_QUEUE_H_
#define TENSOROP_SERVER_PLACEMENT_DEVICE_QUEUE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/cancellation.h"

namespace tensorop::server {

// Upper bounds of tensorop_opencl_wait_seconds' buckets, in microseconds
// (printed as seconds): from a slot freed at once to the longest wait the
// default --opencl_max_wait_seconds allows, and past it.
inline constexpr int64_t kWaitBucketsUs[] = {
    100, 1'000, 10'000, 100'000, 1'000'000, 5'000'000, 10'000'000, 30'000'000, 60'000'000};

// Wait times of the requests that left a FIFO (granted a slot or not): the
// count of each bucket (not cumulative; the last is +Inf) and their sum.
struct WaitHistogram {
  std::vector<uint64_t> buckets;
  uint64_t sum_us = 0;
};

class DeviceQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // Called exactly once, without any lock held: OK when the waiter now holds a
  // slot (it must Release() it), else the status its wait ended with. Must be
  // cheap (it runs on the thread that freed the slot or swept the FIFO).
  using Granted = std::function<void(absl::Status)>;

  // `depth` slots; `describe` names the device in messages ("OpenCL device 0
  // (pthread-cpu)"); waits end DEADLINE_EXCEEDED after `max_wait`.
  DeviceQueue(int depth, std::string describe, std::chrono::milliseconds max_wait);
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  // Takes a slot when one is free and nobody waits (waiters keep their turn).
  bool TryAcquire();

  // Takes a slot at once as TryAcquire would (calling `granted` with OK on
  // this thread), or joins the FIFO. `stop` is asked at every Sweep while it
  // waits; it must stay callable until `granted` runs.
  void Wait(StopCheck stop, Granted granted, Clock::time_point now = Clock::now());

  // Gives a slot back: the first waiter gets it (its `granted` runs here, with
  // OK), else it is free.
  void Release(Clock::time_point now = Clock::now());

  // Ends the waits that are over at `now`: past max_wait (DEADLINE_EXCEEDED
  // naming the wait and --opencl_max_wait_seconds) or stopped (its StopCheck's
  // status). Returns when the next wait would expire, if any waits.
  std::optional<Clock::time_point> Sweep(Clock::time_point now = Clock::now());

  // Ends every wait with `status` (server shutdown).
  void CancelAll(const absl::Status& status, Clock::time_point now = Clock::now());

  // Slots taken (requests running or handed a slot) and requests waiting.
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int waiting() const { return waiting_.load(std::memory_order_relaxed); }
  int depth() const { return depth_; }
  WaitHistogram wait_histogram() const;

 private:
  struct Waiter {
    StopCheck stop;
    Granted granted;
    Clock::time_point since;
    Clock::time_point expires;
  };
  void RecordWaitLocked(Clock::duration waited);
  absl::Status MaxWaitStatus() const;

  const int depth_;
  const std::string describe_;
  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mutex_;
  std::list<Waiter> fifo_;              // guarded by mutex_; front waits longest
  std::atomic<int> in_flight_{0};       // written under mutex_
  std::atomic<int> waiting_{0};         // written under mutex_
  std::vector<uint64_t> wait_buckets_;  // guarded by mutex_
  uint64_t wait_sum_us_ = 0;            // guarded by mutex_
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_DEVICE_QUEUE_H_
