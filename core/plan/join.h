// Join lowers to one strided copy per input, each into its part of the output.
#ifndef TENSOROP_CORE_PLAN_JOIN_H_
#define TENSOROP_CORE_PLAN_JOIN_H_

#include "core/plan/plan.h"
#include "core/validate/join.h"

namespace tensorop {

ExecutionPlan PlanJoin(const JoinGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_JOIN_H_
