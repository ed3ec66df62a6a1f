// How long-running work learns it should stop, without knowing about gRPC.
#ifndef TENSOROP_CORE_CANCELLATION_H_
#define TENSOROP_CORE_CANCELLATION_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"

namespace tensorop {

// Called between blocks of work: OK to go on, or the status to stop with
// (CANCELLED, DEADLINE_EXCEEDED). Must be cheap and thread-safe.
using StopCheck = std::function<absl::Status()>;

inline absl::Status NeverStop() { return absl::OkStatus(); }

// Inside a long loop (validating 2^32-1 indices, a scatter line of 2^32-1
// collisions), asks `stop` once every kStopEvery items, so no stretch of work
// between two checks takes more than a few milliseconds.
inline constexpr int64_t kStopEvery = int64_t{1} << 16;

class StopPoller {
 public:
  explicit StopPoller(const StopCheck& stop) : stop_(stop) {}
  // Counts `items` done; true when the work must end (status() says why).
  bool Tick(int64_t items = 1) {
    countdown_ -= items;
    if (countdown_ > 0) return false;
    countdown_ = kStopEvery;
    status_ = stop_();
    return !status_.ok();
  }
  const absl::Status& status() const { return status_; }

 private:
  const StopCheck& stop_;
  int64_t countdown_ = kStopEvery;
  absl::Status status_;
};

}  // namespace tensorop

#endif  // TENSOROP_CORE_CANCELLATION_H_
