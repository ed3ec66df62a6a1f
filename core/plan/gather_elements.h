// GatherElements lowers to one GatherWalk over the indices' coordinates
// (core/plan/gather.h).
#ifndef TENSOROP_CORE_PLAN_GATHER_ELEMENTS_H_
#define TENSOROP_CORE_PLAN_GATHER_ELEMENTS_H_

#include "core/plan/plan.h"
#include "core/validate/gather_elements.h"

namespace tensorop {

ExecutionPlan PlanGatherElements(const GatherElementsGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_GATHER_ELEMENTS_H_
