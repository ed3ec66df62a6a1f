// Reshape lowers to a window on its input when the input's strides allow it
// (NumPy's rule: within each run of dimensions that the two size lists share,
// the input steps through its elements at one stride), and otherwise to copies
// that read the input in its own row-major order.
#ifndef TENSOROP_CORE_PLAN_RESHAPE_H_
#define TENSOROP_CORE_PLAN_RESHAPE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"
#include "core/validate/reshape.h"

namespace tensorop {

// Most copies one reshape plans: reached only when both the input's strides
// and the output's asked strides break the same run of dimensions, each copy
// then moving one stretch both step through evenly.
inline constexpr int64_t kMaxReshapeCopies = 4096;

// RESOURCE_EXHAUSTED past kMaxReshapeCopies.
absl::StatusOr<ExecutionPlan> PlanReshape(const ReshapeGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_RESHAPE_H_
