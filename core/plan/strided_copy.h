// Turns "this output is a strided window on that input" into a StridedCopy:
// elements become bytes, size-1 dimensions go, contiguous neighbours merge.
#ifndef TENSOROP_CORE_PLAN_STRIDED_COPY_H_
#define TENSOROP_CORE_PLAN_STRIDED_COPY_H_

#include <cstdint>
#include <vector>

#include "core/operator_info.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

StridedCopy PlanStridedCopy(const Layout& output, const InputWindow& window, int input_slot,
                            int output_slot);

// The plan of an operator whose one output is a window on its one input
// (slice, strided_slice).
ExecutionPlan PlanWindowCopy(const OperatorInfo& op, const Layout& output,
                             const InputWindow& window);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_STRIDED_COPY_H_
