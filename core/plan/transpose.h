// Transpose lowers to one strided copy of its window; kept, it is a view.
#ifndef TENSOROP_CORE_PLAN_TRANSPOSE_H_
#define TENSOROP_CORE_PLAN_TRANSPOSE_H_

#include "core/plan/plan.h"
#include "core/validate/transpose.h"

namespace tensorop {

ExecutionPlan PlanTranspose(const TransposeGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_TRANSPOSE_H_
