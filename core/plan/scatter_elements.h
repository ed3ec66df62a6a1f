// ScatterElements lowers to a copy of the input into the output, then a walk over the
// updates in row-major order.
#ifndef TENSOROP_CORE_PLAN_SCATTER_ELEMENTS_H_
#define TENSOROP_CORE_PLAN_SCATTER_ELEMENTS_H_

#include "core/plan/plan.h"
#include "core/validate/scatter_elements.h"

namespace tensorop {

ExecutionPlan PlanScatterElements(const ScatterElementsGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_SCATTER_ELEMENTS_H_
