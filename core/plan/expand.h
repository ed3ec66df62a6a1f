// Expand lowers to one strided copy of its window; kept, it is a view.
#ifndef TENSOROP_CORE_PLAN_EXPAND_H_
#define TENSOROP_CORE_PLAN_EXPAND_H_

#include "core/plan/plan.h"
#include "core/validate/expand.h"

namespace tensorop {

ExecutionPlan PlanExpand(const ExpandGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_EXPAND_H_
