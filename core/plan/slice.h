// Slice lowers to one strided copy.
#ifndef TENSOROP_CORE_PLAN_SLICE_H_
#define TENSOROP_CORE_PLAN_SLICE_H_

#include "core/plan/plan.h"
#include "core/validate/slice.h"

namespace tensorop {

ExecutionPlan PlanSlice(const SliceGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_SLICE_H_
