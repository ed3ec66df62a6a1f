#include "server/engine/engine.h"

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/telemetry/metrics.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {

Engine::Engine(const ServiceOptions& options, Scheduler* scheduler)
    : options_(options),
      scheduler_(scheduler),
      budget_(options.memory_budget != nullptr ? options.memory_budget : &unbounded_),
      idle_(options.idle_timeout) {}

void Engine::RecordOutcome(const CallRecord& record, const absl::Status& status) const {
  // One clock reading, so the log's latency and the histogram's agree.
  const absl::Time end = absl::Now();
  if (options_.metrics != nullptr) {
    options_.metrics->RecordCall(record, status.code(), end - record.start);
  }
  LogCall(record, status, end);
}

absl::StatusOr<Placement> Engine::Place(const v1::RunRequest& request) const {
  return scheduler_->Place(request.backend(), RequestedDevice(request));
}

absl::Status Engine::Submit(std::function<void()> work) {
  return scheduler_->Submit(std::move(work));
}

absl::Status Engine::Submit(const v1::RunRequest& request, const Placement& placement,
                            std::function<void()> work) {
  // AUTO runs pinned to the device that holds a resident input or is to keep
  // an output, and may wait for a slot there as OPENCL does.
  if (placement.device == Device::kAuto && (ReadsHandles(request) || KeepsOutputs(request))) {
    return scheduler_->Submit(std::move(work));
  }
  return scheduler_->Submit(placement, std::move(work));
}

absl::Status Engine::Dispatch(const v1::RunRequest& request, CallRecord& record,
                              std::function<void(Placement&)> work) {
  absl::StatusOr<Placement> placement = Place(request);
  if (!placement.ok()) return placement.status();
  record.backend = placement->label;
  return Submit(request, *placement,
                [work = std::move(work), placement = *placement]() mutable { work(placement); });
}

absl::Status Engine::DispatchOrRunHere(const v1::RunRequest& request, CallRecord& record,
                                       const StopCheck& stop, const HandleAccess* handles,
                                       std::function<void(Placement&, PlannedRun*)> work) {
  ASSIGN_OR_RETURN(Placement placement, Place(request));
  record.backend = placement.label;
  if (std::unique_ptr<PlannedRun> planned =
          PlanIfTiny(request, options_, *scheduler_, placement, stop, handles)) {
    return RunHere([&] {
      work(placement, planned.get());
      return absl::OkStatus();
    });
  }
  return Submit(request, placement,
                [work = std::move(work), placement]() mutable { work(placement, nullptr); });
}

std::optional<Engine::TinyRun> Engine::PlanTiny(const v1::RunRequest& request,
                                                const StopCheck& stop,
                                                const HandleAccess* handles) const {
  absl::StatusOr<Placement> placement = Place(request);
  if (!placement.ok()) return std::nullopt;
  std::unique_ptr<PlannedRun> planned =
      PlanIfTiny(request, options_, *scheduler_, *placement, stop, handles);
  if (planned == nullptr) return std::nullopt;
  return TinyRun{.placement = *placement, .planned = std::move(planned)};
}

absl::Status Engine::RunHere(const std::function<absl::Status()>& work) {
  absl::Status status;
  RETURN_IF_ERROR(scheduler_->RunHere([&] {
    run_here_.fetch_add(1, std::memory_order_relaxed);  // counted before its answer goes out
    status = work();
  }));
  return status;
}

namespace {

// The v2 front ends keep no handles; their caller still owns the shared
// memory regions the request uses (the identity the request log records).
HandleAccess CallerAccess(const CallRecord& record) {
  return HandleAccess{
      .store = nullptr,
      .caller = HandleCaller{.name = record.identity, .authenticated = !record.identity.empty()}};
}

}  // namespace

absl::Status Engine::ExecuteOnWorker(const CallContext& call, CallRecord& record,
                                     const IntoResponse& sink) {
  ASSIGN_OR_RETURN(call.placement, Place(call.request));
  record.backend = call.placement.label;
  const HandleAccess caller = CallerAccess(record);
  CallContext with_caller = call;
  with_caller.handles = &caller;
  absl::Status status = Execute(with_caller, sink);
  record.backend = call.placement.label;
  RETURN_IF_ERROR(status);
  sink.response->set_id(call.request.id());
  sink.response->set_backend(call.placement.label);
  record.bytes_out = ResponseDataBytes(*sink.response);
  return absl::OkStatus();
}

absl::StatusOr<OutputBuffers> Engine::ExecuteOnWorker(const CallContext& call, CallRecord& record,
                                                      const IntoAnswerBuffers& sink,
                                                      TinyRun* tiny) {
  const HandleAccess caller = CallerAccess(record);
  CallContext with_caller = call;
  with_caller.handles = &caller;
  if (tiny != nullptr) {
    call.placement = tiny->placement;
    with_caller.planned = tiny->planned.get();
  } else {
    ASSIGN_OR_RETURN(call.placement, Place(call.request));
  }
  record.backend = call.placement.label;
  absl::StatusOr<OutputBuffers> outputs = Execute(with_caller, sink);
  record.backend = call.placement.label;
  if (outputs.ok()) record.bytes_out = TotalBytes(outputs->layouts);
  return outputs;
}

}  // namespace tensorop::server
