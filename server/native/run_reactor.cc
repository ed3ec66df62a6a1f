// TensorOp.Run: one request, every output inline (a unary reactor).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/memory/memory_budget.h"
#include "server/memory/received_bytes.h"
#include "server/native/service.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/response_writer.h"
#include "server/placement/scheduler.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/request_log.h"
#include "server/transport/idle_watchdog.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {

// ---------------------------------------------------------------------------
// Run
//
// The request's bytes are reserved in the reaction and parsed on a worker; the
// answer is serialized there and its reservation held until gRPC sent it
// (OnDone). An answer the client never takes ends CANCELLED after
// --idle_timeout_seconds, with a log line saying so.
//
// A request whose every output is a run of the bytes it carries (whole rows,
// an outer Split) needs no kernel. When parsing and planning it is light work
// (ParseReceivedRunIfLight) it is answered in the reaction with those bytes,
// which spares it the hop to a worker and back: about 5 % of a 1 MiB call
// when calls come one at a time (bench/NOTES.md, "Bulk data"). A request of
// at most kParseInReactionBytes is parsed in the reaction too, and runs there
// when its plan is a tiny copy on the CPU (PlanIfTiny); else a worker goes on.

class TensorOpService::UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  UnaryReactor(TensorOpService* service, grpc::CallbackServerContext* context,
               const grpc::ByteBuffer* request, grpc::ByteBuffer* response)
      : service_(service),
        response_bytes_(response),
        stop_(CallStopCheck(context)),
        watch_(service->engine_.idle().Watch(context)),
        reservation_(open_call_.Reservation()),
        received_(request, reservation_.Sibling()),
        handles_{.store = service->engine_.options().handles, .caller = CallerOf(*context)} {
    record_.method = "Run";
    SetCallOrigin(*context, record_);
    bool answered = false;
    absl::Status status = Guarded([&] {
      RETURN_IF_ERROR(CheckReceivedBytes(received_.bytes(),
                                         service_->engine_.options().max_message_bytes, "Run"));
      RETURN_IF_ERROR(received_.Reserve("Run"));
      ASSIGN_OR_RETURN(answered, AnswerInReaction());
      if (answered) return absl::OkStatus();
      auto work = [this] { Done(Guarded([&] { return Work(planned_.get()); })); };
      if (placed_.has_value()) {
        return service_->engine_.Submit(run_.request, *placed_, std::move(work));
      }
      return service_->engine_.Submit(std::move(work));
    });
    if (answered || !status.ok()) Done(status);
  }

  void OnDone() override {
    watch_->Done();
    // The call was recorded when its answer was ready (so a client holding the
    // answer finds it counted); an answer the client then never took gets a
    // second log line, not a second count.
    if (watch_->expired()) LogCall(record_, service_->engine_.idle().IdleStatus());
    delete this;
  }

 private:
  // The request's fields but its data bound the work of parsing it here.
  static constexpr size_t kMaxRestInReaction = 16 << 10;
  static constexpr absl::string_view kTooBigHint = "use RunStream for large results";

  // True when the request was answered with the bytes it carries; false, maybe
  // having parsed it (`parsed_`), when a worker is to go on.
  absl::StatusOr<bool> AnswerInReaction() {
    if (received_.length() <= kParseInReactionBytes) return RunHereIfTiny();
    ASSIGN_OR_RETURN(parsed_, ParseReceivedRunIfLight(received_, "Run", reservation_,
                                                      kMaxRestInReaction, &run_));
    if (!parsed_) return false;
    Describe();
    // Inputs and outputs elsewhere pin regions and handles: a worker's.
    for (const auto& [name, tensor] : run_.request.inputs()) {
      if (tensor.has_shared_memory() || tensor.has_handle()) return false;
    }
    if (WritesToSharedMemory(run_.request) || KeepsOutputs(run_.request)) return false;
    ASSIGN_OR_RETURN(Placement placement, service_->engine_.Place(run_.request));
    record_.backend = placement.label;
    placed_ = placement;
    tried_forwarding_ = true;
    CallContext call = Call(placement);
    call.received = &run_.received;
    ASSIGN_OR_RETURN(std::optional<OutputBuffers> outputs,
                     AnswerWithReceivedBytes(call, {.too_big_hint = kTooBigHint}, planned_));
    if (!outputs.has_value()) return false;
    Answer(*outputs, placement);
    service_->engine_.CountForwardedAnswer();
    return true;
  }

  // A small request, parsed and placed here: run here too when its plan is
  // tiny work for the CPU, the plan going with it; else left to a worker.
  absl::StatusOr<bool> RunHereIfTiny() {
    RETURN_IF_ERROR(ParseReceivedRun(received_, "Run", reservation_,
                                     service_->engine_.options().buffer_pool, &run_));
    parsed_ = true;
    Describe();
    ASSIGN_OR_RETURN(Placement placement, service_->engine_.Place(run_.request));
    record_.backend = placement.label;
    placed_ = placement;
    std::unique_ptr<PlannedRun> planned =
        PlanIfTiny(run_.request, service_->engine_.options(), service_->engine_.scheduler(),
                   placement, stop_, &handles_);
    if (planned == nullptr) return false;
    RETURN_IF_ERROR(service_->engine_.RunHere([&] { return Work(planned.get()); }));
    return true;
  }

  // On a scheduler worker, with the plan made in the reaction when there was
  // one; or in the reaction, with the request's tiny plan (`planned`, else
  // null: planned here).
  absl::Status Work(PlannedRun* planned = nullptr) {
    if (!parsed_) {
      RETURN_IF_ERROR(ParseReceivedRun(received_, "Run", reservation_,
                                       service_->engine_.options().buffer_pool, &run_));
      Describe();
    }
    // Placed in the reaction when parsed there: the placement that chose this worker.
    Placement placement;
    if (placed_.has_value()) {
      placement = *placed_;
    } else {
      ASSIGN_OR_RETURN(placement, service_->engine_.Place(run_.request));
    }
    record_.backend = placement.label;
    if (WritesToSharedMemory(run_.request) || KeepsOutputs(run_.request)) {
      return WorkWithOutputsElsewhere(placement);
    }
    CallContext call = Call(placement);
    if (!tried_forwarding_) call.received = &run_.received;
    call.planned = planned;
    absl::StatusOr<OutputBuffers> outputs = Execute(call, IntoAnswerBuffers{kTooBigHint});
    record_.backend = placement.label;
    RETURN_IF_ERROR(outputs.status());
    Answer(*outputs, placement);
    return absl::OkStatus();
  }

  // The request's call through the pipeline, its inputs where this call
  // holds them: uploaded pieces and the caller's handles.
  CallContext Call(Placement& placement) {
    CallContext call = service_->engine_.Call(run_.request, placement, stop_, reservation_);
    call.uploaded = &run_.uploaded;
    call.handles = &handles_;
    return call;
  }

  // The call's record, from the parsed request.
  void Describe() {
    Redescribe(record_, DescribeRequest("Run", run_.request));
    record_.bytes_in += run_.data_bytes;
  }

  void Answer(OutputBuffers& outputs, const Placement& placement) {
    record_.backend = placement.label;
    record_.bytes_out = TotalBytes(outputs.layouts);
    // The outputs go to gRPC as they are; they stay reserved until OnDone.
    SerializeRunResponse(run_.request.id(), outputs, placement.label, /*status=*/nullptr,
                         response_bytes_);
    // The inputs are done with: freed now rather than when the client took the
    // answer, so a client's next call does not find this one's bytes still held.
    run_.Free();
  }

  // Outputs in shared memory or kept: the answer carries their layouts (and
  // handles) only, so it is a small protobuf serialized as usual.
  absl::Status WorkWithOutputsElsewhere(Placement& placement) {
    v1::RunResponse response;
    absl::Status status =
        Execute(Call(placement), IntoResponse{.response = &response, .too_big_hint = kTooBigHint});
    record_.backend = placement.label;
    RETURN_IF_ERROR(status);
    response.set_id(run_.request.id());
    response.set_backend(placement.label);
    record_.bytes_out = ResponseDataBytes(response);
    SerializeInto(response, response_bytes_);
    // The response's outputs go with it; their serialized copy stays reserved.
    reservation_.Shrink(record_.bytes_out);
    run_.Free();
    return absl::OkStatus();
  }

  void Done(const absl::Status& status) {
    service_->engine_.RecordOutcome(record_, status);
    watch_->Arm();  // the answer waits for the client from here
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const Engine::OpenCall open_call_{service_->engine_, "Run"};
  grpc::ByteBuffer* const response_bytes_;
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  ReceivedBytes received_;  // the request, gRPC's until OnDone
  const HandleAccess handles_;
  ReceivedRun run_;  // the request, its input bytes apart
  bool parsed_ = false;
  bool tried_forwarding_ = false;  // AnswerWithReceivedBytes said no
  // The plan AnswerWithReceivedBytes made, for the worker to run.
  std::unique_ptr<PlannedRun> planned_;
  // Placed in the reaction: the worker to hand it to.
  std::optional<Placement> placed_;
  CallRecord record_;
};

grpc::ServerUnaryReactor* TensorOpService::Run(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return new UnaryReactor(this, context, request, response);
}

}  // namespace tensorop::server
