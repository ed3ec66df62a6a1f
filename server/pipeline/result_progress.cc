#include "server/pipeline/result_progress.h"

#include <limits>
#include <utility>

namespace tensorop::server {

void ResultProgress::Advance(size_t output, int64_t ready_bytes) {
  bool resume = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    output_ = output;
    ready_ = ready_bytes;
    resume = std::exchange(waiting_, false);
  }
  if (resume) resume_();
}

void ResultProgress::Finish(absl::Status status) {
  bool resume = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    if (!abandoned_) status_ = std::move(status);
    resume = std::exchange(waiting_, false);
  }
  if (resume) resume_();
}

bool ResultProgress::abandoned() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abandoned_;
}

bool ResultProgress::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

absl::StatusOr<bool> ResultProgress::Await(size_t output, int64_t end) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) {
    if (!status_.ok()) return status_;
    return true;
  }
  if (output < output_ || (output == output_ && end <= ready_)) return true;
  waiting_ = true;
  return false;
}

absl::StatusOr<bool> ResultProgress::AwaitEnd() {
  // No output is ever that far: true only once the work ended.
  return Await(std::numeric_limits<size_t>::max(), 0);
}

bool ResultProgress::Abandon(absl::Status why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return false;
  abandoned_ = true;
  status_ = std::move(why);
  waiting_ = true;
  return true;
}

}  // namespace tensorop::server
