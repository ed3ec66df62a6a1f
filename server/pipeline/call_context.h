// One request's call through the pipeline, and where its outputs go.
//
// A front end (a native reactor, v2, RunChain's steps) sets a CallContext up
// once, where the call arrives, and hands it to Execute with a sink
// (server/pipeline/pipeline.h): the context says what the request is and what
// it may use, the sink what becomes of its outputs.
#ifndef TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_
#define TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "server/data/handle_store.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/plan.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/wire/chunk_part.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// What every step of one request reads. Shallow: it refers to what the front
// end owns, which outlives the call's work; `placement`, `*received_reserved`
// and `*planned` are the steps' to update.
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
  // The request's data where gRPC received it, and the bytes of `reservation`
  // that cover it (ReceivedRun::data_bytes): an output that is a run of those
  // bytes is answered with them, no buffer and no copy, and the answer takes
  // that cover over (lowering `*received_reserved`). Null: not kept.
  const RequestDataView* received = nullptr;
  int64_t* received_reserved = nullptr;
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

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_CALL_CONTEXT_H_
