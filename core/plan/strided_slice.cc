#include "core/plan/strided_slice.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanStridedSlice(const StridedSliceGeometry& geometry) {
  return PlanWindowCopy(InfoOf<StridedSliceAttrs>(), geometry.output, geometry.window);
}

}  // namespace tensorop
