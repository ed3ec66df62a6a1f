// ModelInfer and ModelStreamInfer: a request's bytes parsed with what that
// takes reserved, converted into a native RunRequest, run by the native
// pipeline on a worker (or in the reaction when tiny) and its answer
// serialized. The small methods are inference_service.cc.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dtype.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "server/data/shared_memory.h"
#include "server/memory/memory_budget.h"
#include "server/memory/received_bytes.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/raw_unary.h"
#include "server/pipeline/response_writer.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/metrics.h"
#include "server/telemetry/request_log.h"
#include "server/transport/call_stop.h"
#include "server/v2/inference_model_specs.h"
#include "server/v2/inference_models.h"
#include "server/v2/inference_service.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {
namespace {

// A ModelInferRequest parsed and converted: what ExecuteInfer runs.
struct PreparedInfer {
  inference::ModelInferRequest request;
  ReceivedData received;              // input "input"'s bytes where received
  int input_entry = -1;               // their entry in `received`
  std::optional<int64_t> held_bytes;  // their count
  v1::RunRequest run;
  UploadedInputs uploaded;
};

// Parses `received` as a ModelInferRequest for `method` into
// `prepared->request`, reserving what that takes, and releases the received
// bytes. In a request
// of 1 MiB or more, input "input"'s raw_input_contents entry (from 64 KiB) is
// left where gRPC received it: `prepared->received` gets the view, in which it
// is input `prepared->input_entry`, named "input" (its entry in the request
// stays empty). Other entries that large are copied into the request, as
// protobuf does; so are all of a scatter_elements request, whose indices
// planning reads.
absl::Status ParseInferRequest(ReceivedBytes& received, absl::string_view method,
                               MemoryBudget::Reservation& reservation, PreparedInfer* prepared) {
  const grpc::ByteBuffer* const bytes = &received.bytes();
  inference::ModelInferRequest* request = &prepared->request;
  int* input_entry = &prepared->input_entry;
  constexpr size_t kHoldFromBytes = size_t{1} << 20;
  constexpr size_t kHeldEntryBytes = size_t{64} << 10;
  // The fields besides the held entries, smaller ones included, past which
  // the request is parsed by protobuf.
  constexpr size_t kMaxRestBytes = size_t{256} << 10;
  const int64_t received_bytes = static_cast<int64_t>(bytes->Length());
  // What parsing `message` (the request, or the view's rest of it) takes.
  const auto reserve_parse = [&](const grpc::ByteBuffer& message) {
    return ReserveParse(message, *inference::ModelInferRequest::descriptor(), received_bytes,
                        method, reservation);
  };
  const absl::Status invalid = absl::InvalidArgumentError(
      absl::StrCat(method, ": the ", received_bytes, " bytes received are not a valid ",
                   inference::ModelInferRequest::descriptor()->full_name()));
  std::optional<RequestDataView> view;
  if (bytes->Length() >= kHoldFromBytes) {
    ASSIGN_OR_RETURN(view, ReservedView(kMaxRestBytes, method, reservation, [&](size_t most) {
                       return RequestDataView::OfRepeatedBytes(
                           *bytes, inference::ModelInferRequest::kRawInputContentsFieldNumber,
                           kHeldEntryBytes, most);
                     }));
  }
  if (!view.has_value()) {
    RETURN_IF_ERROR(reserve_parse(*bytes));
    grpc::ByteBuffer copy(*bytes);  // Deserialize consumes its buffer; this shares the slices
    if (!grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&copy, request)
             .ok()) {
      return invalid;
    }
    received.Release();
    return absl::OkStatus();
  }
  const grpc::Slice rest_slice(view->rest().data(), view->rest().size());
  RETURN_IF_ERROR(reserve_parse(grpc::ByteBuffer(&rest_slice, 1)));
  if (!request->ParseFromString(view->rest())) return invalid;
  // raw_input_contents[k] is the k-th input not in shared memory (as Triton).
  *input_entry = -1;
  int entry = 0;
  for (const auto& tensor : request->inputs()) {
    if (tensor.parameters().contains(std::string(kSharedMemoryRegionParameter))) continue;
    if (tensor.name() == "input" && *input_entry < 0) *input_entry = entry;
    ++entry;
  }
  // Only an operator of one input has it held apart (the pipeline reads
  // received pieces for "input" alone).
  const ModelSpec* model = FindModel(request->model_name());
  if (model == nullptr || model->op->input_names.size() != 1) *input_entry = -1;
  if (*input_entry >= 0 && (static_cast<size_t>(*input_entry) >= view->inputs().size() ||
                            view->inputs()[static_cast<size_t>(*input_entry)].bytes == 0)) {
    *input_entry = -1;
  }
  const int64_t held_bytes =
      *input_entry < 0 ? 0 : view->inputs()[static_cast<size_t>(*input_entry)].bytes;
  const int64_t copied_bytes = view->DataBytes() - held_bytes;
  RETURN_IF_ERROR(reservation.Grow(
      copied_bytes, absl::StrCat(method, ": the ", copied_bytes,
                                 " bytes of raw_input_contents copied into the request")));
  for (size_t k = 0; k < view->inputs().size(); ++k) {
    const int64_t held = view->inputs()[k].bytes;
    if (held == 0 || static_cast<int>(k) == *input_entry) continue;
    std::string& data = *request->mutable_raw_input_contents(static_cast<int>(k));
    data.resize(static_cast<size_t>(held));
    view->MoveDataTo(k, reinterpret_cast<std::byte*>(data.data()));
  }
  if (*input_entry < 0) {
    received.Release();
    return absl::OkStatus();
  }
  prepared->received.cover = received.ReleaseKeeping(held_bytes);
  view->Name(static_cast<size_t>(*input_entry), "input");
  prepared->received.view = std::move(view);
  return absl::OkStatus();
}

// One inference's call, as both halves below read and update it.
struct InferCall {
  Engine& engine;
  absl::string_view method;  // "ModelInfer" or "ModelStreamInfer"
  const StopCheck& stop;
  CallRecord& record;  // describes the request once parsed, and where it ran
  // The call's share of the budget: the request's bytes, then the answer's.
  MemoryBudget::Reservation& reservation;
};

// An inference's first half: `received` parsed with what that takes reserved
// (bounded from the tags before anything is allocated) and converted into
// `prepared`, the call's record describing it.
absl::Status PrepareInfer(const InferCall& call, ReceivedBytes& received, PreparedInfer& prepared) {
  const absl::string_view method = call.method;
  MemoryBudget::Reservation& reservation = call.reservation;
  RETURN_IF_ERROR(call.stop());
  inference::ModelInferRequest& request = prepared.request;
  RETURN_IF_ERROR(ParseInferRequest(received, method, reservation, &prepared));
  RETURN_IF_ERROR(CheckIdBytes(request.id(), absl::StrCat(method, ": id")));
  RETURN_IF_ERROR(reservation.Grow(
      TypedContentsBound(request),
      absl::StrCat(method, ": the typed contents of request ", Quoted(request.id()))));
  std::optional<RequestDataView>& view = prepared.received.view;
  if (view.has_value()) {
    prepared.held_bytes = view->inputs()[static_cast<size_t>(prepared.input_entry)].bytes;
  }
  ASSIGN_OR_RETURN(prepared.run, ToRunRequest(request, prepared.held_bytes));
  const v1::RunRequest& run = prepared.run;
  Redescribe(call.record, DescribeRequest(method, run));
  call.record.bytes_in += prepared.held_bytes.value_or(0);
  if (view.has_value()) {
    const std::optional<DType> dtype = DTypeFromInt(run.inputs().at("input").dtype());
    prepared.uploaded.emplace("input", InputSource::Received(view->ElementPieces(
                                           static_cast<size_t>(prepared.input_entry),
                                           dtype.has_value() ? ElementSize(*dtype) : 1)));
  }
  return absl::OkStatus();
}

// Its second half: `prepared` executed by the native pipeline and its answer
// serialized into `out`; the call's reservation holds the answer when it
// returns OK. `tiny`: the request planned to run here, in a reaction (PlanTiny).
absl::Status ExecuteInfer(const InferCall& call, PreparedInfer& prepared, grpc::ByteBuffer* out,
                          Engine::TinyRun* tiny = nullptr) {
  Engine& engine = call.engine;
  CallRecord& record = call.record;
  const inference::ModelInferRequest& request = prepared.request;
  v1::RunRequest& run = prepared.run;
  UploadedInputs& uploaded = prepared.uploaded;
  // The answer's reservation, apart from the request's: an answer forwarding
  // the bytes `prepared.received` holds takes their cover over
  // (CallContext::received).
  MemoryBudget::Reservation answer_reservation = call.reservation.Sibling();
  Placement placement;
  CallContext execution = engine.Call(run, placement, call.stop, answer_reservation);
  execution.uploaded = &uploaded;
  out->Clear();
  if (WritesToSharedMemory(run)) {
    // The answer carries the outputs' layouts only: a small message.
    v1::RunResponse response;
    RETURN_IF_ERROR(NameSharedMemoryOutput(
        request,
        engine.ExecuteOnWorker(execution, record,
                               {.response = &response, .too_big_hint = kAnswerTooBigHint})));
    run.Clear();  // the inputs are done with
    ASSIGN_OR_RETURN(inference::ModelInferResponse answer, ToModelInferResponse(request, response));
    bool own_buffer = false;
    // Fails only past 2 GiB; the answer was checked against --max_message_bytes.
    grpc::SerializationTraits<inference::ModelInferResponse>::Serialize(answer, out, &own_buffer)
        .IgnoreError();
  } else {
    // The output buffers the kernels wrote (or, for an output that is a run
    // of the input's bytes, those bytes as received) become
    // raw_output_contents as they are: no copy into the message or into its
    // serialized bytes.
    execution.received = &prepared.received;
    ASSIGN_OR_RETURN(
        OutputBuffers outputs,
        engine.ExecuteOnWorker(execution, record, {.too_big_hint = kAnswerTooBigHint}, tiny));
    run.Clear();  // the inputs are done with
    v1::RunResponse layouts;
    for (const Layout& layout : outputs.layouts) SetTensorLayout(layout, layouts.add_outputs());
    layouts.set_backend(record.backend);
    ASSIGN_OR_RETURN(ModelInferAnswer answer, ModelInferAnswerFor(request, layouts));
    SerializeWithOutputContents(answer.head,
                                inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                                answer.contents, outputs, out);
  }
  // What stays held until gRPC sent it: the answer, as the execution
  // reserved it. The request and its inputs go now.
  call.reservation = std::move(answer_reservation);
  prepared.received.cover.Release();
  return absl::OkStatus();
}

// One inference, from its bytes to its serialized answer, on a scheduler
// worker: both halves above.
absl::Status Infer(const InferCall& call, ReceivedBytes& received, std::string* model,
                   grpc::ByteBuffer* out) {
  PreparedInfer prepared;
  RETURN_IF_ERROR(PrepareInfer(call, received, prepared));
  *model = prepared.request.model_name();
  return ExecuteInfer(call, prepared, out);
}

}  // namespace

// ---------------------------------------------------------------------------
// ModelInfer: reserved in the reaction, parsed and run on a worker, answered
// from there (as the native Run). A request of at most
// kParseInReactionBytes is parsed in the reaction, and runs there when it is tiny
// work for the CPU (PlanTiny), as Run's.

class InferenceService::InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(InferenceService* service, grpc::CallbackServerContext* context,
               const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : service_(service),
        response_bytes_(response),
        stop_(CallStopCheck(context)),
        watch_(service->engine_->idle().Watch(context)),
        reservation_(open_call_.Reservation()),
        received_(request, reservation_.Sibling()) {
    record_.method = "ModelInfer";
    SetCallOrigin(*context, record_);
    bool answered = false;
    absl::Status status = Guarded([&] {
      RETURN_IF_ERROR(CheckReceivedBytes(
          received_.bytes(), service_->engine_->options().max_message_bytes, "ModelInfer"));
      RETURN_IF_ERROR(received_.Reserve("ModelInfer"));
      if (request->Length() <= kParseInReactionBytes) {
        ASSIGN_OR_RETURN(answered, RunHereIfTiny());
        if (answered) return absl::OkStatus();
      }
      return service_->engine_->Submit([this] { Work(); });
    });
    if (answered || !status.ok()) Done(status);
  }

  void OnDone() override {
    watch_->Done();
    // Recorded when the answer was ready; an answer the client then never
    // took gets a second log line, not a second count (as Run).
    if (watch_->expired()) LogCall(record_, service_->engine_->idle().IdleStatus());
    delete this;
  }

 private:
  // Parses the request here, and runs it here too when it is tiny work for
  // the CPU; false, the request parsed, when a worker is to go on.
  absl::StatusOr<bool> RunHereIfTiny() {
    prepared_ = std::make_unique<PreparedInfer>();
    RETURN_IF_ERROR(PrepareInfer(Call(), received_, *prepared_));
    std::optional<Engine::TinyRun> tiny =
        service_->engine_->PlanTiny(prepared_->run, stop_, /*handles=*/nullptr);
    if (!tiny.has_value()) return false;
    RETURN_IF_ERROR(service_->engine_->RunHere(
        [&] { return ExecuteInfer(Call(), *prepared_, response_bytes_, &*tiny); }));
    return true;
  }

  // On a scheduler worker.
  void Work() {
    absl::Status status = Guarded([&] {
      if (prepared_ == nullptr) {
        prepared_ = std::make_unique<PreparedInfer>();
        RETURN_IF_ERROR(PrepareInfer(Call(), received_, *prepared_));
      }
      return ExecuteInfer(Call(), *prepared_, response_bytes_);
    });
    Done(status);
  }

  InferCall Call() {
    return {.engine = *service_->engine_,
            .method = "ModelInfer",
            .stop = stop_,
            .record = record_,
            .reservation = reservation_};
  }

  void Done(const absl::Status& status) {
    service_->engine_->RecordOutcome(record_, status);
    watch_->Arm();  // the answer waits for the client from here
    Finish(ToGrpcStatus(status));
  }

  InferenceService* const service_;
  const Engine::OpenCall open_call_{*service_->engine_, "ModelInfer"};
  grpc::ByteBuffer* const response_bytes_;
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;  // held until the answer was sent
  ReceivedBytes received_;                 // the request, gRPC's until OnDone
  CallRecord record_;
  std::unique_ptr<PreparedInfer> prepared_;  // once parsed
};

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return new InferReactor(this, context, request, response);
}

// ---------------------------------------------------------------------------
// ModelStreamInfer: one request at a time, answered in order (read, run on a
// worker, write, read the next). A request that fails is answered with its
// error_message and the stream goes on; bytes that are no ModelInferRequest
// end it INVALID_ARGUMENT, as RunBidi. Only one operation is outstanding at any
// moment, so the reactor needs no lock.

class InferenceService::StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReactor(InferenceService* service, grpc::CallbackServerContext* context)
      : service_(service),
        stop_(CallStopCheck(context)),
        identity_(PeerIdentity(*context)),
        peer_(context->peer()),
        trace_(JoinCallTrace(*context)),
        watch_(service->engine_->idle().Watch(context)),
        reservation_(open_call_.Reservation()) {
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(stop_()));
      return;
    }
    ++messages_read_;
    absl::Status status = Guarded([&] {
      received_ = ReceivedBytes(&read_buffer_, reservation_.Sibling());
      RETURN_IF_ERROR(
          CheckReceivedBytes(read_buffer_, service_->engine_->options().max_message_bytes,
                             absl::StrCat("ModelStreamInfer: message ", messages_read_)));
      RETURN_IF_ERROR(received_.Reserve("ModelStreamInfer"));
      return service_->engine_->Submit([this] { Work(); });
    });
    if (!status.ok()) {
      received_.Release();
      CallRecord record;
      record.method = "ModelStreamInfer";
      record.identity = identity_;
      record.peer = peer_;
      record.trace = trace_;
      Answer(record, status, "");
    }
  }

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    reservation_.Release();
    if (!ok) {
      Finish(ToGrpcStatus(watch_->expired() ? service_->engine_->idle().IdleStatus()
                                            : WriteFailure(stop_)));
      return;
    }
    StartRead(&read_buffer_);
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // On a scheduler worker.
  void Work() {
    CallRecord record;
    record.method = "ModelStreamInfer";
    record.identity = identity_;
    record.peer = peer_;
    record.trace = trace_;
    std::string model;
    grpc::ByteBuffer answer;
    absl::Status status = Guarded([&] {
      const InferCall call{.engine = *service_->engine_,
                           .method = "ModelStreamInfer",
                           .stop = stop_,
                           .record = record,
                           .reservation = reservation_};
      return Infer(call, received_, &model, &answer);
    });
    received_.Release();
    if (status.code() == absl::StatusCode::kInvalidArgument &&
        absl::StrContains(status.message(), "are not a valid inference.ModelInferRequest")) {
      service_->engine_->RecordOutcome(record, status);
      Finish(ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("ModelStreamInfer: message ", messages_read_,
                       " is not a valid inference.ModelInferRequest; the stream ends here"))));
      return;
    }
    if (status.ok()) {
      // The answer is a ModelInferResponse; wrapped as field 2 of a
      // ModelStreamInferResponse without parsing it again.
      service_->engine_->RecordOutcome(record, status);
      Wrap(answer);
      watch_->Arm();  // the answer waits for the client from here
      StartWrite(&write_buffer_);
      return;
    }
    Answer(record, status, model);
  }

  // Writes the error answer for a request that failed.
  void Answer(const CallRecord& record, const absl::Status& status, const std::string& model) {
    service_->engine_->RecordOutcome(record, status);
    inference::ModelStreamInferResponse response;
    response.set_error_message(
        absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
    response.mutable_infer_response()->set_model_name(model);
    write_buffer_.Clear();
    bool own_buffer = false;
    grpc::SerializationTraits<inference::ModelStreamInferResponse>::Serialize(
        response, &write_buffer_, &own_buffer)
        .IgnoreError();
    // Held until written like any answer: its few hundred bytes (a bounded
    // message) from the request's reservation, or past the limit when the
    // request was refused before it was reserved, rather than lost.
    reservation_.HoldExactly(static_cast<int64_t>(write_buffer_.Length()));
    watch_->Arm();  // the answer waits for the client from here
    StartWrite(&write_buffer_);
  }

  // write_buffer_ = tag of field 2 (length-delimited), the length, `answer`.
  void Wrap(grpc::ByteBuffer& answer) {
    std::string header;
    header.push_back(static_cast<char>((2 << 3) | 2));
    uint64_t length = answer.Length();
    do {
      uint8_t byte = length & 0x7f;
      length >>= 7;
      if (length != 0) byte |= 0x80;
      header.push_back(static_cast<char>(byte));
    } while (length != 0);
    std::vector<grpc::Slice> slices;
    slices.emplace_back(header);
    std::vector<grpc::Slice> body;
    if (answer.Dump(&body).ok()) {
      for (grpc::Slice& slice : body) slices.push_back(std::move(slice));
    }
    write_buffer_ = grpc::ByteBuffer(slices.data(), slices.size());
  }

  InferenceService* const service_;
  const Engine::OpenCall open_call_{*service_->engine_, "ModelStreamInfer"};
  const StopCheck stop_;
  const std::string identity_;
  const std::string peer_;
  const TraceContext trace_;  // the stream's, for every request's log line
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;  // of the request or answer in flight
  int64_t messages_read_ = 0;
  grpc::ByteBuffer read_buffer_;
  ReceivedBytes received_;  // read_buffer_'s message, until it is parsed
  grpc::ByteBuffer write_buffer_;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(
    grpc::CallbackServerContext* context) {
  return new StreamReactor(this, context);
}

}  // namespace tensorop::server
