#include "core/plan/gather_elements.h"

#include <vector>

#include "core/plan/gather.h"

namespace tensorop {

ExecutionPlan PlanGatherElements(const GatherElementsGeometry& geometry) {
  const Layout& input = geometry.input;
  const Layout& indices = geometry.indices;
  const Layout& output = geometry.output;
  // Every coordinate but the axis reads the input where it writes the output;
  // along the axis the index chooses.
  std::vector<WalkDimension> dimensions;
  for (size_t d = 0; d < indices.sizes.size(); ++d) {
    dimensions.push_back(
        {.size = indices.sizes[d],
         .input_stride = static_cast<int64_t>(d) == geometry.axis ? 0 : input.strides[d],
         .indices_stride = indices.strides[d],
         .output_stride = output.strides[d]});
  }
  ExecutionPlan plan = EmptyPlan(InfoOf<GatherElementsAttrs>());
  plan.outputs = {output};
  plan.gathers = {MakeGatherWalk(input, indices, geometry.axis, dimensions)};
  return plan;
}

}  // namespace tensorop
