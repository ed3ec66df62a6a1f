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

  ExecutionPlan plan;
  plan.op = "scatter_elements";
  plan.input_names = {"input", "indices", "updates"};
  plan.outputs = {output};
  InputWindow whole_input;
  whole_input.strides = input.strides;
  plan.copies = {PlanStridedCopy(output, whole_input, 0, 0)};

  ScatterRows rows;
  rows.indices_slot = 1;
  rows.updates_slot = 2;
  rows.output_slot = 0;
  rows.element_size = static_cast<int>(element_size);
  rows.index_size = static_cast<int>(index_size);
  rows.index_signed = indices.dtype == DType::kInt32 || indices.dtype == DType::kInt64;
  rows.axis_size = input.sizes[axis];
  rows.element_count = indices.element_count;
  rows.row_length = indices.sizes[axis];
  rows.indices_row_stride = indices.strides[axis] * index_size;
  rows.updates_row_stride = updates.strides[axis] * element_size;
  rows.output_axis_stride = output.strides[axis] * element_size;
  for (size_t d = 0; d < indices.sizes.size(); ++d) {
    if (static_cast<int64_t>(d) == axis || indices.sizes[d] == 1) continue;
    rows.outer_sizes.push_back(indices.sizes[d]);
    rows.indices_outer_strides.push_back(indices.strides[d] * index_size);
    rows.updates_outer_strides.push_back(updates.strides[d] * element_size);
    rows.output_outer_strides.push_back(output.strides[d] * element_size);
  }
  plan.scatters = {std::move(rows)};
  return plan;
}

}  // namespace tensorop
