// TensorOp.RunChain's pipeline: a chain's steps validated as a whole, then run
// one after another on one backend, each step an ordinary request
// (server/pipeline/pipeline.h) whose inputs may be earlier steps' outputs. Those stay
// in server-held buffers between steps and are freed after their last use;
// the results named come back as a stream of parts, or stay as handles.
// Window steps (slice, strided_slice, split) whose outputs only other window
// steps read are not run: their outputs are views, and the step that needs
// bytes copies once through the composed windows (core/plan/compose_windows.h).
#ifndef TENSOROP_SERVER_ENGINE_CHAIN_H_
#define TENSOROP_SERVER_ENGINE_CHAIN_H_

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "server/data/handle_store.h"
#include "server/engine/engine.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// Checks every step of `chain` (references, operators, layouts) before any
// runs, then runs them through `engine` on `placement` (AUTO is settled by
// the first step and kept), each step's buffers reserved in the engine's
// budget while they live, and returns the results' parts, their bytes moved
// into `reservation`. Errors name steps[i] or results[j]; kept results made
// before a failure are released.
absl::StatusOr<ResultParts> ExecuteChainIntoParts(const v1::RunChainRequest& chain,
                                                  const Engine& engine, Placement& placement,
                                                  const StopCheck& stop,
                                                  MemoryBudget::Reservation& reservation,
                                                  CallRecord& record, const HandleAccess* handles);

// Chain steps not run because their outputs were views (a window on a window
// copied once, when bytes are needed), since the process started: the
// counter tensorop_chain_steps_fused_total.
int64_t FusedChainSteps();
// Chain steps whose results, one contiguous run of a resident tensor through
// views, were answered from its bytes without a copy (as Fetch answers a
// handle): tensorop_chain_results_lent_total.
int64_t LentChainSteps();

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_ENGINE_CHAIN_H_
