// The writing half of a call whose result streams (RunStream, RunChunked,
// Fetch): one part in flight at a time, the next started from the write's
// completion or, while a worker still computes the result, by the worker once
// the bytes it waits for are final (ResultProgress).
#ifndef TENSOROP_SERVER_NATIVE_RESULT_WRITER_H_
#define TENSOROP_SERVER_NATIVE_RESULT_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/result_progress.h"

namespace tensorop::server {

class ResultWriter {
 public:
  // `write` starts a write of a part (the reactor's StartWrite, its idle
  // watch armed); `end` finishes the call: OK with the result's bytes, or
  // the error. The parts' buffers give their bytes back themselves, once
  // gRPC sent them.
  ResultWriter(std::function<void(const grpc::ByteBuffer*)> write,
               std::function<void(const absl::Status&, int64_t bytes_out)> end)
      : write_(std::move(write)), end_(std::move(end)) {}

  // For the worker: the result may go out while it is computed (pipeline.h);
  // once `started`, the writer runs and the worker owes progress->Finish.
  StreamWhileComputing Streaming(int64_t band_bytes) {
    auto progress = std::make_shared<ResultProgress>([this] { WriteNext(); });
    return {.start =
                [this, progress](ResultParts parts) {
                  parts_.emplace(std::move(parts));
                  progress_ = progress;
                  WriteNext();
                },
            .progress = progress,
            .band_bytes = band_bytes};
  }

  // A result computed whole: written from here.
  void Start(ResultParts parts) {
    parts_.emplace(std::move(parts));
    WriteNext();
  }

  // Writes the next part, waits for its bytes, or ends the call.
  void WriteNext() {
    const absl::StatusOr<ResultParts::Step> step = parts_->SerializeNext(&buffer_);
    if (!step.ok()) {
      Fail(step.status());
      return;
    }
    switch (*step) {
      case ResultParts::Step::kPart:
        write_(&buffer_);
        return;
      case ResultParts::Step::kWait:
        return;
      case ResultParts::Step::kEnd:
        end_(absl::OkStatus(), parts_->total_bytes());
        return;
    }
  }

  // Ends the call with `status` (a write failed), or, while a worker still
  // computes the result, once that ends: the worker then drives WriteNext,
  // whose next part is `status`.
  void Fail(const absl::Status& status) {
    if (progress_ != nullptr && progress_->Abandon(status)) return;
    end_(status, 0);
  }

 private:
  const std::function<void(const grpc::ByteBuffer*)> write_;
  const std::function<void(const absl::Status&, int64_t)> end_;
  std::optional<ResultParts> parts_;
  grpc::ByteBuffer buffer_;
  // A result streaming while a worker computes it; null otherwise.
  std::shared_ptr<ResultProgress> progress_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_NATIVE_RESULT_WRITER_H_
