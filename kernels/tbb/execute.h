// Runs an ExecutionPlan on oneTBB worker threads.
#ifndef TENSOROP_KERNELS_TBB_EXECUTE_H_
#define TENSOROP_KERNELS_TBB_EXECUTE_H_

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"

namespace tensorop::tbb_backend {

// Executes `plan`. `inputs[i]` is the first byte of the input named
// plan.input_names[i]; `outputs[i]` points to plan.outputs[i].buffer_bytes()
// writable bytes, already zeroed where padding must read as zero. Work is split
// in blocks; `stop` is asked between blocks, and its first non-OK status is
// returned (the outputs are then incomplete). Call from inside the task_arena
// the work should use: parallel loops run in the caller's arena.
absl::Status Execute(const ExecutionPlan& plan, std::span<const std::byte* const> inputs,
                     std::span<std::byte* const> outputs, const StopCheck& stop = NeverStop);

// Whether Execute(plan) runs every loop on the calling thread (too little work
// to split), so that the caller need not be in an arena at all.
bool RunsOnCallingThread(const ExecutionPlan& plan);

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_EXECUTE_H_
