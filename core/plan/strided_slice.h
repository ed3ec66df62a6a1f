// StridedSlice lowers to one strided copy.
#ifndef TENSOROP_CORE_PLAN_STRIDED_SLICE_H_
#define TENSOROP_CORE_PLAN_STRIDED_SLICE_H_

#include "core/plan/plan.h"
#include "core/validate/strided_slice.h"

namespace tensorop {

ExecutionPlan PlanStridedSlice(const StridedSliceGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_STRIDED_SLICE_H_
