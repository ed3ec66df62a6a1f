// Pad lowers to strided copies: constant mode copies the input into the
// output's interior and fills the slabs around it with the value; the other
// modes copy each product of the dimensions' runs, mirrored runs with negative
// source strides and edge runs with stride 0.
#ifndef TENSOROP_CORE_PLAN_PAD_H_
#define TENSOROP_CORE_PLAN_PAD_H_

#include "core/plan/plan.h"
#include "core/validate/pad.h"

namespace tensorop {

ExecutionPlan PlanPad(const PadGeometry& geometry);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_PAD_H_
