#include "core/plan/scatter_elements.h"

#include "core/plan/strided_copy.h"

namespace tensorop {

ExecutionPlan PlanScatterElements(const ScatterElementsGeometry& geometry) {
  const Layout& input = geometry.input;
  const Layout& indices = geometry.indices;
  const Layout& updates = geometry.updates;
  const Layout& output = geometry.output;
  const int64_t axis = geometry.axis;
  const int64_t element_size = ElementSize(output.dtype);
  const int64_t index_size = ElementSize(indices.dtype);

  ExecutionPlan plan = EmptyPlan(InfoOf<ScatterElementsAttrs>());
  plan.outputs = {output};
  InputWindow whole_input;
  whole_input.strides = input.strides;
  plan.copies = {PlanStridedCopy(output, whole_input, 0, 0)};

  ScatterWalk walk;
  walk.element_size = static_cast<int>(element_size);
  walk.index_size = static_cast<int>(index_size);
  walk.index_signed = indices.dtype == DType::kInt32 || indices.dtype == DType::kInt64;
  walk.axis_size = input.sizes[axis];
  walk.element_count = indices.element_count;
  // Along a size-1 axis every index is 0: the stride (maybe huge) never counts.
  walk.output_axis_stride = output.sizes[axis] > 1 ? output.strides[axis] * element_size : 0;
  for (size_t d = 0; d < indices.sizes.size(); ++d) {
    if (indices.sizes[d] == 1) continue;
    const bool is_axis = static_cast<int64_t>(d) == axis;
    // The outermost dimension other than the axis splits into parallel blocks.
    if (is_axis) walk.axis_dim = static_cast<int>(walk.sizes.size());
    if (!is_axis && walk.partition_dim < 0) {
      walk.partition_dim = static_cast<int>(walk.sizes.size());
    }
    walk.sizes.push_back(indices.sizes[d]);
    walk.indices_strides.push_back(indices.strides[d] * index_size);
    walk.updates_strides.push_back(updates.strides[d] * element_size);
    walk.output_strides.push_back(is_axis ? 0 : output.strides[d] * element_size);
  }
  plan.scatters = {std::move(walk)};
  return plan;
}

}  // namespace tensorop
