// Split lowers to one strided copy per output.
#ifndef TENSOROP_CORE_PLAN_SPLIT_H_
#define TENSOROP_CORE_PLAN_SPLIT_H_

#include "core/plan/plan.h"
#include "core/validate/split.h"

namespace tensorop {

ExecutionPlan PlanSplit(const SplitGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_SPLIT_H_
