// TensorOp.RunStream: one request, each output as a header then data chunks;
// TensorOp.RunChain, its results alike; TensorOp.Fetch, a handle's bytes alike.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/engine/chain.h"
#include "server/memory/memory_budget.h"
#include "server/memory/received_bytes.h"
#include "server/native/result_writer.h"
#include "server/native/service.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/raw_unary.h"
#include "server/pipeline/response_writer.h"
#include "server/placement/scheduler.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/request_log.h"
#include "server/transport/idle_watchdog.h"
#include "server/wire/convert.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {

// ---------------------------------------------------------------------------
// The streamed methods: one reactor each over what they share.

// A call answered with a stream of result parts: its record, reservation,
// idle watch and handle access, and the writer that sends the parts and
// finishes the call. A method's reactor says how its result is computed
// (Compute, on a scheduler worker) or hands a ready one to the writer.
class TensorOpService::StreamReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    if (!ok) {
      writer_.Fail(watch_->expired() ? engine().idle().IdleStatus() : WriteFailure(stop_));
      return;
    }
    writer_.WriteNext();
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 protected:
  StreamReactor(TensorOpService* service, grpc::CallbackServerContext* context, CallRecord record)
      : service_(service),
        open_call_(service->engine_, record.method),
        stop_(CallStopCheck(context)),
        watch_(service->engine_.idle().Watch(context)),
        reservation_(open_call_.Reservation()),
        handles_{.store = service->engine_.options().handles, .caller = CallerOf(*context)},
        record_(std::move(record)) {}
  ~StreamReactor() override = default;

  // The result, on a scheduler worker. A result on the CPU may start going
  // out while it is computed (`streaming`, pipeline.h).
  virtual absl::StatusOr<ResultParts> Compute(StreamWhileComputing* streaming) = 0;

  // Queues Compute on a worker (the last thing a method's constructor does:
  // the worker may start at once); the call ends when it cannot be queued.
  void ComputeOnWorker() {
    const absl::Status queued = Guarded([&] { return engine().Submit([this] { Work(); }); });
    if (!queued.ok()) Done(queued);
  }

  // Reserves `request`, the call's bytes as received (`received_` from here),
  // then ComputeOnWorker.
  void ReserveAndCompute(const grpc::ByteBuffer* request) {
    received_ = ReceivedBytes(request, reservation_.Sibling());
    const absl::Status reserved = Guarded([&] {
      RETURN_IF_ERROR(
          CheckReceivedBytes(*request, engine().options().max_message_bytes, record_.method));
      return received_.Reserve(record_.method);
    });
    if (!reserved.ok()) {
      Done(reserved);
      return;
    }
    ComputeOnWorker();
  }

  // The parsed request's record, keeping when the call started, who made it
  // and its trace.
  void Describe(CallRecord described) { Redescribe(record_, std::move(described)); }

  Engine& engine() const { return service_->engine_; }

  TensorOpService* const service_;
  const Engine::OpenCall open_call_;
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  ReceivedBytes received_;  // the request, gRPC's until OnDone
  const HandleAccess handles_;
  CallRecord record_;
  ResultWriter writer_{[this](const grpc::ByteBuffer* part) {
                         watch_->Arm();
                         StartWrite(part);
                       },
                       [this](const absl::Status& status, int64_t bytes_out) {
                         if (status.ok()) record_.bytes_out = bytes_out;
                         Done(status);
                       }};

 private:
  void Work() {
    // A RunStream result on the CPU starts going out while it is computed
    // (from 4 chunks: smaller ones gain nothing from the overlap).
    StreamWhileComputing streaming = writer_.Streaming(4 * engine().options().chunk_bytes);
    std::optional<ResultParts> computed;
    absl::Status status = Guarded([&]() -> absl::Status {
      ASSIGN_OR_RETURN(computed, Compute(&streaming));
      return absl::OkStatus();
    });
    if (streaming.started) {
      // The writer runs already; it finishes the call once this ends.
      streaming.progress->Finish(status);
      return;
    }
    if (!status.ok()) {
      Done(status);
      return;
    }
    writer_.Start(*std::move(computed));
  }

  void Done(const absl::Status& status) {
    engine().RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }
};

// RunStream; and a Fetch of a handle into another layout, which is the
// RunStream request the server made (`own_request`), named "Fetch".
class TensorOpService::RunStreamReactor final : public StreamReactor {
 public:
  // `request`: the call's bytes, owned by gRPC; or null for `own_request`.
  // `method`: a literal (CallRecord keeps a view of it, which the request log
  // formats after the reactor is gone).
  RunStreamReactor(TensorOpService* service, grpc::CallbackServerContext* context,
                   const grpc::ByteBuffer* request, absl::string_view method = "RunStream",
                   grpc::ByteBuffer own_request = grpc::ByteBuffer())
      : StreamReactor(service, context, CallOrigin(*context, method)),
        own_request_(std::move(own_request)) {
    ReserveAndCompute(request != nullptr ? request : &own_request_);
  }

 private:
  absl::StatusOr<ResultParts> Compute(StreamWhileComputing* streaming) override {
    const absl::string_view method = record_.method;
    // Large inputs are read where they were received, as Run's are.
    RETURN_IF_ERROR(
        ParseReceivedRun(received_, method, reservation_, engine().options().buffer_pool, &run_));
    CallRecord described = DescribeRequest(method, run_.request);
    if (method == "Fetch") described.op.clear();  // a Fetch in a layout: no operator asked
    Describe(std::move(described));
    record_.bytes_in += run_.data_bytes;
    ASSIGN_OR_RETURN(Placement placement, engine().Place(run_.request));
    record_.backend = placement.label;
    CallContext call = engine().Call(run_.request, placement, stop_, reservation_);
    call.uploaded = &run_.uploaded;
    call.handles = &handles_;
    call.received = &run_.received;
    absl::StatusOr<ResultParts> parts =
        Execute(call, IntoParts{.record = &record_, .streaming = streaming});
    run_.Free();  // the inputs are done with; only the outputs stream
    return parts;
  }

  grpc::ByteBuffer own_request_;  // a Fetch's, as the server made it
  ReceivedRun run_;               // the request, its input bytes apart
};

// RunChain: the steps executed by the engine (server/engine/chain.h).
class TensorOpService::RunChainReactor final : public StreamReactor {
 public:
  RunChainReactor(TensorOpService* service, grpc::CallbackServerContext* context,
                  const grpc::ByteBuffer* request)
      : StreamReactor(service, context, CallOrigin(*context, "RunChain")) {
    ReserveAndCompute(request);
  }

 private:
  absl::StatusOr<ResultParts> Compute(StreamWhileComputing*) override {
    v1::RunChainRequest chain;
    RETURN_IF_ERROR(ParseChainRequest(received_.bytes(), record_.method, reservation_, &chain));
    received_.Release();
    Describe(DescribeChain(record_.method, chain));
    // Placed as a request of the chain's backend and device.
    v1::RunRequest where;
    where.set_backend(chain.backend());
    if (chain.has_device_index()) where.set_device_index(chain.device_index());
    ASSIGN_OR_RETURN(Placement placement, engine().Place(where));
    record_.backend = placement.label;
    return ExecuteChainIntoParts(chain, engine(), placement, stop_, reservation_, record_,
                                 &handles_);
  }
};

// A Fetch of a handle in its own layout: its bytes as they lie (a ready
// result), or downloaded from its OpenCL device by a worker, then streamed.
class TensorOpService::FetchReactor final : public StreamReactor {
 public:
  // `record` describes the Fetch (it has no request bytes to reserve).
  FetchReactor(TensorOpService* service, grpc::CallbackServerContext* context, CallRecord record,
               ResultParts parts)
      : StreamReactor(service, context, std::move(record)) {
    writer_.Start(std::move(parts));
  }
  FetchReactor(TensorOpService* service, grpc::CallbackServerContext* context, CallRecord record,
               std::shared_ptr<const ResidentTensor> on_device)
      : StreamReactor(service, context, std::move(record)), download_(std::move(on_device)) {
    ComputeOnWorker();
  }

 private:
  absl::StatusOr<ResultParts> Compute(StreamWhileComputing*) override {
    const ResidentTensor& tensor = *download_;
    const Layout& layout = tensor.layout();
    ASSIGN_OR_RETURN(
        OutputBuffer buffer,
        AllocateOutput(layout, engine().options().buffer_pool, reservation_,
                       absl::StrCat("Fetch: the ", layout.buffer_bytes(), " bytes of handle ",
                                    ShortId(tensor.id()), " from its OpenCL device")));
    RETURN_IF_ERROR(handles_.store->Download(
        tensor, {buffer.get(), static_cast<size_t>(layout.buffer_bytes())}, stop_));
    download_.reset();
    Outputs outputs;
    outputs.layouts.push_back(layout);
    outputs.buffers.push_back(Share(std::move(buffer)));
    return ResultParts(std::move(outputs), record_.backend, engine().options().chunk_bytes);
  }

  std::shared_ptr<const ResidentTensor> download_;  // until downloaded
};

namespace {

// A streamed call refused before it started.
class RefusedWrite final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedWrite(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// How a Fetch is answered: the handle's bytes as they lie when they are in the
// layout asked for (sent as slices of the resident buffer, no copy), else the
// RunStream request that copies them into it: an identity strided_slice
// (empty begin and end take every dimension whole) on the CPU, where the
// handle's bytes are.
struct FetchPlan {
  std::shared_ptr<const ResidentTensor> tensor;
  bool as_is = false;
  grpc::ByteBuffer copy_request;
};

// The request is parsed within `budget` (ParseMessage), as every method's is,
// here in the reaction: its fields are an id and strides, so one larger than a
// raw unary request is refused unparsed (a flood of fields would otherwise
// hold gRPC's thread while the bound counts them).
absl::StatusOr<FetchPlan> PlanFetch(const grpc::ByteBuffer& bytes, HandleStore* store,
                                    const HandleCaller& caller, MemoryBudget& budget,
                                    int64_t max_message_bytes) {
  RETURN_IF_ERROR(
      CheckRawRequestBytes(static_cast<int64_t>(bytes.Length()), max_message_bytes, "Fetch"));
  MemoryBudget::Reservation parsing = budget.Empty();
  v1::FetchRequest fetch;
  RETURN_IF_ERROR(ParseMessage(bytes, "Fetch", parsing, &fetch));
  if (store == nullptr) return absl::FailedPreconditionError("this server keeps no handles");
  FetchPlan plan;
  ASSIGN_OR_RETURN(plan.tensor, store->Use(caller, fetch.id(), "id"));
  const Layout& layout = plan.tensor->layout();
  const std::vector<int64_t> asked =
      fetch.strides().empty()
          ? PackedStrides(layout.sizes)
          : std::vector<int64_t>(fetch.strides().begin(), fetch.strides().end());
  if (asked == layout.strides) {
    plan.as_is = true;
    return plan;
  }
  const bool on_device = plan.tensor->on_device();
  if (layout.sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("strides has ", fetch.strides_size(),
                                                   " entries; handle ", ShortId(fetch.id()),
                                                   " has rank 0"));
  }
  v1::RunRequest request;
  request.set_id(absl::StrCat("fetch ", ShortId(fetch.id())));
  request.mutable_strided_slice();
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.mutable_handle()->set_id(fetch.id());
  // The handle's own dtype and sizes (the request may name them): the log
  // line says what was fetched.
  input.set_dtype(ToProtoDType(layout.dtype));
  input.mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
  v1::OutputDesc* output = request.add_outputs();
  output->mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
  *output->mutable_strides() = fetch.strides();
  // Copied where the bytes are: on a device, the copy's output is downloaded.
  request.set_backend(on_device ? v1::OPENCL : v1::CPU);
  if (on_device) request.set_device_index(plan.tensor->device_index());
  SerializeInto(request, &plan.copy_request);
  return plan;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorOpService::Fetch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  FetchPlan plan;
  absl::Status status = Guarded([&] {
    ASSIGN_OR_RETURN(plan, PlanFetch(*request, engine_.options().handles, CallerOf(*context),
                                     engine_.budget(), engine_.options().max_message_bytes));
    return absl::OkStatus();
  });
  if (!status.ok()) {
    engine_.RecordOutcome(CallOrigin(*context, "Fetch"), status);
    return new RefusedWrite(status);
  }
  if (!plan.as_is) {
    return new RunStreamReactor(this, context, nullptr, "Fetch", std::move(plan.copy_request));
  }
  const ResidentTensor& tensor = *plan.tensor;
  if (tensor.on_device()) {
    CallRecord record;
    record.method = "Fetch";
    record.id = ShortId(tensor.id());
    SetCallOrigin(*context, record);
    record.backend = engine_.options().handles->options().devices->Label(tensor.device_index());
    return new FetchReactor(this, context, std::move(record), std::move(plan.tensor));
  }
  Outputs outputs;
  outputs.layouts.push_back(tensor.layout());
  // A slice of the resident buffer keeps the tensor alive, not a copy.
  outputs.buffers.emplace_back(plan.tensor, const_cast<std::byte*>(tensor.bytes().data()));
  CallRecord record;
  record.method = "Fetch";
  record.id = ShortId(tensor.id());
  SetCallOrigin(*context, record);
  record.backend = "cpu";
  return new FetchReactor(this, context, std::move(record),
                          ResultParts(std::move(outputs), "cpu", engine_.options().chunk_bytes));
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorOpService::RunStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new RunStreamReactor(this, context, request);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorOpService::RunChain(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new RunChainReactor(this, context, request);
}

}  // namespace tensorop::server
