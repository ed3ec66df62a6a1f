// Turns "this output is a strided window on that input" into a StridedCopy:
// elements become bytes, size-1 dimensions go, contiguous neighbours merge.
#ifndef TENSOROP_CORE_PLAN_STRIDED_COPY_H_
#define TENSOROP_CORE_PLAN_STRIDED_COPY_H_

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

#include "core/plan/plan.h"
#include "core/tensor.h"

namespace tensorop {

// output[c] = input[base + dot(c, strides)] for c over the output's sizes;
// counted in elements. Validation guarantees every address is in the input.
struct InputWindow {
  int64_t base = 0;
  std::vector<int64_t> strides;
};

StridedCopy PlanStridedCopy(const Layout& output, const InputWindow& window,
                            int input_slot, int output_slot);

// The plan of an operator whose one output is a window on its one input
// (slice, strided_slice).
ExecutionPlan PlanWindowCopy(absl::string_view op, const Layout& output,
                             const InputWindow& window);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_STRIDED_COPY_H_
