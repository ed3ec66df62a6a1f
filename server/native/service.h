// The tensorop.v1.TensorOp gRPC service on the callback API. Reactions never
// block: every request is planned and executed by a scheduler task, which also
// finishes the call (or starts its writes).
#ifndef TENSOROP_SERVER_NATIVE_SERVICE_H_
#define TENSOROP_SERVER_NATIVE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/limits.h"
#include "server/data/shared_memory.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/response_writer.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/transport/call_stop.h"
#include "server/transport/idle_watchdog.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

struct PlannedRun;
struct HandleAccess;
class RequestDataView;
struct UploadedInputs;

// Every method reads raw bytes and parses them here (unary ones answered at
// once through server/pipeline/raw_unary.h): with typed reads gRPC reports a message
// that does not parse exactly like the client's half-close (streams), or
// answers UNIMPLEMENTED with no message (unary), and it parses before the
// memory budget can be asked.
using ServiceBase =
    v1::TensorOp::WithRawCallbackMethod_Run<v1::TensorOp::WithRawCallbackMethod_RunStream<
        v1::TensorOp::WithRawCallbackMethod_RunBidi<v1::TensorOp::WithRawCallbackMethod_RunChunked<
            v1::TensorOp::WithRawCallbackMethod_RegisterSharedMemory<
                v1::TensorOp::WithRawCallbackMethod_UnregisterSharedMemory<
                    v1::TensorOp::WithRawCallbackMethod_SharedMemoryStatus<
                        v1::TensorOp::WithRawCallbackMethod_Put<
                            v1::TensorOp::WithRawCallbackMethod_Fetch<
                                v1::TensorOp::WithRawCallbackMethod_Release<
                                    v1::TensorOp::WithRawCallbackMethod_ListHandles<
                                        v1::TensorOp::WithRawCallbackMethod_RunChain<
                                            v1::TensorOp::Service>>>>>>>>>>>>;

class TensorOpService final : public ServiceBase {
 public:
  // `scheduler` must outlive the service and every call it started.
  TensorOpService(const ServiceOptions& options, Scheduler* scheduler);

  // One request, every output inline.
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  // One request, each output as a header then data chunks.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* RunStream(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;
  // RunRequests in, RunResponses out in completion order.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RunBidi(
      grpc::CallbackServerContext* context) override;
  // A RequestPart stream (request, then input chunks) answered like RunStream.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RunChunked(
      grpc::CallbackServerContext* context) override;
  // Shared memory regions (server/data/shared_memory.h), answered at once
  // (server/pipeline/raw_unary.h).
  grpc::ServerUnaryReactor* RegisterSharedMemory(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SharedMemoryStatus(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;

  // Handles (server/data/handle_store.h): a tensor uploaded to stay (a header, then
  // chunks), streamed back like RunStream, released, listed.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Put(grpc::CallbackServerContext* context,
                                                 grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Fetch(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListHandles(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Steps run in order on one backend (server/native/chain.h), the results streamed
  // back like RunStream.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* RunChain(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;

  // Calls of the four Run methods open now (reactor made, OnDone not yet run):
  // a shutdown waits for them before it sends GOAWAY, since gRPC closes a
  // connection as soon as its last call ends after one.
  int open_calls() const { return open_calls_.load(std::memory_order_acquire); }
  // Run calls answered in the reaction with the bytes their requests carried
  // (run_reactor.cc): no kernel, no copy, no worker.
  int64_t forwarded_answers() const { return forwarded_answers_.load(std::memory_order_relaxed); }
  // Run, RunBidi and ModelInfer requests run on the thread that read them
  // (RunHere).
  int64_t requests_run_here() const { return run_here_.load(std::memory_order_relaxed); }

  // The native pipeline for another front end (server/v2/inference_service.h).
  // SubmitTask queues `work` on a scheduler worker (a non-OK status says why
  // nothing was queued). From such a task, ExecuteOnWorker places `request`
  // (parsed, its bytes reserved in `reservation`) and executes it like a
  // RunBidi request, its outputs inline in `response` (packed unless the
  // request asks for strides), refused before any work when the answer would
  // pass --max_message_bytes (`too_big_hint` says what to do instead).
  // `record` learns where it ran and the bytes out; the caller records the
  // outcome (RecordOutcome).
  absl::Status SubmitTask(std::function<void()> work) { return Submit(std::move(work)); }
  // `uploaded`: input bytes held apart from `request` (server/pipeline/pipeline.h).
  absl::Status ExecuteOnWorker(const v1::RunRequest& request, CallRecord& record,
                               const StopCheck& stop, MemoryBudget::Reservation& reservation,
                               absl::string_view too_big_hint, v1::RunResponse* response,
                               const UploadedInputs* uploaded = nullptr);
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
  // As ExecuteOnWorker, into output buffers that become the answer
  // (ExecuteIntoAnswerBuffers), for a front end that hands them to gRPC
  // without a copy (SerializeWithOutputContents); `record.backend` says
  // where it ran. With `received` (the inputs' bytes where gRPC received
  // them, covered by `*received_reserved` of `reservation`), outputs that are
  // runs of those bytes are answered with them, taking that cover over
  // (ExecuteIntoAnswerBuffers). Not for a request writing to shared memory.
  // `tiny`: the request as PlanTiny planned it, run here (RunHere).
  absl::StatusOr<OutputBuffers> ExecuteIntoBuffersOnWorker(
      const v1::RunRequest& request, CallRecord& record, const StopCheck& stop,
      MemoryBudget::Reservation& reservation, absl::string_view too_big_hint,
      const UploadedInputs* uploaded = nullptr, const RequestDataView* received = nullptr,
      int64_t* received_reserved = nullptr, TinyRun* tiny = nullptr);
  // Another front end's call counts in open_calls() from BeginOpenCall until
  // EndOpenCall (its reactor's OnDone), so a shutdown waits for it too.
  void BeginOpenCall() { open_calls_.fetch_add(1, std::memory_order_acq_rel); }
  void EndOpenCall() { open_calls_.fetch_sub(1, std::memory_order_acq_rel); }
  // The one place a call's outcome is recorded: its request log line and, when
  // the server has them, its metrics.
  void RecordOutcome(const CallRecord& record, const absl::Status& status) const;
  const ServiceOptions& options() const { return options_; }
  // options().memory_budget, or an unbounded one.
  MemoryBudget& budget() const { return *budget_; }
  // Cancels calls whose client stops taking answers (--idle_timeout_seconds).
  IdleWatchdog& idle() { return idle_; }

 private:
  // Counts one reactor's life in open_calls_.
  class OpenCall {
   public:
    explicit OpenCall(std::atomic<int>& count) : count_(count) {
      count_.fetch_add(1, std::memory_order_acq_rel);
    }
    ~OpenCall() { count_.fetch_sub(1, std::memory_order_acq_rel); }
    OpenCall(const OpenCall&) = delete;
    OpenCall& operator=(const OpenCall&) = delete;

   private:
    std::atomic<int>& count_;
  };
  class UnaryReactor;
  class StreamReactor;
  class BidiReactor;
  class ChunkedReactor;
  class PutReactor;

  // Places `request` (backend, device) and queues `work` with that placement on
  // a scheduler worker, noting the placement in `record`. A non-OK status says
  // why nothing was queued.
  absl::Status Dispatch(const v1::RunRequest& request, CallRecord& record,
                        std::function<void(Placement&)> work);
  // Dispatch, but a request that is tiny work (PlanIfTiny) runs here, on the
  // calling thread: `work(placement, planned)`, with its plan; on a worker,
  // `planned` is null.
  absl::Status DispatchOrRunHere(const v1::RunRequest& request, CallRecord& record,
                                 const StopCheck& stop, const HandleAccess* handles,
                                 std::function<void(Placement&, PlannedRun*)> work);
  // Queues `work` on a scheduler worker before the request is parsed (Run,
  // RunStream parse there); it places the request itself with Place().
  absl::Status Submit(std::function<void()> work);
  // Queues `work` for `request`, placed at `placement`: on a thread that
  // sleeps when idle unless the request may wait for a device slot
  // (Scheduler::Submit).
  absl::Status Submit(const v1::RunRequest& request, const Placement& placement,
                      std::function<void()> work);
  absl::StatusOr<Placement> Place(const v1::RunRequest& request) const;

  const ServiceOptions options_;
  Scheduler* const scheduler_;
  // options_.memory_budget, or an unbounded one.
  MemoryBudget unbounded_{std::numeric_limits<int64_t>::max()};
  MemoryBudget* const budget_;
  IdleWatchdog idle_;
  std::atomic<int> open_calls_{0};
  std::atomic<int64_t> forwarded_answers_{0};
  std::atomic<int64_t> run_here_{0};
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_NATIVE_SERVICE_H_
