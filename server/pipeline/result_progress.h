// How far a result that streams while it is computed has got: a worker runs
// the plan in bands (core/plan/output_bands.h) and marks bytes final; the
// call's writer sends a part only once its bytes are, and otherwise waits to
// be resumed. Exactly one side drives the writer at a time: the reactions
// that follow its writes, or the worker's `resume` after the writer waited.
#ifndef TENSOROP_SERVER_PIPELINE_RESULT_PROGRESS_H_
#define TENSOROP_SERVER_PIPELINE_RESULT_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tensorop::server {

class ResultProgress {
 public:
  // `resume` drives the writer again after Await said "not yet" or Abandon
  // deferred its end; it runs on the worker's thread, outside any lock.
  explicit ResultProgress(std::function<void()> resume) : resume_(std::move(resume)) {}

  // Worker: bytes [0, ready_bytes) of `output` and all of the outputs before
  // it are final.
  void Advance(size_t output, int64_t ready_bytes);
  // Worker, last: the work ended with `status` (OK: every byte is final).
  // The worker touches nothing of the call after this.
  void Finish(absl::Status status);
  // Worker, between bands: whether the writer gave up (stop computing).
  bool abandoned() const;

  // Writer: true when bytes [0, end) of `output` are final; false when not
  // yet: the writer must stop until `resume` runs. The work's error, or the
  // writer's own from Abandon, once the work ended with it.
  absl::StatusOr<bool> Await(size_t output, int64_t end);
  // Writer: true once the work ended (OK or not).
  absl::StatusOr<bool> AwaitEnd();
  // Writer: whether the work ended.
  bool ended() const;
  // Writer: it cannot go on (`why`). False when the work already ended: the
  // call may finish now. True: the worker still runs and will `resume` the
  // writer, whose next Await then returns `why`.
  bool Abandon(absl::Status why);

 private:
  const std::function<void()> resume_;
  mutable std::mutex mutex_;
  size_t output_ = 0;       // guarded by mutex_
  int64_t ready_ = 0;       // guarded by mutex_: bytes final in output_
  bool ended_ = false;      // guarded by mutex_
  bool waiting_ = false;    // guarded by mutex_: the writer stopped until resumed
  bool abandoned_ = false;  // guarded by mutex_
  absl::Status status_;     // guarded by mutex_: the work's, or the writer's reason
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_RESULT_PROGRESS_H_
