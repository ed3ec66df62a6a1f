#include "server/guarded.h"
#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
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
#include "server/bidi_flow.h"
#include "server/chunk_part.h"
#include "server/convert.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/response_writer.h"
#include "server/status_map.h"
#include "server/wire_bound.h"

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
  SharedMemoryPins shared_memory;  // regions the request reads or writes
};

absl::StatusOr<std::unique_ptr<PlannedRun>> Plan(const v1::RunRequest& request,
                                                 const Limits& limits,
                                                 SharedMemoryRegistry* shared_memory,
                                                 const StopCheck& stop) {
  auto run = std::make_unique<PlannedRun>();
  ASSIGN_OR_RETURN(run->op, ToOpRequest(request));
  RETURN_IF_ERROR(ResolveSharedMemoryInputs(request, shared_memory, run->op, run->shared_memory));
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

// What one request holds besides its tensors, reserved before it is parsed
// (the request, its log record) and per output before it is planned (the
// output's layout, its plan step, its header in the answer), so that a small
// request naming many outputs cannot amplify.
constexpr int64_t kRequestOverheadBytes = 16 << 10;
constexpr int64_t kOutputOverheadBytes = 4 << 10;
// An answer's backend is known only once the request ran: device labels
// ("opencl:<device name>") are taken to be at most this long when the answer's
// size is checked against the message limit before running.
constexpr int64_t kMaxDeviceLabelBytes = 256;
// Room for one serialized ResultPart besides its chunk's bytes.
constexpr int64_t kPartOverheadBytes = 4 << 10;

// Parses `bytes` as a RunRequest into `request` for `method`, reserving what
// parsing takes (bounded from the tags, before anything is allocated) and the
// per-output overhead of planning it in `reservation`.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                          MemoryBudget::Reservation& reservation, v1::RunRequest* request) {
  absl::StatusOr<int64_t> bound = ParsedBytesBound(bytes, *v1::RunRequest::descriptor());
  if (!bound.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": ", bound.status().message()));
  }
  RETURN_IF_ERROR(reservation.Grow(*bound + kRequestOverheadBytes,
                                   absl::StrCat(method, ": parsing a ", bytes.Length(),
                                                "-byte request")));
  grpc::ByteBuffer copy(bytes);  // Deserialize consumes its buffer; this shares the slices
  if (!grpc::SerializationTraits<v1::RunRequest>::Deserialize(&copy, request).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": the ", bytes.Length(),
                                                   " bytes received are not a valid ",
                                                   v1::RunRequest::descriptor()->full_name()));
  }
  return reservation.Grow(
      kOutputOverheadBytes * std::max(1, request->outputs_size()),
      absl::StrCat(method, ": planning the ", request->outputs_size(), " outputs of request \"",
                   request->id(), "\""));
}

// Told a request's plan before any output is allocated: the bytes the answer
// takes besides the output buffers (its serialized copy, a part buffer), or
// why the request is refused (an answer over the message limit).
using AdmitFn = std::function<absl::StatusOr<int64_t>(const ExecutionPlan& plan)>;

// Plans `request`, reserves what its outputs take in `reservation` (and, on a
// device, its device buffers: PoCL's CPU device keeps them in host memory),
// asks `allocate(layout, shared)` for each output's zeroed buffer (`shared`:
// where in a shared memory region the output goes, else null), and executes
// into them.
template <typename Allocate>
absl::Status PlanAndExecute(const v1::RunRequest& request, const Limits& limits,
                            SharedMemoryRegistry* shared_memory,
                            Scheduler& scheduler, Placement& placement,
                            const StopCheck& stop, MemoryBudget::Reservation& reservation,
                            const AdmitFn& admit, Allocate allocate) {
  // Work that expired or was cancelled while queued is not started.
  RETURN_IF_ERROR(stop());
  ASSIGN_OR_RETURN(std::unique_ptr<PlannedRun> run, Plan(request, limits, shared_memory, stop));
  ASSIGN_OR_RETURN(int64_t answer_bytes, admit(run->plan));
  const int64_t output_bytes =
      TotalBytes(run->plan.outputs) - SharedMemoryOutputBytes(request, run->plan.outputs);
  int64_t bytes = output_bytes + answer_bytes;
  if (scheduler.MayRunOnDevice(placement, run->plan)) {
    bytes += output_bytes;
    for (std::span<const std::byte> input : run->inputs) {
      bytes += static_cast<int64_t>(input.size());
    }
  }
  RETURN_IF_ERROR(reservation.Grow(
      bytes, absl::StrCat("the outputs of request \"", request.id(), "\"")));
  std::vector<std::byte*> outputs;
  outputs.reserve(run->plan.outputs.size());
  for (const Layout& layout : run->plan.outputs) {
    ASSIGN_OR_RETURN(std::byte * shared,
                     SharedMemoryOutput(request, static_cast<int>(outputs.size()), layout,
                                        shared_memory, run->shared_memory));
    ASSIGN_OR_RETURN(std::byte * output, allocate(layout, shared));
    outputs.push_back(output);
  }
  return scheduler.Execute(placement, run->plan, run->inputs, outputs, stop);
}

// Executes `request` with its outputs inline in `response` (Run, RunBidi),
// refusing before any work an answer whose serialized size would pass the
// message limit. On error `response` holds no outputs.
absl::Status ExecuteIntoResponse(const v1::RunRequest& request, const ServiceOptions& options,
                                 Scheduler& scheduler, Placement& placement,
                                 const StopCheck& stop, MemoryBudget::Reservation& reservation,
                                 bool with_status, absl::string_view too_big_hint,
                                 v1::RunResponse* response) {
  const AdmitFn admit = [&](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
    const std::string backend = placement.device == Device::kCpu
                                    ? std::string("cpu")
                                    : std::string(kMaxDeviceLabelBytes, 'x');
    // Outputs written into shared memory carry no data in the answer.
    const int64_t answer_bytes =
        RunResponseBytes(request.id(), backend, with_status, "", plan.outputs) -
        SharedMemoryOutputBytes(request, plan.outputs);
    if (answer_bytes > options.max_message_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer would take ", answer_bytes, " bytes (", TotalBytes(plan.outputs),
          " of output data), more than the server's message limit of ",
          options.max_message_bytes, " bytes (--max_message_bytes); ", too_big_hint));
    }
    return answer_bytes;  // its serialized copy
  };
  absl::Status status = Guarded([&] {
    return PlanAndExecute(request, options.limits, options.shared_memory, scheduler, placement,
                          stop, reservation, admit,
                          [&](const Layout& layout,
                              std::byte* shared) -> absl::StatusOr<std::byte*> {
                            v1::Tensor* tensor = response->add_outputs();
                            SetTensorLayout(layout, tensor);
                            if (shared != nullptr) return shared;  // the layout only
                            // resize() zeroes: padding reads as zero.
                            std::string* data = tensor->mutable_data();
                            data->resize(static_cast<size_t>(layout.buffer_bytes()));
                            return reinterpret_cast<std::byte*>(data->data());
                          });
  });
  if (!status.ok()) response->clear_outputs();
  return status;
}

// Executes `request` into output buffers that become its answer (Run):
// SerializeRunResponse hands them to gRPC without a copy, so what the answer
// takes besides them is only its other fields. Refused before any work, like
// ExecuteIntoResponse, when the serialized answer would pass the message limit.
absl::StatusOr<OutputBuffers> ExecuteIntoAnswerBuffers(
    const v1::RunRequest& request, const ServiceOptions& options, Scheduler& scheduler,
    Placement& placement, const StopCheck& stop, MemoryBudget::Reservation& reservation,
    absl::string_view too_big_hint) {
  const AdmitFn admit = [&](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
    const std::string backend = placement.device == Device::kCpu
                                    ? std::string("cpu")
                                    : std::string(kMaxDeviceLabelBytes, 'x');
    const int64_t answer_bytes =
        RunResponseBytes(request.id(), backend, /*with_status=*/false, "", plan.outputs);
    if (answer_bytes > options.max_message_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer would take ", answer_bytes, " bytes (", TotalBytes(plan.outputs),
          " of output data), more than the server's message limit of ",
          options.max_message_bytes, " bytes (--max_message_bytes); ", too_big_hint));
    }
    return answer_bytes - TotalBytes(plan.outputs);  // the outputs are the answer
  };
  OutputBuffers outputs;
  absl::Status status = Guarded([&] {
    return PlanAndExecute(request, options.limits, options.shared_memory, scheduler, placement,
                          stop, reservation, admit,
                          [&](const Layout& layout, std::byte*) -> absl::StatusOr<std::byte*> {
                            ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(layout));
                            outputs.layouts.push_back(layout);
                            outputs.buffers.push_back(std::move(buffer));
                            return outputs.buffers.back().get();
                          });
  });
  if (!status.ok()) return status;
  return outputs;
}

int64_t ResponseDataBytes(const v1::RunResponse& response) {
  int64_t total = 0;
  for (const v1::Tensor& tensor : response.outputs()) total += tensor.data().size();
  return total;
}

// Outputs held by the server while they stream back; each output's chunks go
// to gRPC as slices of its buffer (server/response_writer.h).
struct Outputs {
  std::vector<Layout> layouts;
  std::vector<SharedOutput> buffers;
};

// Executes `request` into server-held buffers (RunStream, RunChunked). Streamed
// results are not bounded by the message size, only by the request limits and
// the memory budget.
absl::StatusOr<Outputs> ExecuteIntoBuffers(const v1::RunRequest& request,
                                           const ServiceOptions& options,
                                           Scheduler& scheduler, Placement& placement,
                                           const StopCheck& stop,
                                           MemoryBudget::Reservation& reservation) {
  Outputs outputs;
  const AdmitFn admit = [&](const ExecutionPlan&) -> absl::StatusOr<int64_t> {
    return options.chunk_bytes + kPartOverheadBytes;  // the part being written
  };
  absl::Status status = Guarded([&] {
    RETURN_IF_ERROR(CheckNoSharedMemoryOutputs(request, "a streamed call"));
    return PlanAndExecute(
        request, options.limits, options.shared_memory, scheduler, placement, stop, reservation,
        admit, [&](const Layout& layout, std::byte*) -> absl::StatusOr<std::byte*> {
          ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(layout));
          outputs.layouts.push_back(layout);
          outputs.buffers.push_back(Share(std::move(buffer)));
          return outputs.buffers.back().get();
        });
  });
  if (!status.ok()) return status;
  return outputs;
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

// The parts of a streamed result, one at a time: per output its header, then
// its bytes in chunks of at most chunk_bytes. An output's buffer is freed once
// its last chunk was handed out.
class ResultParts {
 public:
  ResultParts(Outputs outputs, std::string backend, int64_t chunk_bytes)
      : outputs_(std::move(outputs)), backend_(std::move(backend)), chunk_bytes_(chunk_bytes) {}

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
        return true;
      }
      if (offset_ < layout.buffer_bytes()) {
        const int64_t length = std::min(chunk_bytes_, layout.buffer_bytes() - offset_);
        *chunk = Chunk{.output = output_, .offset = offset_, .length = length};
        offset_ += length;
        return true;
      }
      outputs_.buffers[output_].reset();
      freed_ += layout.buffer_bytes();
      ++output_;
      offset_ = -1;
    }
    return false;
  }

  int64_t total_bytes() const { return TotalBytes(outputs_.layouts); }

  // Output bytes freed since the last call, for the memory budget.
  int64_t TakeFreed() { return std::exchange(freed_, 0); }

  // Serializes the next part into `buffer` and gives the output bytes freed so
  // far back to `reservation`; false after the last part. Whatever throws ends
  // as the status (the reactors call this from reactions).
  absl::StatusOr<bool> SerializeNext(grpc::ByteBuffer* buffer,
                                     MemoryBudget::Reservation& reservation) {
    bool more = false;
    RETURN_IF_ERROR(Guarded([&] {
      v1::ResultPart part;
      Chunk chunk;
      more = Next(&part, &chunk);
      reservation.Shrink(TakeFreed());
      if (more && chunk.length > 0) {
        // The chunk's bytes go out as a slice of the output: no copy.
        SerializeChunkPart(outputs_.buffers[chunk.output], chunk.offset, chunk.length, buffer);
      } else if (more) {
        SerializeInto(part, buffer);
      }
      return absl::OkStatus();
    }));
    return more;
  }

 private:
  Outputs outputs_;
  std::string backend_;
  int64_t chunk_bytes_;
  size_t output_ = 0;
  int64_t offset_ = -1;  // -1: the current output's header is next
  int64_t freed_ = 0;
};

// Executes `request` into server-held buffers and cuts them into parts
// (RunStream, RunChunked); `record` learns where it ran.
absl::StatusOr<ResultParts> ExecuteIntoParts(const v1::RunRequest& request,
                                             const ServiceOptions& options,
                                             Scheduler& scheduler, Placement& placement,
                                             const StopCheck& stop,
                                             MemoryBudget::Reservation& reservation,
                                             CallRecord& record) {
  absl::StatusOr<Outputs> outputs =
      ExecuteIntoBuffers(request, options, scheduler, placement, stop, reservation);
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

}  // namespace

TensorOpService::TensorOpService(const ServiceOptions& options, Scheduler* scheduler)
    : options_(options),
      scheduler_(scheduler),
      budget_(options.memory_budget != nullptr ? options.memory_budget : &unbounded_),
      idle_(options.idle_timeout) {}

void TensorOpService::RecordOutcome(const CallRecord& record, const absl::Status& status) const {
  // One clock reading, so the log's latency and the histogram's agree.
  const absl::Time end = absl::Now();
  if (options_.metrics != nullptr) {
    options_.metrics->RecordCall(record, status.code(), end - record.start);
  }
  LogCall(record, status, end);
}

absl::StatusOr<Placement> TensorOpService::Place(const v1::RunRequest& request) const {
  return scheduler_->Place(request.backend(), RequestedDevice(request));
}

absl::Status TensorOpService::Submit(std::function<void()> work) {
  // The scheduler queues every task alike; the placement matters to Execute.
  return scheduler_->Submit(Placement{}, std::move(work));
}

absl::Status TensorOpService::Dispatch(const v1::RunRequest& request, CallRecord& record,
                                       std::function<void(Placement&)> work) {
  absl::StatusOr<Placement> placement = Place(request);
  if (!placement.ok()) return placement.status();
  record.backend = placement->label;
  return scheduler_->Submit(*placement,
                            [work = std::move(work), placement = *placement]() mutable {
                              work(placement);
                            });
}

// ---------------------------------------------------------------------------
// Run
//
// The request's bytes are reserved in the reaction and parsed on a worker; the
// answer is serialized there and its reservation held until gRPC sent it
// (OnDone). An answer the client never takes ends CANCELLED after
// --idle_timeout_seconds, with a log line saying so.

class TensorOpService::UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  UnaryReactor(TensorOpService* service, grpc::CallbackServerContext* context,
               const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : service_(service),
        request_bytes_(request),
        response_bytes_(response),
        stop_(MakeStopCheck(context)),
        watch_(service->idle_.Watch(context)),
        reservation_(service->budget_->Empty()) {
    record_.method = "Run";
    record_.identity = PeerIdentity(*context);
    absl::Status status = Guarded([&] {
      RETURN_IF_ERROR(reservation_.Grow(static_cast<int64_t>(request->Length()),
                                        "Run: the request as received"));
      return service_->Submit([this] { Done(Guarded([&] { return Work(); })); });
    });
    if (!status.ok()) Done(status);
  }

  void OnDone() override {
    watch_->Done();
    // The call was recorded when its answer was ready (so a client holding the
    // answer finds it counted); an answer the client then never took gets a
    // second log line, not a second count.
    if (watch_->expired()) LogCall(record_, service_->idle_.IdleStatus());
    delete this;
  }

 private:
  // On a scheduler worker.
  absl::Status Work() {
    RETURN_IF_ERROR(ParseRequest(*request_bytes_, "Run", reservation_, &request_));
    ReleaseRequestBytes(request_bytes_, reservation_);
    const absl::Time start = record_.start;
    std::string identity = std::move(record_.identity);
    record_ = DescribeRequest("Run", request_);
    record_.start = start;
    record_.identity = std::move(identity);
    ASSIGN_OR_RETURN(Placement placement, service_->Place(request_));
    record_.backend = placement.label;
    if (WritesToSharedMemory(request_)) return WorkIntoSharedMemory(placement);
    absl::StatusOr<OutputBuffers> outputs = ExecuteIntoAnswerBuffers(
        request_, service_->options_, *service_->scheduler_, placement, stop_, reservation_,
        "use RunStream for large results");
    record_.backend = placement.label;
    RETURN_IF_ERROR(outputs.status());
    record_.bytes_out = TotalBytes(outputs->layouts);
    // The outputs go to gRPC as they are; they stay reserved until OnDone.
    SerializeRunResponse(request_.id(), *outputs, placement.label, /*status=*/nullptr,
                         response_bytes_);
    // The inputs are done with: freed now rather than when the client took the
    // answer, so a client's next call does not find this one's bytes still held.
    request_.Clear();
    return absl::OkStatus();
  }

  // Outputs in shared memory: the answer carries their layouts only, so it is
  // a small protobuf serialized as usual.
  absl::Status WorkIntoSharedMemory(Placement& placement) {
    v1::RunResponse response;
    absl::Status status = ExecuteIntoResponse(
        request_, service_->options_, *service_->scheduler_, placement, stop_, reservation_,
        /*with_status=*/false, "use RunStream for large results", &response);
    record_.backend = placement.label;
    RETURN_IF_ERROR(status);
    response.set_id(request_.id());
    response.set_backend(placement.label);
    record_.bytes_out = ResponseDataBytes(response);
    SerializeInto(response, response_bytes_);
    // The response's outputs go with it; their serialized copy stays reserved.
    reservation_.Shrink(record_.bytes_out);
    request_.Clear();
    return absl::OkStatus();
  }

  void Done(const absl::Status& status) {
    service_->RecordOutcome(record_, status);
    watch_->Arm();  // the answer waits for the client from here
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const OpenCall open_call_{service_->open_calls_};
  const grpc::ByteBuffer* const request_bytes_;  // owned by gRPC until OnDone
  grpc::ByteBuffer* const response_bytes_;
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  v1::RunRequest request_;
  CallRecord record_;
};

grpc::ServerUnaryReactor* TensorOpService::Run(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return new UnaryReactor(this, context, request, response);
}

// ---------------------------------------------------------------------------
// RunStream

class TensorOpService::StreamReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamReactor(TensorOpService* service, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer* request)
      : service_(service),
        request_bytes_(request),
        stop_(MakeStopCheck(context)),
        watch_(service->idle_.Watch(context)),
        reservation_(service->budget_->Empty()) {
    record_.method = "RunStream";
    record_.identity = PeerIdentity(*context);
    absl::Status status = Guarded([&] {
      RETURN_IF_ERROR(reservation_.Grow(static_cast<int64_t>(request->Length()),
                                        "RunStream: the request as received"));
      return service_->Submit([this] { Work(); });
    });
    if (!status.ok()) Done(status);
  }

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    if (!ok) {
      Done(WriteFailed());
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // On a scheduler worker.
  void Work() {
    absl::Status status = Guarded([&]() -> absl::Status {
      RETURN_IF_ERROR(ParseRequest(*request_bytes_, "RunStream", reservation_, &request_));
      ReleaseRequestBytes(request_bytes_, reservation_);
      const absl::Time start = record_.start;
      std::string identity = std::move(record_.identity);
      record_ = DescribeRequest("RunStream", request_);
      record_.start = start;
      record_.identity = std::move(identity);
      ASSIGN_OR_RETURN(Placement placement, service_->Place(request_));
      record_.backend = placement.label;
      ASSIGN_OR_RETURN(ResultParts parts,
                       ExecuteIntoParts(request_, service_->options_, *service_->scheduler_,
                                        placement, stop_, reservation_, record_));
      parts_.emplace(std::move(parts));
      request_.Clear();  // the inputs are done with; only the outputs stream
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Done(status);
      return;
    }
    WriteNext();
  }

  // One write in flight at a time: the next starts from OnWriteDone.
  void WriteNext() {
    const absl::StatusOr<bool> more = parts_->SerializeNext(&write_buffer_, reservation_);
    if (!more.ok()) {
      Done(more.status());
      return;
    }
    if (*more) {
      watch_->Arm();
      StartWrite(&write_buffer_);
      return;
    }
    record_.bytes_out = parts_->total_bytes();
    Done(absl::OkStatus());
  }

  absl::Status WriteFailed() const {
    return watch_->expired() ? service_->idle_.IdleStatus() : WriteFailure(stop_);
  }

  void Done(const absl::Status& status) {
    service_->RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const OpenCall open_call_{service_->open_calls_};
  const grpc::ByteBuffer* const request_bytes_;  // owned by gRPC until OnDone
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  v1::RunRequest request_;
  CallRecord record_;
  std::optional<ResultParts> parts_;
  grpc::ByteBuffer write_buffer_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorOpService::RunStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new StreamReactor(this, context, request);
}

// ---------------------------------------------------------------------------
// RunBidi
//
// Every request read is reserved, parsed and submitted at once and the next
// read started; answers are serialized by the tasks, queued with their
// reservations as tasks finish, and written one at a time. A request that
// fails (over the budget, an answer over the message limit, a bad request)
// gets its own error answer and the stream goes on. The stream finishes when
// the client half-closed (or sent bytes that do not parse, or went away) and
// every task has answered. The decisions are flow_'s (server/bidi_flow.h, its
// states and transitions), fed under mu_; the gRPC calls they lead to
// (StartRead, StartWrite, Finish) are made after releasing it, because gRPC
// may run a reaction inline inside them. Once a thread decided to Finish, no
// one touches the reactor again: OnDone may delete it at any time.

class TensorOpService::BidiReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BidiReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service),
        stop_(MakeStopCheck(context)),
        identity_(PeerIdentity(*context)),
        watch_(service->idle_.Watch(context)) {
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = StepsLocked(flow_.Start());
    }
    Take(std::move(step));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Step step;
      {
        std::lock_guard<std::mutex> lock(mu_);
        step = StepsLocked(flow_.ReadDone(false));
      }
      Take(std::move(step));
      return;
    }
    ++messages_read_;
    auto request = std::make_shared<v1::RunRequest>();
    MemoryBudget::Reservation reservation = service_->budget_->Empty();
    const absl::Status parsed = Guarded([&] {
      return ParseRequest(read_buffer_, absl::StrCat("RunBidi: message ", messages_read_),
                          reservation, request.get());
    });
    read_buffer_.Clear();
    if (parsed.code() == absl::StatusCode::kInvalidArgument) {
      const absl::Status status = absl::InvalidArgumentError(
          absl::StrCat("RunBidi: message ", messages_read_,
                       " is not a valid tensorop.v1.RunRequest; the stream ends here"));
      CallRecord record;
      record.method = "RunBidi";
      service_->RecordOutcome(record, status);
      Step step;
      {
        std::lock_guard<std::mutex> lock(mu_);
        step = StepsLocked(flow_.BadMessage(status));
      }
      Take(std::move(step));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      flow_.RequestRead();  // answered exactly once, by Answer()
    }
    if (parsed.ok()) {
      Submit(std::move(request), std::move(reservation));
    } else {
      // Over the budget: answered at once, without its request (not parsed).
      CallRecord record;
      record.method = "RunBidi";
      Answer(*request, std::move(record), parsed, v1::RunResponse(), std::move(reservation));
    }
    Step step;
    {
      // The read counts as outstanding until here, so no other thread can
      // finish (and free) the reactor while this reaction still runs.
      std::lock_guard<std::mutex> lock(mu_);
      step = StepsLocked(flow_.ReadDone(true));
    }
    Take(std::move(step));
  }

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_reservation_.Release();
      step = StepsLocked(flow_.WriteDone(ok));
    }
    Take(std::move(step));
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // A serialized answer and the memory it holds.
  struct Queued {
    grpc::ByteBuffer bytes;
    MemoryBudget::Reservation reservation;
  };

  // What to do once mu_ is released.
  struct Step {
    bool read = false;
    bool write = false;
    std::optional<absl::Status> finish;
    bool log_finish = false;
  };

  // Performs `steps`' queue edits (mirroring flow_'s count) and takes the
  // next answer to write into write_buffer_; the gRPC calls wait for Take.
  Step StepsLocked(const BidiFlow::Steps& steps, Queued* answer = nullptr) {
    Step step;
    if (steps.enqueue_answer) queue_.push_back(std::move(*answer));
    if (steps.drop_queued) queue_.clear();
    if (steps.start_write) {
      // Only the thread that took this step touches write_buffer_ until the
      // write is done.
      write_buffer_ = std::move(queue_.front().bytes);
      writing_reservation_ = std::move(queue_.front().reservation);
      queue_.pop_front();
      step.write = true;
    }
    step.read = steps.start_read;
    switch (steps.finish) {
      case BidiFlow::FinishKind::kNone:
        break;
      case BidiFlow::FinishKind::kOk:
        step.finish = absl::OkStatus();
        break;
      case BidiFlow::FinishKind::kBadMessage:
        step.finish = steps.end_status;
        break;
      case BidiFlow::FinishKind::kWriteFailed:
        step.finish = watch_->expired() ? service_->idle_.IdleStatus() : WriteFailure(stop_);
        step.log_finish = true;
        break;
    }
    return step;
  }

  void Take(Step step) {
    if (step.finish.has_value()) {
      if (step.log_finish) {
        // A stream the client stopped reading (or that went idle) ends with a
        // line of its own: its requests' lines say they were answered.
        CallRecord record;
        record.method = "RunBidi";
        service_->RecordOutcome(record, *step.finish);
      }
      Finish(ToGrpcStatus(*step.finish));
      return;  // `this` may be gone
    }
    if (step.write) {
      watch_->Arm();
      StartWrite(&write_buffer_);
    }
    if (step.read) StartRead(&read_buffer_);
  }

  void Submit(std::shared_ptr<v1::RunRequest> request, MemoryBudget::Reservation reservation) {
    CallRecord record = DescribeRequest("RunBidi", *request);
    record.identity = identity_;
    auto held = std::make_shared<MemoryBudget::Reservation>(std::move(reservation));
    absl::Status status = service_->Dispatch(
        *request, record, [this, request, record, held](Placement& placement) mutable {
          v1::RunResponse response;
          absl::Status status = ExecuteIntoResponse(
              *request, service_->options_, *service_->scheduler_, placement, stop_, *held,
              /*with_status=*/true, "use RunStream or RunChunked for large results", &response);
          record.backend = placement.label;
          if (status.ok()) response.set_backend(placement.label);
          Answer(*request, std::move(record), status, std::move(response), std::move(*held));
        });
    if (!status.ok()) {
      Answer(*request, std::move(record), status, v1::RunResponse(), std::move(*held));
    }
  }

  // Queues the answer to `request`; from a worker, or from OnReadDone when the
  // request never reached one. `reservation` holds the request and its
  // outputs; the request's part is given back once the answer is serialized.
  void Answer(const v1::RunRequest& request, CallRecord record, const absl::Status& status,
              v1::RunResponse response, MemoryBudget::Reservation reservation) {
    response.set_id(request.id());
    response.mutable_status()->set_code(static_cast<int32_t>(ToGrpcCode(status.code())));
    response.mutable_status()->set_message(std::string(status.message()));
    if (status.ok()) record.bytes_out = ResponseDataBytes(response);
    service_->RecordOutcome(record, status);
    Queued queued;
    const absl::Status serialized = Guarded([&] {
      SerializeInto(response, &queued.bytes);
      return absl::OkStatus();
    });
    // An error answer is small and not reserved: refusing it would lose it.
    const int64_t answer_bytes = status.ok() ? static_cast<int64_t>(queued.bytes.Length()) : 0;
    reservation.Shrink(reservation.bytes() - answer_bytes);
    queued.reservation = std::move(reservation);
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = StepsLocked(flow_.AnswerReady(serialized.ok()), &queued);
    }
    Take(std::move(step));
  }

  TensorOpService* const service_;
  const OpenCall open_call_{service_->open_calls_};
  const StopCheck stop_;
  const std::string identity_;  // who called, for every request's log line
  const std::shared_ptr<IdleWatch> watch_;
  int64_t messages_read_ = 0;  // only touched by reactions, never concurrently
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;

  std::mutex mu_;
  BidiFlow flow_;
  std::deque<Queued> queue_;  // the answers flow_ counts as queued, in order
  MemoryBudget::Reservation writing_reservation_;  // of the answer being written
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunBidi(
    grpc::CallbackServerContext* context) {
  return new BidiReactor(this, context);
}

// ---------------------------------------------------------------------------
// RunChunked
//
// The request part is reserved before it is parsed and each chunk before it is
// stored, as the upload grows (never the total the request declares); the
// upload is cancelled when no part arrives for --idle_timeout_seconds.

class TensorOpService::ChunkedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ChunkedReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service),
        stop_(MakeStopCheck(context)),
        watch_(service->idle_.Watch(context)),
        reservation_(service->budget_->Empty()) {
    record_.method = "RunChunked";
    record_.identity = PeerIdentity(*context);
    watch_->Arm();
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    watch_->Touch();
    if (!ok) {
      watch_->Disarm();
      HalfClosed();
      return;
    }
    ++parts_read_;
    absl::Status status = Guarded([&] { return Read(); });
    read_buffer_.Clear();
    if (!status.ok()) {
      watch_->Disarm();
      Done(status);
      return;
    }
    StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    if (!ok) {
      Done(watch_->expired() ? service_->idle_.IdleStatus() : WriteFailure(stop_));
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // Parses the part in read_buffer_ and takes it in.
  absl::Status Read() {
    if (have_request_) {
      // The common chunk, appended from the received slices (no parse copy);
      // any other part, or a name that is no input, goes through the parser.
      if (std::optional<ChunkPartView> chunk = ChunkPartView::Of(read_buffer_)) {
        auto input = request_.mutable_inputs()->find(chunk->input());
        if (input != request_.mutable_inputs()->end()) {
          bytes_in_ += chunk->data_bytes();
          RETURN_IF_ERROR(CheckBytes());
          RETURN_IF_ERROR(Reserve(chunk->input(), chunk->data_bytes(), input->second.mutable_data()));
          chunk->AppendDataTo(input->second.mutable_data());
          return absl::OkStatus();
        }
      }
    }
    v1::RequestPart part;
    if (!have_request_) {
      // The request part: reserved (bounded from its tags) before parsing, and
      // kept, since the request is held until the call ends.
      absl::StatusOr<int64_t> bound =
          ParsedBytesBound(read_buffer_, *v1::RequestPart::descriptor());
      if (bound.ok()) {
        RETURN_IF_ERROR(reservation_.Grow(*bound + kRequestOverheadBytes,
                                          "RunChunked: parsing the request part"));
      }
    }
    if (!grpc::SerializationTraits<v1::RequestPart>::Deserialize(&read_buffer_, &part).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RunChunked: part ", parts_read_, " is not a valid tensorop.v1.RequestPart"));
    }
    return Accept(part);
  }

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
        charged_[name] = static_cast<int64_t>(tensor.data().size());
      }
      RETURN_IF_ERROR(CheckBytes());
      RETURN_IF_ERROR(reservation_.Grow(
          kOutputOverheadBytes * std::max(1, request_.outputs_size()),
          absl::StrCat("RunChunked: planning the ", request_.outputs_size(),
                       " outputs of request \"", request_.id(), "\"")));
      ReserveAddressSpace();
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
        return Append(chunk, input->second.mutable_data());
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

  // Appends `chunk` to `data`, reserving first what the input's buffer comes
  // to hold: its bytes as they arrive while they fit the capacity reserved
  // ahead (address space whose pages only the bytes touch), else the doubled
  // capacity, with the old buffer for the moment of the copy.
  absl::Status Append(const v1::InputChunk& chunk, std::string* data) {
    RETURN_IF_ERROR(Reserve(chunk.input(), static_cast<int64_t>(chunk.data().size()), data));
    data->append(chunk.data());
    return absl::OkStatus();
  }

  // Append's reservation and capacity for `chunk_bytes` more bytes of input
  // `name`, whose buffer is `data`.
  absl::Status Reserve(const std::string& name, int64_t chunk_bytes, std::string* data) {
    int64_t& charged = charged_[name];
    const int64_t size = static_cast<int64_t>(data->size());
    const int64_t needed = size + chunk_bytes;
    const int64_t capacity = static_cast<int64_t>(data->capacity());
    const std::string what = absl::StrCat("RunChunked: input \"", name, "\" of request \"",
                                          request_.id(), "\" at ", needed, " bytes");
    if (needed > capacity) {
      const int64_t target = std::max(needed, 2 * capacity);
      RETURN_IF_ERROR(reservation_.Grow(target + capacity - charged, what));
      data->reserve(static_cast<size_t>(target));
      AdviseHugePages(data->data(), data->capacity());
      reservation_.Shrink(capacity);
      charged = target;
    } else if (needed > charged) {
      RETURN_IF_ERROR(reservation_.Grow(needed - charged, what));
      charged = needed;
    }
    return absl::OkStatus();
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
  // chunks append without reallocating: address space only (pages are
  // touched, and reserved in the budget, as chunks arrive), and only when the
  // declared total fits both the request limit and the memory budget, so a
  // declaration alone never allocates what the server could not hold.
  void ReserveAddressSpace() {
    const int64_t room = std::min(service_->options_.limits.max_request_bytes,
                                  service_->budget_->limit());
    int64_t total = 0;
    for (auto& [name, tensor] : *request_.mutable_inputs()) {
      std::optional<int64_t> bytes = DeclaredBytes(tensor);
      if (!bytes.has_value()) continue;
      std::optional<int64_t> sum = CheckedAdd(total, *bytes);
      if (!sum.has_value() || *sum > room) return;
      total = *sum;
    }
    for (auto& [name, tensor] : *request_.mutable_inputs()) {
      if (std::optional<int64_t> bytes = DeclaredBytes(tensor)) {
        tensor.mutable_data()->reserve(static_cast<size_t>(*bytes));
        AdviseHugePages(tensor.mutable_data()->data(), tensor.mutable_data()->capacity());
      }
    }
  }

  void HalfClosed() {
    if (absl::Status stop = stop_(); !stop.ok()) {
      Done(watch_->expired() ? service_->idle_.IdleStatus() : stop);
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
    absl::Status status = Guarded([&]() -> absl::Status {
      ASSIGN_OR_RETURN(ResultParts parts,
                       ExecuteIntoParts(request_, service_->options_, *service_->scheduler_,
                                        placement, stop_, reservation_, record_));
      parts_.emplace(std::move(parts));
      // The uploaded inputs are done with: freed, and their reservation given
      // back, before the result streams.
      request_.Clear();
      for (auto& [name, charged] : charged_) reservation_.Shrink(std::exchange(charged, 0));
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Done(status);
      return;
    }
    WriteNext();
  }

  void WriteNext() {
    const absl::StatusOr<bool> more = parts_->SerializeNext(&write_buffer_, reservation_);
    if (!more.ok()) {
      Done(more.status());
      return;
    }
    if (*more) {
      watch_->Arm();
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
  const OpenCall open_call_{service_->open_calls_};
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  CallRecord record_;
  int64_t parts_read_ = 0;
  bool have_request_ = false;
  v1::RunRequest request_;  // owns the inputs while the task runs
  int64_t bytes_in_ = 0;
  std::map<std::string, int64_t> charged_;  // per input: bytes of its buffer reserved
  std::optional<ResultParts> parts_;
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunChunked(
    grpc::CallbackServerContext* context) {
  return new ChunkedReactor(this, context);
}

}  // namespace tensorop::server

namespace tensorop::server {

grpc::ServerUnaryReactor* TensorOpService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
    v1::RegisterSharedMemoryResponse* response) {
  return server::RegisterSharedMemory(options_.shared_memory, context, request, response);
}

grpc::ServerUnaryReactor* TensorOpService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
    v1::UnregisterSharedMemoryResponse* response) {
  return server::UnregisterSharedMemory(options_.shared_memory, context, request, response);
}

grpc::ServerUnaryReactor* TensorOpService::SharedMemoryStatus(
    grpc::CallbackServerContext* context, const v1::SharedMemoryStatusRequest* request,
    v1::SharedMemoryStatusResponse* response) {
  return server::SharedMemoryStatus(options_.shared_memory, context, request, response);
}

}  // namespace tensorop::server

// ---------------------------------------------------------------------------
// The pipeline for other front ends (server/inference_service.h).

namespace tensorop::server {

StopCheck CallStopCheck(grpc::CallbackServerContext* context) { return MakeStopCheck(context); }

absl::Status TensorOpService::ExecuteOnWorker(const v1::RunRequest& request,
                                              CallRecord& record, const StopCheck& stop,
                                              MemoryBudget::Reservation& reservation,
                                              absl::string_view too_big_hint,
                                              v1::RunResponse* response) {
  ASSIGN_OR_RETURN(Placement placement, Place(request));
  record.backend = placement.label;
  absl::Status status = ExecuteIntoResponse(request, options_, *scheduler_, placement, stop,
                                            reservation, /*with_status=*/false, too_big_hint,
                                            response);
  record.backend = placement.label;
  RETURN_IF_ERROR(status);
  response->set_id(request.id());
  response->set_backend(placement.label);
  record.bytes_out = ResponseDataBytes(*response);
  return absl::OkStatus();
}

void ReleaseRequestBytes(const grpc::ByteBuffer* bytes, MemoryBudget::Reservation& reservation) {
  const int64_t length = static_cast<int64_t>(bytes->Length());
  const_cast<grpc::ByteBuffer*>(bytes)->Clear();
  reservation.Shrink(length);
}

}  // namespace tensorop::server
