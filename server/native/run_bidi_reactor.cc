// TensorOp.RunBidi: RunRequests in, RunResponses out in completion order, the
// flow control decided by server/native/bidi_flow.h.
#include <deque>
#include <memory>
#include <mutex>
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
#include "server/memory/memory_budget.h"
#include "server/native/bidi_flow.h"
#include "server/native/service.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/response_writer.h"
#include "server/placement/scheduler.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/request_log.h"
#include "server/transport/idle_watchdog.h"
#include "server/wire/quoted.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {

// ---------------------------------------------------------------------------
// RunBidi
//
// Every request read is reserved, parsed and submitted at once and the next
// read started; answers are serialized by the tasks, queued with their
// reservations as tasks finish, and written one at a time. A request that
// fails (over the budget, an answer over the message limit, a bad request)
// gets its own error answer and the stream goes on. The stream finishes when
// the client half-closed (or sent bytes that do not parse, or went away) and
// every task has answered. The decisions are flow_'s (server/native/bidi_flow.h, its
// states and transitions), fed under mu_; the gRPC calls they lead to
// (StartRead, StartWrite, Finish) are made after releasing it, because gRPC
// may run a reaction inline inside them. Once a thread decided to Finish, no
// one touches the reactor again: OnDone may delete it at any time.

class TensorOpService::BidiReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BidiReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service),
        stop_(CallStopCheck(context)),
        identity_(PeerIdentity(*context)),
        peer_(context->peer()),
        trace_(JoinCallTrace(*context)),
        handles_{.store = service->engine_.options().handles, .caller = CallerOf(*context)},
        watch_(service->engine_.idle().Watch(context)) {
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
    MemoryBudget::Reservation reservation = open_call_.Reservation();
    const absl::Status parsed = Guarded([&] {
      const std::string what = absl::StrCat("RunBidi: message ", messages_read_);
      RETURN_IF_ERROR(
          CheckReceivedBytes(read_buffer_, service_->engine_.options().max_message_bytes, what));
      return ParseRequest(read_buffer_, what, reservation, request.get());
    });
    read_buffer_.Clear();
    if (parsed.code() == absl::StatusCode::kInvalidArgument) {
      const absl::Status status = absl::InvalidArgumentError(
          absl::StrCat("RunBidi: message ", messages_read_,
                       " is not a valid tensorop.v1.RunRequest; the stream ends here"));
      CallRecord record;
      record.method = "RunBidi";
      service_->engine_.RecordOutcome(Origin(std::move(record)), status);
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
    if (!parsed.ok()) {
      // Over the budget: answered at once, without its request (not parsed).
      CallRecord record;
      record.method = "RunBidi";
      Answer(*request, std::move(record), parsed, v1::RunResponse(), std::move(reservation));
    } else if (absl::Status id = CheckIdBytes(request->id(), "id"); !id.ok()) {
      // This request's error, not the stream's: answered without the id (it
      // cannot be echoed), and the stream goes on.
      request->clear_id();
      Answer(*request, DescribeRequest("RunBidi", *request), id, v1::RunResponse(),
             std::move(reservation));
    } else {
      Submit(std::move(request), std::move(reservation));
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
        step.finish =
            watch_->expired() ? service_->engine_.idle().IdleStatus() : WriteFailure(stop_);
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
        service_->engine_.RecordOutcome(Origin(std::move(record)), *step.finish);
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
    auto held = std::make_shared<MemoryBudget::Reservation>(std::move(reservation));
    // A tiny request runs in this reaction: a hop to a worker and back per
    // request cost a pipelined stream of them a quarter of its CPU.
    absl::Status status = service_->engine_.DispatchOrRunHere(
        *request, record, stop_, &handles_,
        [this, request, record, held](Placement& placement, PlannedRun* planned) mutable {
          v1::RunResponse response;
          CallContext call = service_->engine_.Call(*request, placement, stop_, *held);
          call.handles = &handles_;
          call.planned = planned;
          absl::Status status = Execute(
              call, IntoResponse{.response = &response,
                                 .with_status = true,
                                 .too_big_hint = "use RunStream or RunChunked for large results"});
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
    record = Origin(std::move(record));
    response.set_id(request.id());
    response.mutable_status()->set_code(static_cast<int32_t>(ToGrpcCode(status.code())));
    response.mutable_status()->set_message(std::string(status.message()));
    if (status.ok()) record.bytes_out = ResponseDataBytes(response);
    service_->engine_.RecordOutcome(record, status);
    Queued queued;
    const absl::Status serialized = Guarded([&] {
      SerializeInto(response, &queued.bytes);
      return absl::OkStatus();
    });
    // Held until written, error answers too: the request's reservation
    // (parse and overhead) covers an error answer, whose id and message are
    // bounded; one refused before its request was reserved holds its few
    // hundred bytes past the limit rather than being lost.
    reservation.HoldExactly(static_cast<int64_t>(queued.bytes.Length()));
    queued.reservation = std::move(reservation);
    Step step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      step = StepsLocked(flow_.AnswerReady(serialized.ok()), &queued);
    }
    Take(std::move(step));
  }

  TensorOpService* const service_;
  const Engine::OpenCall open_call_{service_->engine_, "RunBidi"};
  const StopCheck stop_;
  // `record` with the stream's caller: who, the trace it joined, from where.
  CallRecord Origin(CallRecord record) const {
    record.identity = identity_;
    record.trace = trace_;
    record.peer = peer_;
    return record;
  }

  const std::string identity_;  // who called, for every request's log line
  const std::string peer_;      // from where, likewise
  const TraceContext trace_;    // the trace the stream joined, likewise
  const HandleAccess handles_;  // whose handles its requests use and keep
  const std::shared_ptr<IdleWatch> watch_;
  int64_t messages_read_ = 0;  // only touched by reactions, never concurrently
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_buffer_;

  std::mutex mu_;
  BidiFlow flow_;
  std::deque<Queued> queue_;                       // the answers flow_ counts as queued, in order
  MemoryBudget::Reservation writing_reservation_;  // of the answer being written
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunBidi(
    grpc::CallbackServerContext* context) {
  return new BidiReactor(this, context);
}

}  // namespace tensorop::server
