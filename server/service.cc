#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "core/checked_math.h"
#include "core/dtype.h"
#include "core/operator.h"
#include "core/status_macros.h"
#include "server/auth.h"
#include "server/convert.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/status_map.h"

namespace tensorop::server {
namespace {

// A client whose deadline passes cancels the call, and that cancellation can
// reach us a moment before our copy of the deadline passes (ours started when
// the headers arrived). A cancellation this close to the deadline is the
// deadline.
constexpr std::chrono::milliseconds kDeadlineSlack{100};

// DEADLINE_EXCEEDED once the call's deadline passed, CANCELLED once the client
// cancelled (gRPC marks a call cancelled at its deadline too, so the deadline
// is asked first). `context` must outlive every use: until the call finished.
StopCheck MakeStopCheck(grpc::CallbackServerContext* context) {
  const std::chrono::system_clock::time_point deadline = context->deadline();
  return [context, deadline]() -> absl::Status {
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) {
      return absl::DeadlineExceededError("deadline exceeded before the request finished");
    }
    if (context->IsCancelled()) {
      if (deadline - now <= kDeadlineSlack) {
        return absl::DeadlineExceededError("deadline exceeded before the request finished");
      }
      return absl::CancelledError("the client cancelled the call");
    }
    return absl::OkStatus();
  };
}

// The device a request names, if any (proto3 `optional`).
std::optional<int> RequestedDevice(const v1::RunRequest& request) {
  if (!request.has_device_index()) return std::nullopt;
  return request.device_index();
}

// A request's plan and its input bytes. Built in place and never moved: the plan
// may hold views of names inside `op`, whose views point into the request.
struct PlannedRun {
  OpRequest op;
  ExecutionPlan plan;
  std::vector<std::span<const std::byte>> inputs;  // by plan slot
};

absl::StatusOr<std::unique_ptr<PlannedRun>> Plan(const v1::RunRequest& request,
                                                 const Limits& limits, const StopCheck& stop) {
  auto run = std::make_unique<PlannedRun>();
  ASSIGN_OR_RETURN(run->op, ToOpRequest(request));
  ASSIGN_OR_RETURN(run->plan, PlanOperator(run->op, limits, stop));
  run->inputs.reserve(run->plan.input_names.size());
  for (absl::string_view name : run->plan.input_names) {
    auto found = std::find_if(run->op.inputs.begin(), run->op.inputs.end(),
                              [&](const NamedTensor& input) { return input.name == name; });
    if (found == run->op.inputs.end()) {
      return absl::InternalError(absl::StrCat("the plan reads input \"", name,
                                              "\", which the request does not have"));
    }
    run->inputs.push_back(found->tensor.data);
  }
  return run;
}

int64_t TotalBytes(const std::vector<Layout>& layouts) {
  int64_t total = 0;
  for (const Layout& layout : layouts) total += layout.buffer_bytes();
  return total;
}

// Plans `request`, asks `allocate(layout)` for each output's zeroed buffer, and
// executes into them. Outputs over `max_output_bytes` are RESOURCE_EXHAUSTED
// before anything is allocated.
template <typename Allocate>
absl::Status PlanAndExecute(const v1::RunRequest& request, const Limits& limits,
                            Scheduler& scheduler, Placement& placement,
                            const StopCheck& stop, int64_t max_output_bytes,
                            absl::string_view too_big_hint, Allocate allocate) {
  // Work that expired or was cancelled while queued is not started.
  RETURN_IF_ERROR(stop());
  ASSIGN_OR_RETURN(std::unique_ptr<PlannedRun> run, Plan(request, limits, stop));
  const int64_t output_bytes = TotalBytes(run->plan.outputs);
  if (output_bytes > max_output_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the outputs take ", output_bytes, " bytes, more than the server's message limit of ",
        max_output_bytes, " bytes (--max_message_bytes); ", too_big_hint));
  }
  std::vector<std::byte*> outputs;
  outputs.reserve(run->plan.outputs.size());
  for (const Layout& layout : run->plan.outputs) {
    ASSIGN_OR_RETURN(std::byte * output, allocate(layout));
    outputs.push_back(output);
  }
  return scheduler.Execute(placement, run->plan, run->inputs, outputs, stop);
}

// Runs `work`, turning an allocation failure into RESOURCE_EXHAUSTED: a task
// must never leave its call unfinished.
template <typename Work>
absl::Status Guarded(Work work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory for the request's outputs");
  }
}

// Executes `request` with its outputs inline in `response` (Run, RunBidi). On
// error `response` holds no outputs.
absl::Status ExecuteIntoResponse(const v1::RunRequest& request, const ServiceOptions& options,
                                 Scheduler& scheduler, Placement& placement,
                                 const StopCheck& stop, absl::string_view too_big_hint,
                                 v1::RunResponse* response) {
  absl::Status status = Guarded([&] {
    return PlanAndExecute(request, options.limits, scheduler, placement, stop,
                          options.max_message_bytes, too_big_hint,
                          [&](const Layout& layout) -> absl::StatusOr<std::byte*> {
                            v1::Tensor* tensor = response->add_outputs();
                            SetTensorLayout(layout, tensor);
                            // resize() zeroes: padding reads as zero.
                            std::string* data = tensor->mutable_data();
                            data->resize(static_cast<size_t>(layout.buffer_bytes()));
                            return reinterpret_cast<std::byte*>(data->data());
                          });
  });
  if (!status.ok()) response->clear_outputs();
  return status;
}

int64_t ResponseDataBytes(const v1::RunResponse& response) {
  int64_t total = 0;
  for (const v1::Tensor& tensor : response.outputs()) total += tensor.data().size();
  return total;
}

struct FreeDeleter {
  void operator()(std::byte* bytes) const { std::free(bytes); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

// Outputs held by the server while they stream back.
struct Outputs {
  std::vector<Layout> layouts;
  std::vector<Buffer> buffers;
};

// Executes `request` into server-held buffers (RunStream, RunChunked). Streamed
// results are not bounded by the message size, only by the request limits.
absl::StatusOr<Outputs> ExecuteIntoBuffers(const v1::RunRequest& request,
                                           const ServiceOptions& options,
                                           Scheduler& scheduler, Placement& placement,
                                           const StopCheck& stop) {
  Outputs outputs;
  absl::Status status = Guarded([&] {
    return PlanAndExecute(
        request, options.limits, scheduler, placement, stop,
        std::numeric_limits<int64_t>::max(), "",
        [&](const Layout& layout) -> absl::StatusOr<std::byte*> {
          // calloc: large blocks come zeroed from the kernel, untouched until
          // the copy writes them.
          const size_t bytes = static_cast<size_t>(std::max<int64_t>(layout.buffer_bytes(), 1));
          Buffer buffer(static_cast<std::byte*>(std::calloc(bytes, 1)));
          if (buffer == nullptr) {
            return absl::ResourceExhaustedError(
                absl::StrCat("out of memory for an output of ", layout.buffer_bytes(), " bytes"));
          }
          outputs.layouts.push_back(layout);
          outputs.buffers.push_back(std::move(buffer));
          return outputs.buffers.back().get();
        });
  });
  if (!status.ok()) return status;
  return outputs;
}

// The parts of a streamed result, one at a time: per output its header, then
// its bytes in chunks of at most chunk_bytes.
class ResultParts {
 public:
  ResultParts(Outputs outputs, std::string backend, int64_t chunk_bytes)
      : outputs_(std::move(outputs)), backend_(std::move(backend)), chunk_bytes_(chunk_bytes) {}

  // Fills `part` with the next part; false after the last.
  bool Next(v1::ResultPart* part) {
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
        return true;
      }
      if (offset_ < layout.buffer_bytes()) {
        const int64_t length = std::min(chunk_bytes_, layout.buffer_bytes() - offset_);
        part->set_chunk(reinterpret_cast<const char*>(outputs_.buffers[output_].get()) + offset_,
                        static_cast<size_t>(length));
        offset_ += length;
        return true;
      }
      ++output_;
      offset_ = -1;
    }
    return false;
  }

  int64_t total_bytes() const { return TotalBytes(outputs_.layouts); }

 private:
  Outputs outputs_;
  std::string backend_;
  int64_t chunk_bytes_;
  size_t output_ = 0;
  int64_t offset_ = -1;  // -1: the current output's header is next
};

// Executes `request` into server-held buffers and cuts them into parts
// (RunStream, RunChunked); `record` learns where it ran.
absl::StatusOr<ResultParts> ExecuteIntoParts(const v1::RunRequest& request,
                                             const ServiceOptions& options,
                                             Scheduler& scheduler, Placement& placement,
                                             const StopCheck& stop, CallRecord& record) {
  absl::StatusOr<Outputs> outputs =
      ExecuteIntoBuffers(request, options, scheduler, placement, stop);
  record.backend = placement.label;
  if (!outputs.ok()) return outputs.status();
  return ResultParts(*std::move(outputs), placement.label, options.chunk_bytes);
}

// The status to finish a stream with when a write failed.
absl::Status WriteFailure(const StopCheck& stop) {
  absl::Status status = stop();
  if (!status.ok()) return status;
  return absl::CancelledError("the client stopped receiving");
}

// The data bytes `tensor` declares (packed, or spanned by its strides), when
// that is computable; used only to size buffers ahead.
std::optional<int64_t> DeclaredBytes(const v1::Tensor& tensor) {
  std::optional<DType> dtype = DTypeFromInt(tensor.dtype());
  if (!dtype.has_value()) return std::nullopt;
  const bool packed = tensor.strides_size() == 0;
  if (!packed && tensor.strides_size() != tensor.sizes_size()) return std::nullopt;
  std::optional<int64_t> elements = 1;
  for (int i = 0; i < tensor.sizes_size() && elements.has_value(); ++i) {
    const int64_t size = tensor.sizes(i);
    if (size <= 0) return std::nullopt;
    if (packed) {
      elements = CheckedMul(*elements, size);
    } else {
      if (tensor.strides(i) < 0) return std::nullopt;
      std::optional<int64_t> span = CheckedMul(size - 1, tensor.strides(i));
      elements = span.has_value() ? CheckedAdd(*elements, *span) : std::nullopt;
    }
  }
  if (!elements.has_value()) return std::nullopt;
  return CheckedMul(*elements, ElementSize(*dtype));
}

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

}  // namespace

TensorOpService::TensorOpService(const ServiceOptions& options, Scheduler* scheduler)
    : options_(options), scheduler_(scheduler) {}

void TensorOpService::RecordOutcome(const CallRecord& record, const absl::Status& status) const {
  // One clock reading, so the log's latency and the histogram's agree.
  const absl::Time end = absl::Now();
  if (options_.metrics != nullptr) {
    options_.metrics->RecordCall(record, status.code(), end - record.start);
  }
  LogCall(record, status, end);
}

absl::Status TensorOpService::Dispatch(const v1::RunRequest& request, CallRecord& record,
                                       std::function<void(Placement&)> work) {
  absl::StatusOr<Placement> placement =
      scheduler_->Place(request.backend(), RequestedDevice(request));
  if (!placement.ok()) return placement.status();
  record.backend = placement->label;
  return scheduler_->Submit(*placement,
                            [work = std::move(work), placement = *placement]() mutable {
                              work(placement);
                            });
}

// ---------------------------------------------------------------------------
// Run

grpc::ServerUnaryReactor* TensorOpService::Run(grpc::CallbackServerContext* context,
                                               const v1::RunRequest* request,
                                               v1::RunResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallRecord record = DescribeRequest("Run", *request);
  record.identity = PeerIdentity(*context);
  absl::Status status = Dispatch(
      *request, record,
      [this, context, request, response, reactor, record](Placement& placement) mutable {
        const StopCheck stop = MakeStopCheck(context);
        absl::Status status =
            ExecuteIntoResponse(*request, options_, *scheduler_, placement, stop,
                                "use RunStream for large results", response);
        record.backend = placement.label;
        if (status.ok()) {
          response->set_id(request->id());
          response->set_backend(placement.label);
          record.bytes_out = ResponseDataBytes(*response);
        }
        RecordOutcome(record, status);
        reactor->Finish(ToGrpcStatus(status));
      });
  if (!status.ok()) {
    RecordOutcome(record, status);
    reactor->Finish(ToGrpcStatus(status));
  }
  return reactor;
}

// ---------------------------------------------------------------------------
// RunStream

class TensorOpService::StreamReactor final : public grpc::ServerWriteReactor<v1::ResultPart> {
 public:
  StreamReactor(TensorOpService* service, grpc::CallbackServerContext* context,
                const v1::RunRequest* request)
      : service_(service),
        request_(request),
        stop_(MakeStopCheck(context)),
        record_(DescribeRequest("RunStream", *request)) {
    record_.identity = PeerIdentity(*context);
    absl::Status status = service_->Dispatch(
        *request_, record_, [this](Placement& placement) { Work(placement); });
    if (!status.ok()) Done(status);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Done(WriteFailure(stop_));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // On a scheduler worker.
  void Work(Placement& placement) {
    absl::StatusOr<ResultParts> parts =
        ExecuteIntoParts(*request_, service_->options_, *service_->scheduler_, placement, stop_,
                         record_);
    if (!parts.ok()) {
      Done(parts.status());
      return;
    }
    parts_.emplace(*std::move(parts));
    WriteNext();
  }

  // One write in flight at a time: the next starts from OnWriteDone.
  void WriteNext() {
    part_.Clear();
    if (parts_->Next(&part_)) {
      StartWrite(&part_);
      return;
    }
    record_.bytes_out = parts_->total_bytes();
    Done(absl::OkStatus());
  }

  void Done(const absl::Status& status) {
    service_->RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const v1::RunRequest* const request_;  // owned by gRPC until OnDone
  const StopCheck stop_;
  CallRecord record_;
  std::optional<ResultParts> parts_;
  v1::ResultPart part_;
};

grpc::ServerWriteReactor<v1::ResultPart>* TensorOpService::RunStream(
    grpc::CallbackServerContext* context, const v1::RunRequest* request) {
  return new StreamReactor(this, context, request);
}

// ---------------------------------------------------------------------------
// RunBidi
//
// Every request read is submitted at once and the next read started; answers
// are queued as tasks finish and written one at a time. The stream finishes
// when the client half-closed (or sent bytes that do not parse, or went away)
// and every task has answered. Decisions are taken under mu_; the gRPC calls
// they lead to (StartRead, StartWrite, Finish) are made after releasing it,
// because gRPC may run a reaction inline inside them. Once a thread decided to
// Finish, no one touches the reactor again: OnDone may delete it at any time.

class TensorOpService::BidiReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BidiReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service), stop_(MakeStopCheck(context)), identity_(PeerIdentity(*context)) {
    read_outstanding_ = true;
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Step step;
      {
        std::lock_guard<std::mutex> lock(mu_);
        read_outstanding_ = false;
        reads_done_ = true;
        step = NextStepLocked();
      }
      Take(std::move(step));
      return;
    }
    ++messages_read_;
    auto request = std::make_shared<v1::RunRequest>();
    if (!grpc::SerializationTraits<v1::RunRequest>::Deserialize(&read_buffer_, request.get())
             .ok()) {
      const absl::Status status = absl::InvalidArgumentError(
          absl::StrCat("RunBidi: message ", messages_read_,
                       " is not a valid tensorop.v1.RunRequest; the stream ends here"));
      CallRecord record;
      record.method = "RunBidi";
      service_->RecordOutcome(record, status);
      Step step;
      {
        std::lock_guard<std::mutex> lock(mu_);
        read_outstanding_ = false;
        reads_done_ = true;
        end_status_ = status;
        step = NextStepLocked();
      }
      Take(std::move(step));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++pending_;  // answered exactly once, by Answer()
    }
    Submit(std::move(request));
    Step step;
    {
      // The read counts as outstanding until here, so no other thread can
      // finish (and free) the reactor while this reaction still runs.
      std::lock_guard<std::mutex> lock(mu_);
      read_outstanding_ = false;
      step = NextStepLocked();
    }
    Take(std::move(step));
  }

  void OnWriteDone(bool ok) override {
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        // The client is gone: answers still to come are dropped.
        broken_ = true;
        queue_.clear();
      }
      step = NextStepLocked();
    }
    Take(std::move(step));
  }

  void OnDone() override { delete this; }

 private:
  // Answers and reads kept in flight per stream; past it reading pauses until
  // the client takes answers (flow control instead of an unbounded queue).
  static constexpr int kWindow = 64;

  // What to do once mu_ is released.
  struct Step {
    bool read = false;
    std::optional<v1::RunResponse> write;
    std::optional<absl::Status> finish;
  };

  Step NextStepLocked() {
    Step step;
    if (finished_) return step;
    if (!writing_ && !broken_ && !queue_.empty()) {
      writing_ = true;
      step.write = std::move(queue_.front());
      queue_.pop_front();
    }
    const int in_flight = pending_ + static_cast<int>(queue_.size()) + (writing_ ? 1 : 0);
    if (!reads_done_ && !read_outstanding_ && !broken_ && in_flight < kWindow) {
      read_outstanding_ = true;
      step.read = true;
    }
    // A paused read (no read outstanding) does not hold up a broken stream.
    const bool reading_over = reads_done_ || (broken_ && !read_outstanding_);
    if (reading_over && pending_ == 0 && !writing_ && queue_.empty()) {
      finished_ = true;
      if (!end_status_.ok()) {
        step.finish = end_status_;
      } else if (broken_) {
        step.finish = WriteFailure(stop_);
      } else {
        step.finish = absl::OkStatus();
      }
    }
    return step;
  }

  void Take(Step step) {
    if (step.finish.has_value()) {
      Finish(ToGrpcStatus(*step.finish));
      return;  // `this` may be gone
    }
    if (step.write.has_value()) {
      // Only the thread that set writing_ touches write_buffer_.
      SerializeInto(*step.write, &write_buffer_);
      StartWrite(&write_buffer_);
    }
    if (step.read) StartRead(&read_buffer_);
  }

  void Submit(std::shared_ptr<v1::RunRequest> request) {
    CallRecord record = DescribeRequest("RunBidi", *request);
    record.identity = identity_;
    absl::Status status = service_->Dispatch(
        *request, record, [this, request, record](Placement& placement) mutable {
          v1::RunResponse response;
          absl::Status status = ExecuteIntoResponse(
              *request, service_->options_, *service_->scheduler_, placement, stop_,
              "use RunStream or RunChunked for large results", &response);
          record.backend = placement.label;
          if (status.ok()) response.set_backend(placement.label);
          Answer(*request, std::move(record), status, std::move(response));
        });
    if (!status.ok()) Answer(*request, std::move(record), status, v1::RunResponse());
  }

  // Queues the answer to `request`; from a worker, or from OnReadDone when the
  // request never reached one.
  void Answer(const v1::RunRequest& request, CallRecord record, const absl::Status& status,
              v1::RunResponse response) {
    response.set_id(request.id());
    response.mutable_status()->set_code(static_cast<int32_t>(ToGrpcCode(status.code())));
    response.mutable_status()->set_message(std::string(status.message()));
    if (status.ok()) record.bytes_out = ResponseDataBytes(response);
    service_->RecordOutcome(record, status);
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
      if (!broken_) queue_.push_back(std::move(response));
      step = NextStepLocked();
    }
    Take(std::move(step));
  }

  TensorOpService* const service_;
  const StopCheck stop_;
  const std::string identity_;  // who called, for every request's log line
  int64_t messages_read_ = 0;  // only touched by reactions, never concurrently
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;

  std::mutex mu_;
  bool read_outstanding_ = false;
  bool reads_done_ = false;
  int pending_ = 0;  // submitted requests not yet answered
  std::deque<v1::RunResponse> queue_;
  bool writing_ = false;
  bool broken_ = false;
  bool finished_ = false;
  absl::Status end_status_;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunBidi(
    grpc::CallbackServerContext* context) {
  return new BidiReactor(this, context);
}

// ---------------------------------------------------------------------------
// RunChunked

class TensorOpService::ChunkedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ChunkedReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service), stop_(MakeStopCheck(context)) {
    record_.method = "RunChunked";
    record_.identity = PeerIdentity(*context);
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      HalfClosed();
      return;
    }
    ++parts_read_;
    v1::RequestPart part;
    absl::Status status =
        grpc::SerializationTraits<v1::RequestPart>::Deserialize(&read_buffer_, &part).ok()
            ? Accept(part)
            : absl::InvalidArgumentError(absl::StrCat(
                  "RunChunked: part ", parts_read_, " is not a valid tensorop.v1.RequestPart"));
    if (!status.ok()) {
      Done(status);
      return;
    }
    StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Done(WriteFailure(stop_));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  // Takes one part in; a non-OK status ends the call with it.
  absl::Status Accept(v1::RequestPart& part) {
    if (!have_request_) {
      if (!part.has_request()) {
        return absl::InvalidArgumentError(
            "RunChunked: the first part must be a request, not a chunk");
      }
      request_ = std::move(*part.mutable_request());
      have_request_ = true;
      const absl::Time start = record_.start;
      const std::string identity = std::move(record_.identity);
      record_ = DescribeRequest("RunChunked", request_);
      record_.start = start;
      record_.identity = identity;
      for (const auto& [name, tensor] : request_.inputs()) {
        bytes_in_ += static_cast<int64_t>(tensor.data().size());
      }
      RETURN_IF_ERROR(CheckBytes());
      Reserve();
      return absl::OkStatus();
    }
    switch (part.part_case()) {
      case v1::RequestPart::kChunk: {
        const v1::InputChunk& chunk = part.chunk();
        auto input = request_.mutable_inputs()->find(chunk.input());
        if (input == request_.mutable_inputs()->end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "chunk.input: \"", chunk.input(), "\" is not an input of the request"));
        }
        bytes_in_ += static_cast<int64_t>(chunk.data().size());
        RETURN_IF_ERROR(CheckBytes());
        input->second.mutable_data()->append(chunk.data());
        return absl::OkStatus();
      }
      case v1::RequestPart::kRequest:
        return absl::InvalidArgumentError(absl::StrCat(
            "RunChunked: part ", parts_read_, " is a second request; only the first part is one"));
      case v1::RequestPart::PART_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("RunChunked: part ", parts_read_, " has neither a request nor a chunk"));
  }

  // Refused as soon as the uploaded bytes pass the limit, not after storing them.
  absl::Status CheckBytes() const {
    const int64_t limit = service_->options_.limits.max_request_bytes;
    if (bytes_in_ <= limit) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrCat("RunChunked: the inputs reached ", bytes_in_,
                     " bytes, more than the server's limit of ", limit,
                     " bytes (--max_request_bytes)"));
  }

  // Sizes each input's buffer for the bytes its description declares, so the
  // chunks append without reallocating. Within the request limit only: the
  // reservation is address space, pages are touched as chunks arrive.
  void Reserve() {
    int64_t total = 0;
    for (auto& [name, tensor] : *request_.mutable_inputs()) {
      std::optional<int64_t> bytes = DeclaredBytes(tensor);
      if (!bytes.has_value()) continue;
      std::optional<int64_t> sum = CheckedAdd(total, *bytes);
      if (!sum.has_value() || *sum > service_->options_.limits.max_request_bytes) return;
      total = *sum;
    }
    for (auto& [name, tensor] : *request_.mutable_inputs()) {
      if (std::optional<int64_t> bytes = DeclaredBytes(tensor)) {
        tensor.mutable_data()->reserve(static_cast<size_t>(*bytes));
      }
    }
  }

  void HalfClosed() {
    if (absl::Status stop = stop_(); !stop.ok()) {
      Done(stop);
      return;
    }
    if (!have_request_) {
      Done(absl::InvalidArgumentError("RunChunked: the stream ended before a request part"));
      return;
    }
    absl::Status status = service_->Dispatch(
        request_, record_, [this](Placement& placement) { Work(placement); });
    if (!status.ok()) Done(status);
  }

  // On a scheduler worker.
  void Work(Placement& placement) {
    absl::StatusOr<ResultParts> parts =
        ExecuteIntoParts(request_, service_->options_, *service_->scheduler_, placement, stop_,
                         record_);
    if (!parts.ok()) {
      Done(parts.status());
      return;
    }
    parts_.emplace(*std::move(parts));
    WriteNext();
  }

  void WriteNext() {
    v1::ResultPart part;
    if (parts_->Next(&part)) {
      SerializeInto(part, &write_buffer_);
      StartWrite(&write_buffer_);
      return;
    }
    record_.bytes_out = parts_->total_bytes();
    Done(absl::OkStatus());
  }

  void Done(const absl::Status& status) {
    record_.bytes_in = bytes_in_;
    service_->RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const StopCheck stop_;
  CallRecord record_;
  int64_t parts_read_ = 0;
  bool have_request_ = false;
  v1::RunRequest request_;  // owns the inputs while the task runs
  int64_t bytes_in_ = 0;
  std::optional<ResultParts> parts_;
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunChunked(
    grpc::CallbackServerContext* context) {
  return new ChunkedReactor(this, context);
}

}  // namespace tensorop::server
