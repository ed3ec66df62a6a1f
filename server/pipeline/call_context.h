// One request's call through the pipeline, and where its outputs go.
//
// A front end (a native reactor, v2, RunChain's steps) sets a CallContext up
// once, where the call arrives, and hands it to Execute with a sink
// (server/pipeline/pipeline.h): the context says what the request is and what
// it may use, the sink what becomes of its outputs.
#ifndef TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_
#define TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "server/data/handle_store.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/plan.h"
#include "server/pipeline/result_progress.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/wire/chunk_part.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// What every step of one request reads. Shallow: it refers to what the front
// end owns, which outlives the call's work; `placement`, `*received` and
// `*planned` are the steps' to update.
struct CallContext {
  const v1::RunRequest& request;
  const ServiceOptions& options;
  Scheduler& scheduler;
  // Where the request runs; the steps settle it (the backend the answer names).
  Placement& placement;
  const StopCheck& stop;
  // The call's share of the memory budget: every byte the steps allocate.
  MemoryBudget::Reservation& reservation;
  // Where inputs are besides the request's inline bytes; null: nowhere else.
  const UploadedInputs* uploaded = nullptr;  // pieces held apart (RunChunked, v2)
  const HandleAccess* handles = nullptr;     // the caller's handles and regions
  // The request's data where gRPC received it, with the reservation that
  // covers it: an output that is a run of those bytes is answered with them,
  // no buffer and no copy, and the answer's reservation takes that cover
  // over. Null, or no view: none to answer with.
  ReceivedData* received = nullptr;
  // The request planned already (PlanIfTiny, PlanRun); null: planned here.
  PlannedRun* planned = nullptr;
};

// The sinks: where Execute puts a request's outputs.

// Inline in `response` (Run's small answers, RunBidi, v2), refused before any
// work when the serialized answer would pass the message limit
// (`too_big_hint` says what to do instead). On error `response` holds no
// outputs.
struct IntoResponse {
  v1::RunResponse* response = nullptr;
  bool with_status = false;  // the answer carries its status (RunBidi)
  absl::string_view too_big_hint = "";
};

// Output buffers that become the answer (Run, v2):
// SerializeWithOutputContents hands them to gRPC without a copy. Refused
// before any work as IntoResponse is. Not for a request keeping outputs.
struct IntoAnswerBuffers {
  absl::string_view too_big_hint = "";
};

// Server-held buffers (RunChain's steps), bounded only by the request limits
// and the memory budget.
struct IntoHeldBuffers {};

// RunStream's result going out while it is computed (pipeline.h).
struct StreamWhileComputing;

// Held buffers cut into the parts of a streamed result (RunStream,
// RunChunked); `record` learns where it ran. With `streaming`, once it
// started the parts went to it and the result holds none.
struct IntoParts {
  CallRecord* record = nullptr;
  StreamWhileComputing* streaming = nullptr;
};

// The steps Execute takes a call through, in order (server/pipeline/call_steps.cc):
// admission, reservation, output binding, execution. Each is apart, and tested
// apart (tests/server/pipeline/call_steps_test.cc); a sink chooses only how the answer
// is admitted (AdmitFn) and where an output's buffer comes from (AllocateFn).

// Told a request's plan before any output is allocated: the bytes the answer
// takes besides the output buffers (its serialized copy, a part buffer), or
// why the request is refused (an answer over the message limit).
using AdmitFn = std::function<absl::StatusOr<int64_t>(const ExecutionPlan& plan)>;

// Asked for each output's zeroed buffer, in order, with where the output goes
// instead of a buffer of the call's own (a shared memory region, a kept
// tensor), else null: where the kernels write it.
using AllocateFn =
    std::function<absl::StatusOr<std::byte*>(const Layout& layout, std::byte* elsewhere)>;

// The outputs a request kept (OutputDesc.keep), by output index: null for
// the others.
using KeptOutputs = std::vector<std::shared_ptr<const ResidentTensor>>;

// A streamed result that may go out while it is computed: `start` hands the
// outputs, allocated and not yet written, to the writer and returns the
// progress the bands report to.
struct BandedStart {
  int64_t band_bytes = 0;
  std::function<ResultProgress&()> start;
};

// 1. Admission: a call let in, planned, with where it is pinned.
struct Admission {
  std::unique_ptr<PlannedRun> planned_here;  // when the call came unplanned
  PlannedRun* run = nullptr;                 // call.planned or planned_here
  int64_t answer_bytes = 0;                  // what `admit` said the answer takes
  int pinned = -1;                           // the device its resident inputs pin it to; -1: none
};
// Stops work that expired or was cancelled while queued, plans the call's
// request (unless call.planned), and asks `admit`.
absl::StatusOr<Admission> Admit(const CallContext& call, const AdmitFn& admit);

// 2. Reservation: what the outputs, the answer, the device's copies and the
// host copies of handles take, grown into call.reservation; then the inputs
// made readable where the call runs (pieces read whole for a device, handles
// on another device copied to the host). Returns, by input slot, the device
// buffer an input is read from in place (null: from its host bytes).
absl::StatusOr<std::vector<opencl_backend::ResidentInput>> ReserveAndResolveInputs(
    const CallContext& call, Admission& admission);

// 3. Binding: where each output goes, in order: a shared memory region, a
// kept tensor (reserved in the handle store; on the device the call is
// pinned to, no host buffer), or `allocate`'s buffer.
struct BoundOutputs {
  std::vector<std::byte*> outputs;  // where the kernels write, by output
  std::vector<const opencl_backend::ResidentBuffer*> resident;  // kept on the device
  std::vector<HandleStore::Pending> pending;                    // kept, committed after
};
absl::StatusOr<BoundOutputs> BindOutputs(const CallContext& call, const Admission& admission,
                                         const AllocateFn& allocate);

// 4. Execution: on the device the call is pinned to, band by band on the CPU
// for a streamed result that may go out while computed (`banded`), or where
// the scheduler places it; then the shared memory outputs checked intact and
// the kept outputs committed into `kept`.
absl::Status ExecuteBound(const CallContext& call, Admission& admission,
                          const std::vector<opencl_backend::ResidentInput>& resident_inputs,
                          BoundOutputs& bound, const BandedStart* banded, KeptOutputs* kept);

// The four steps in order, with one shortcut after admission: kept outputs
// that are all windows of a handle become views of it (no reservation, no
// copy). `allocate` sees every output's layout either way.
absl::Status PlanAndExecute(const CallContext& call, const AdmitFn& admit,
                            const AllocateFn& allocate, KeptOutputs* kept,
                            const BandedStart* banded = nullptr);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_
