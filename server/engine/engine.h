// The engine under tensord's front ends: the native tensorop.v1 service
// (server/native/), the Open Inference Protocol over gRPC and HTTP
// (server/v2/) and RunChain reach the scheduler, the memory budget, the
// options, the open-call count and the outcome's record only through it
// (Triton's TRITONSERVER_Server in that role). A front end reads and writes
// its wire; what a request needs to run is the engine's.
#ifndef TENSOROP_SERVER_ENGINE_ENGINE_H_
#define TENSOROP_SERVER_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/transport/call_stop.h"
#include "server/transport/idle_watchdog.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

class Engine {
 public:
  // `scheduler` must outlive the engine and every call it started.
  Engine(const ServiceOptions& options, Scheduler* scheduler);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ServiceOptions& options() const { return options_; }
  Scheduler& scheduler() const { return *scheduler_; }
  // options().memory_budget, or an unbounded one.
  MemoryBudget& budget() const { return *budget_; }
  // Cancels calls whose client stops taking answers (--idle_timeout_seconds).
  IdleWatchdog& idle() { return idle_; }

  // Where `request` runs (backend, device), as the scheduler places it.
  absl::StatusOr<Placement> Place(const v1::RunRequest& request) const;
  // The context of a call of `request` through this engine's pipeline
  // (Execute): its options and scheduler, and the call's own parts; the
  // caller sets where inputs are besides the request (uploaded, handles,
  // received) and a plan made already.
  CallContext Call(const v1::RunRequest& request, Placement& placement, const StopCheck& stop,
                   MemoryBudget::Reservation& reservation) const {
    return CallContext{.request = request,
                       .options = options_,
                       .scheduler = *scheduler_,
                       .placement = placement,
                       .stop = stop,
                       .reservation = reservation};
  }
  // Queues `work` on a scheduler worker before the request is parsed; it
  // places the request itself with Place(). A non-OK status says why nothing
  // was queued.
  absl::Status Submit(std::function<void()> work);
  // Queues `work` for `request`, placed at `placement`: on a thread that
  // sleeps when idle unless the request may wait for a device slot
  // (Scheduler::Submit).
  absl::Status Submit(const v1::RunRequest& request, const Placement& placement,
                      std::function<void()> work);
  // Places `request` and queues `work` with that placement on a worker,
  // noting the placement in `record`.
  absl::Status Dispatch(const v1::RunRequest& request, CallRecord& record,
                        std::function<void(Placement&)> work);
  // Dispatch, but a request that is tiny work (PlanIfTiny) runs here, on the
  // calling thread: `work(placement, planned)`, with its plan; on a worker,
  // `planned` is null.
  absl::Status DispatchOrRunHere(const v1::RunRequest& request, CallRecord& record,
                                 const StopCheck& stop, const HandleAccess* handles,
                                 std::function<void(Placement&, PlannedRun*)> work);

  // A request planned to run on the thread that read it, and where.
  struct TinyRun {
    Placement placement;
    std::unique_ptr<PlannedRun> planned;
  };
  // `request` (its handles read with `handles`) placed and planned when it is
  // tiny work for the CPU (PlanIfTiny); nullopt for any other request, and
  // for one whose placement fails (a worker says why).
  std::optional<TinyRun> PlanTiny(const v1::RunRequest& request, const StopCheck& stop,
                                  const HandleAccess* handles) const;
  // Runs `work`, tiny work for the CPU, on the calling thread, counted in
  // flight (Scheduler::RunHere) and in requests_run_here(): its status, or
  // why it was not admitted.
  absl::Status RunHere(const std::function<absl::Status()>& work);

  // From a worker (Submit), for a front end without handles (v2): places
  // `call.request` (parsed, its bytes reserved in `call.reservation`) into
  // `call.placement` and executes it into `sink` with the caller's shared
  // memory regions (`record.identity` owns them; the context's handles are
  // not read). `record` learns where it ran and the bytes out; the caller
  // records the outcome (RecordOutcome). Inline (IntoResponse): a
  // request whose outputs go to shared memory.
  absl::Status ExecuteOnWorker(const CallContext& call, CallRecord& record,
                               const IntoResponse& sink);
  // As above, into output buffers that become the answer (IntoAnswerBuffers),
  // for a front end that hands them to gRPC without a copy
  // (SerializeWithOutputContents). `tiny`: the request as PlanTiny placed
  // and planned it, run here (RunHere).
  absl::StatusOr<OutputBuffers> ExecuteOnWorker(const CallContext& call, CallRecord& record,
                                                const IntoAnswerBuffers& sink,
                                                TinyRun* tiny = nullptr);

  // The one place a call's outcome is recorded: its request log line and, when
  // the server has them, its metrics.
  void RecordOutcome(const CallRecord& record, const absl::Status& status) const;

  // A front end's call counts in open_calls() from BeginOpenCall until
  // EndOpenCall (its reactor's OnDone), so a shutdown waits for it too.
  void BeginOpenCall() { open_calls_.fetch_add(1, std::memory_order_acq_rel); }
  void EndOpenCall() { open_calls_.fetch_sub(1, std::memory_order_acq_rel); }
  // BeginOpenCall while this lives, and the call's ledger of the budget: a
  // reactor's member, declared before any that holds its reservations, so
  // that its end, after theirs, checks they gave everything back.
  class OpenCall {
   public:
    // `method` names the call in the ledger's report.
    OpenCall(Engine& engine, absl::string_view method)
        : engine_(engine), ledger_(engine.budget(), std::string(method)) {
      engine_.BeginOpenCall();
    }
    ~OpenCall() { engine_.EndOpenCall(); }
    OpenCall(const OpenCall&) = delete;
    OpenCall& operator=(const OpenCall&) = delete;

    // An empty reservation counted in the call's ledger.
    MemoryBudget::Reservation Reservation() const { return ledger_.Empty(); }

   private:
    Engine& engine_;
    const MemoryBudget::CallLedger ledger_;
  };
  // Calls open now: a shutdown waits for them before it sends GOAWAY, since
  // gRPC closes a connection as soon as its last call ends after one.
  int open_calls() const { return open_calls_.load(std::memory_order_acquire); }

  // Run calls answered in the reaction with the bytes their requests carried
  // (server/native/run_reactor.cc): no kernel, no copy, no worker.
  void CountForwardedAnswer() { forwarded_answers_.fetch_add(1, std::memory_order_relaxed); }
  int64_t forwarded_answers() const { return forwarded_answers_.load(std::memory_order_relaxed); }
  // Run, RunBidi and ModelInfer requests run on the thread that read them
  // (RunHere).
  int64_t requests_run_here() const { return run_here_.load(std::memory_order_relaxed); }

 private:
  const ServiceOptions options_;
  Scheduler* const scheduler_;
  MemoryBudget unbounded_{std::numeric_limits<int64_t>::max()};
  MemoryBudget* const budget_;
  IdleWatchdog idle_;
  std::atomic<int> open_calls_{0};
  std::atomic<int64_t> forwarded_answers_{0};
  std::atomic<int64_t> run_here_{0};
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_ENGINE_ENGINE_H_
