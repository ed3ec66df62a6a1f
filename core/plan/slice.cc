#include "core/plan/slice.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanSlice(const SliceGeometry& geometry) {
  return PlanWindowCopy(InfoOf<SliceAttrs>(), geometry.output, geometry.window);
}

}  // namespace tensorop
