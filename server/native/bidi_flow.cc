#include "server/native/bidi_flow.h"

namespace tensorop::server {

// Every event after the finish is ignored (T20): the reactor may be gone.

BidiFlow::Steps BidiFlow::Start() { return Next(Steps{}); }

void BidiFlow::RequestRead() {
  if (finished_) return;
  ++pending_;
}

BidiFlow::Steps BidiFlow::ReadDone(bool ok) {
  if (finished_) return Steps{};
  read_outstanding_ = false;
  if (!ok) reads_done_ = true;
  return Next(Steps{});
}

BidiFlow::Steps BidiFlow::BadMessage(const absl::Status& status) {
  if (finished_) return Steps{};
  read_outstanding_ = false;
  reads_done_ = true;
  end_status_ = status;
  return Next(Steps{});
}

BidiFlow::Steps BidiFlow::AnswerReady(bool serialized) {
  if (finished_) return Steps{};
  Steps steps;
  --pending_;
  if (!broken_ && serialized) {
    ++queued_;
    steps.enqueue_answer = true;
  }
  return Next(steps);
}

BidiFlow::Steps BidiFlow::WriteDone(bool ok) {
  if (finished_) return Steps{};
  Steps steps;
  writing_ = false;
  if (!ok) {
    // The client is gone: answers still to come are dropped.
    broken_ = true;
    queued_ = 0;
    steps.drop_queued = true;
  }
  return Next(steps);
}

BidiFlow::Steps BidiFlow::Next(Steps steps) {
  if (finished_) return steps;                 // N0
  if (!writing_ && !broken_ && queued_ > 0) {  // N1
    writing_ = true;
    --queued_;
    steps.start_write = true;
  }
  const int in_flight = pending_ + queued_ + (writing_ ? 1 : 0);
  if (!reads_done_ && !read_outstanding_ && !broken_ && in_flight < window_) {  // N2
    read_outstanding_ = true;
    steps.start_read = true;
  }
  // N3. A paused read (no read outstanding) does not hold up a broken stream.
  const bool reading_over = reads_done_ || (broken_ && !read_outstanding_);
  if (reading_over && pending_ == 0 && !writing_ && queued_ == 0) {
    finished_ = true;
    if (!end_status_.ok()) {
      steps.finish = FinishKind::kBadMessage;
      steps.end_status = end_status_;
    } else if (broken_) {
      steps.finish = FinishKind::kWriteFailed;
    } else {
      steps.finish = FinishKind::kOk;
    }
  }
  return steps;
}

BidiFlow::State BidiFlow::state() const {
  if (finished_) return State::kFinished;
  if (broken_) return State::kBroken;
  if (reads_done_) return State::kDraining;
  if (read_outstanding_) return State::kReading;
  return State::kPaused;
}

}  // namespace tensorop::server
