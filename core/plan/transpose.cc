#include "core/plan/transpose.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanTranspose(const TransposeGeometry& geometry) {
  return PlanWindowCopy(InfoOf<TransposeAttrs>(), geometry.output, geometry.window);
}

}  // namespace tensorop
