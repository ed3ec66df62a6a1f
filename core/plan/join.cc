#include "core/plan/join.h"

#include "core/operator_info.h"
#include "core/plan/strided_copy.h"
#include "core/window.h"

namespace tensorop {

ExecutionPlan PlanJoin(const JoinGeometry& geometry) {
  ExecutionPlan plan = EmptyPlan(InfoOf<JoinAttrs>());
  plan.outputs = {geometry.output};
  const size_t axis = static_cast<size_t>(geometry.axis);
  const int64_t element_size = ElementSize(geometry.output.dtype);
  for (size_t k = 0; k < geometry.inputs.size(); ++k) {
    const Layout& input = geometry.inputs[k];
    plan.input_names.push_back(NumberedInputName(k));
    // The output's part that input k fills: the input's sizes at the output's
    // strides, from its offset along the axis.
    Layout part = geometry.output;
    part.sizes = input.sizes;
    part.element_count = input.element_count;
    StridedCopy copy = PlanStridedCopy(part, InputWindow{0, input.strides}, static_cast<int>(k), 0);
    copy.dst_offset = geometry.offsets[k] * geometry.output.strides[axis] * element_size;
    plan.copies.push_back(std::move(copy));
  }
  return plan;
}

}  // namespace tensorop
