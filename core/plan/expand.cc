#include "core/plan/expand.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanExpand(const ExpandGeometry& geometry) {
  return PlanWindowCopy(InfoOf<ExpandAttrs>(), geometry.output, geometry.window);
}

}  // namespace tensorop
