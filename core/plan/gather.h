// Gather lowers to one GatherWalk over the output's coordinates; GatherElements
// (core/plan/gather_elements.h) to one over the indices'.
#ifndef TENSOROP_CORE_PLAN_GATHER_H_
#define TENSOROP_CORE_PLAN_GATHER_H_

#include <cstdint>
#include <span>

#include "core/plan/plan.h"
#include "core/validate/gather.h"

namespace tensorop {

ExecutionPlan PlanGather(const GatherGeometry& geometry);

// One dimension of a walk, its strides in elements of its own tensor.
struct WalkDimension {
  int64_t size = 1;
  int64_t input_stride = 0;
  int64_t indices_stride = 0;
  int64_t output_stride = 0;
};

// The walk over `dimensions` (outermost first) for an input, indices and
// output of these layouts, gathering along `axis` of the input: strides in
// bytes, size-1 dimensions dropped, and neighbours that step alike in all
// three tensors merged, so the innermost run is as long as it can be.
GatherWalk MakeGatherWalk(const Layout& input, const Layout& indices, int64_t axis,
                          std::span<const WalkDimension> dimensions);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_GATHER_H_
