// The request pipeline behind every front end (the tensorop.v1 reactors, v2
// through Engine, RunChain's steps): Execute(call, sink) plans a request,
// admits it (its answer within the message limit, its bytes within the
// memory budget), binds its outputs to the sink's buffers, and runs it on
// the scheduler. The call context and the sinks: call_context.h. No reactor
// and no gRPC call: tests/server/pipeline/pipeline_test.cc drives it with a Scheduler
// and a MemoryBudget alone.
#ifndef TENSOROP_SERVER_PIPELINE_PIPELINE_H_
#define TENSOROP_SERVER_PIPELINE_PIPELINE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
// SerializationTraits for protobuf messages.
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "core/guarded.h"
#include "core/operator.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/memory/zero_bytes.h"
#include "server/pipeline/call_context.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/plan.h"
#include "server/pipeline/response_writer.h"
#include "server/pipeline/result_progress.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// An answer's backend is known only once the request ran: device labels
// ("opencl:<device name>") are taken to be at most this long when the answer's
// size is checked against the message limit before running.
constexpr int64_t kMaxDeviceLabelBytes = 256;
// Room for one serialized ResultPart besides its chunk's bytes.
constexpr int64_t kPartOverheadBytes = 4 << 10;

// The device a request names, if any (proto3 `optional`).
std::optional<int> RequestedDevice(const v1::RunRequest& request);

// The bytes of every output buffer of `layouts`.
int64_t TotalBytes(const std::vector<Layout>& layouts);

// Executes the call's request with its outputs inline (IntoResponse).
absl::Status Execute(const CallContext& call, const IntoResponse& sink);

// Executes the call's request into output buffers that become its answer
// (IntoAnswerBuffers): what the answer takes besides them is only its other
// fields. With the call's `received` bytes, a request the CPU would run whose
// every output is a contiguous run of an input's bytes (whole rows, an outer
// Split) is answered with those bytes instead (OutputBuffers::forwarded).
absl::StatusOr<OutputBuffers> Execute(const CallContext& call, const IntoAnswerBuffers& sink);

// The answer Execute(call, IntoAnswerBuffers) would give with the bytes the
// call received, when it would: planning only, no kernel and no copy, so
// light enough for a reaction. nullopt, having reserved nothing, when an
// output needs a kernel or the request is placed on a device; then
// `planned` holds the request's plan when it was made, for Execute to run
// rather than plan again.
absl::StatusOr<std::optional<OutputBuffers>> AnswerWithReceivedBytes(
    const CallContext& call, const IntoAnswerBuffers& sink, std::unique_ptr<PlannedRun>& planned);

// The data bytes of `response`'s outputs.
int64_t ResponseDataBytes(const v1::RunResponse& response);

// Outputs held by the server while they stream back; each output's chunks go
// to gRPC as slices of its buffer (server/pipeline/response_writer.h).
struct Outputs {
  std::vector<Layout> layouts;
  std::vector<SharedOutput> buffers;  // null for a kept or forwarded output
  // A kept output's handle (OutputDesc.keep), by output; empty: none kept.
  std::vector<std::optional<v1::TensorHandle>> handles;
  // An output that is bytes of a received input: those bytes where gRPC
  // received them (OutputBuffers::forwarded), by output; empty: none.
  std::vector<std::vector<grpc::Slice>> forwarded;
};

// Executes the call's request into server-held buffers (IntoHeldBuffers).
absl::StatusOr<Outputs> Execute(const CallContext& call, const IntoHeldBuffers& sink);

// Serializes `message` into `buffer` for a raw write, replacing what the
// previous (completed) write left there.
template <typename Message>
void SerializeInto(const Message& message, grpc::ByteBuffer* buffer) {
  buffer->Clear();
  bool own_buffer = false;
  // Fails only past 2 GiB; every message here is bounded by
  // --max_message_bytes (answers) or --chunk_bytes (parts).
  grpc::SerializationTraits<Message>::Serialize(message, buffer, &own_buffer).IgnoreError();
}

// The parts of a streamed result, one at a time: per output its header, then
// its bytes in chunks of at most chunk_bytes. An output's buffer is freed once
// its last chunk was handed out. With a `progress`, the result is still being
// computed: a chunk waits until its bytes are final, the end until the work
// ended.
class ResultParts {
 public:
  ResultParts(Outputs outputs, std::string backend, int64_t chunk_bytes,
              std::shared_ptr<ResultProgress> progress = nullptr)
      : outputs_(std::move(outputs)),
        backend_(std::move(backend)),
        chunk_bytes_(chunk_bytes),
        progress_(std::move(progress)) {}

  // Fills `part` with the next part, or (a chunk) `chunk` with where its bytes
  // are; false after the last.
  struct Chunk {
    size_t output = 0;
    int64_t offset = 0;
    int64_t length = 0;  // 0: the part is a header
  };
  bool Next(v1::ResultPart* part, Chunk* chunk) {
    while (output_ < outputs_.layouts.size()) {
      const Layout& layout = outputs_.layouts[output_];
      if (offset_ < 0) {
        v1::OutputHeader* header = part->mutable_header();
        header->set_index(static_cast<int32_t>(output_));
        header->set_dtype(ToProtoDType(layout.dtype));
        header->mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
        header->mutable_strides()->Assign(layout.strides.begin(), layout.strides.end());
        header->set_byte_length(layout.buffer_bytes());
        header->set_backend(backend_);
        offset_ = 0;
        if (output_ < outputs_.handles.size() && outputs_.handles[output_].has_value()) {
          // Kept: the header carries its handle, and no chunks follow.
          *header->mutable_handle() = *outputs_.handles[output_];
          header->set_byte_length(0);
          offset_ = layout.buffer_bytes();
        }
        return true;
      }
      if (offset_ < layout.buffer_bytes()) {
        const int64_t length = std::min(chunk_bytes_, layout.buffer_bytes() - offset_);
        *chunk = Chunk{.output = output_, .offset = offset_, .length = length};
        offset_ += length;
        return true;
      }
      outputs_.buffers[output_].reset();  // its bytes go back once gRPC sent them
      // Forwarded bytes stay reserved (they are the request's) until the call ends.
      if (output_ < outputs_.forwarded.size()) outputs_.forwarded[output_].clear();
      ++output_;
      offset_ = -1;
    }
    return false;
  }

  int64_t total_bytes() const { return TotalBytes(outputs_.layouts); }

  // What SerializeNext did.
  enum class Step {
    kPart,  // serialized the next part
    kWait,  // its bytes are not final yet: the progress resumes the writer
    kEnd,   // there are no more parts
  };

  // Serializes the next part into `buffer`. Whatever throws ends as the
  // status (the reactors call this from reactions); so does the work's error.
  absl::StatusOr<Step> SerializeNext(grpc::ByteBuffer* buffer);

 private:
  Outputs outputs_;
  std::string backend_;
  int64_t chunk_bytes_;
  std::shared_ptr<ResultProgress> progress_;
  size_t output_ = 0;
  int64_t offset_ = -1;  // -1: the current output's header is next
  // The part Next produced, held while it waits for its bytes.
  bool has_next_ = false;
  bool next_more_ = false;
  v1::ResultPart next_part_;
  Chunk next_chunk_;
};

inline absl::StatusOr<ResultParts::Step> ResultParts::SerializeNext(grpc::ByteBuffer* buffer) {
  Step step = Step::kEnd;
  RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    if (!has_next_) {
      next_part_.Clear();
      next_chunk_ = Chunk();  // stays so for a header
      next_more_ = Next(&next_part_, &next_chunk_);
      has_next_ = true;
    }
    if (progress_ != nullptr) {
      // A header's layout is known up front; a chunk waits for its bytes, the
      // end for the work to end.
      absl::StatusOr<bool> ready = true;
      if (!next_more_) {
        ready = progress_->AwaitEnd();
      } else if (next_chunk_.length > 0) {
        ready = progress_->Await(next_chunk_.output, next_chunk_.offset + next_chunk_.length);
      }
      RETURN_IF_ERROR(ready.status());
      if (!*ready) {
        step = Step::kWait;
        return absl::OkStatus();
      }
    }
    has_next_ = false;
    if (!next_more_) return absl::OkStatus();
    step = Step::kPart;
    if (next_chunk_.length > 0 && next_chunk_.output < outputs_.forwarded.size() &&
        !outputs_.forwarded[next_chunk_.output].empty()) {
      // Bytes of the request: slices of the slices they were received in.
      SerializeChunkPart(outputs_.forwarded[next_chunk_.output], next_chunk_.offset,
                         next_chunk_.length, buffer);
    } else if (next_chunk_.length > 0) {
      // The chunk's bytes go out as a slice of the output: no copy.
      SerializeChunkPart(outputs_.buffers[next_chunk_.output], next_chunk_.offset,
                         next_chunk_.length, buffer);
    } else {
      SerializeInto(next_part_, buffer);
    }
    return absl::OkStatus();
  }));
  return step;
}

// Lets RunStream's result go out while it is computed: when the request runs
// on the CPU and its plan splits into bands that finish the outputs front to
// back (SplitIntoOutputBands, of band_bytes each), `start` takes the parts as
// soon as the outputs exist, and each band marks its bytes final in
// `progress`. The caller then owes progress->Finish(the work's status).
struct StreamWhileComputing {
  std::function<void(ResultParts)> start;
  std::shared_ptr<ResultProgress> progress;
  int64_t band_bytes = 0;
  bool started = false;  // set once `start` ran
};

// Executes the call's request into server-held buffers and cuts them into
// parts (IntoParts). With the call's `received` bytes an output that is a run
// of them is streamed from them, with no buffer, kernel or copy, as
// Execute(call, IntoAnswerBuffers) answers.
absl::StatusOr<ResultParts> Execute(const CallContext& call, const IntoParts& sink);

// The status to finish a stream with when a write failed: the call's deadline
// when `stop` (a CallStop) finds it near, else what `stop` says, else
// CANCELLED ("the client stopped receiving").
absl::Status WriteFailure(const StopCheck& stop);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_PIPELINE_H_
