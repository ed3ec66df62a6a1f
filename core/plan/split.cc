#include "core/plan/split.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanSplit(const SplitGeometry& geometry) {
  ExecutionPlan plan = EmptyPlan(InfoOf<SplitAttrs>());
  plan.outputs = geometry.outputs;
  plan.windows = geometry.windows;
  for (size_t j = 0; j < geometry.outputs.size(); ++j) {
    plan.copies.push_back(
        PlanStridedCopy(geometry.outputs[j], geometry.windows[j], 0, static_cast<int>(j)));
  }
  return plan;
}

}  // namespace tensorop
