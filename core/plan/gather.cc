#include "core/plan/gather.h"

#include <utility>
#include <vector>

namespace tensorop {

GatherWalk MakeGatherWalk(const Layout& input, const Layout& indices, int64_t axis,
                          std::span<const WalkDimension> dimensions) {
  const int64_t element_size = ElementSize(input.dtype);
  const int64_t index_size = ElementSize(indices.dtype);
  GatherWalk walk;
  walk.element_size = static_cast<int>(element_size);
  walk.index_size = static_cast<int>(index_size);
  walk.index_signed = indices.dtype == DType::kInt32 || indices.dtype == DType::kInt64;
  walk.axis_size = input.sizes[axis];
  // Along a size-1 axis every index is 0: the stride (maybe huge) never counts.
  walk.input_axis_stride = walk.axis_size > 1 ? input.strides[axis] * element_size : 0;
  walk.element_count = 1;
  for (const WalkDimension& d : dimensions) {
    walk.element_count *= d.size;
    if (d.size == 1) continue;
    const int64_t in = d.input_stride * element_size;
    const int64_t idx = d.indices_stride * index_size;
    const int64_t out = d.output_stride * element_size;
    if (!walk.sizes.empty()) {
      // The dimension before steps over exactly this one in all three: one run.
      const size_t last = walk.sizes.size() - 1;
      const int64_t size = walk.sizes[last];
      if (walk.input_strides[last] == in * d.size && walk.indices_strides[last] == idx * d.size &&
          walk.output_strides[last] == out * d.size) {
        walk.sizes[last] = size * d.size;
        walk.input_strides[last] = in;
        walk.indices_strides[last] = idx;
        walk.output_strides[last] = out;
        continue;
      }
    }
    walk.sizes.push_back(d.size);
    walk.input_strides.push_back(in);
    walk.indices_strides.push_back(idx);
    walk.output_strides.push_back(out);
  }
  return walk;
}

ExecutionPlan PlanGather(const GatherGeometry& geometry) {
  const Layout& input = geometry.input;
  const Layout& indices = geometry.indices;
  const Layout& output = geometry.output;
  const size_t axis = static_cast<size_t>(geometry.axis);
  const size_t index_rank = indices.sizes.size();
  // The output's coordinates are (a, b, e): the input's before the axis, the
  // indices', the input's after it.
  std::vector<WalkDimension> dimensions;
  for (size_t d = 0; d < output.sizes.size(); ++d) {
    WalkDimension& dimension = dimensions.emplace_back();
    dimension.size = output.sizes[d];
    dimension.output_stride = output.strides[d];
    if (d < axis) {
      dimension.input_stride = input.strides[d];
    } else if (d < axis + index_rank) {
      dimension.indices_stride = indices.strides[d - axis];
    } else {
      dimension.input_stride = input.strides[d - index_rank + 1];
    }
  }
  ExecutionPlan plan = EmptyPlan(InfoOf<GatherAttrs>());
  plan.outputs = {output};
  plan.gathers = {MakeGatherWalk(input, indices, geometry.axis, dimensions)};
  return plan;
}

}  // namespace tensorop
