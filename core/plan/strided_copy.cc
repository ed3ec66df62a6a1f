#include "core/plan/strided_copy.h"

#include "core/checked_math.h"

namespace tensorop {

StridedCopy PlanStridedCopy(const Layout& output, const InputWindow& window, int input_slot,
                            int output_slot) {
  const int64_t element_size = ElementSize(output.dtype);
  StridedCopy copy;
  copy.input_slot = input_slot;
  copy.output_slot = output_slot;
  copy.element_size = static_cast<int>(element_size);
  copy.element_count = output.element_count;
  copy.src_offset = window.base * element_size;
  copy.dst_offset = 0;
  if (copy.element_count == 0) return copy;

  // Outermost first; skip size-1 dimensions, fold each dimension into the one
  // inside it when both sides step over it contiguously.
  for (size_t i = 0; i < output.sizes.size(); ++i) {
    const int64_t size = output.sizes[i];
    if (size == 1) continue;
    copy.sizes.push_back(size);
    copy.src_strides.push_back(window.strides[i] * element_size);
    copy.dst_strides.push_back(output.strides[i] * element_size);
  }
  std::vector<int64_t> sizes, src, dst;
  // A step of stride * size past the buffer cannot be the outer stride of a
  // dimension inside it; checked so a huge padded pitch cannot overflow.
  const auto steps_over = [](int64_t outer, int64_t inner, int64_t size) {
    std::optional<int64_t> span = CheckedMul(inner, size);
    return span && *span == outer;
  };
  for (size_t i = 0; i < copy.sizes.size(); ++i) {
    if (!sizes.empty() && steps_over(src.back(), copy.src_strides[i], copy.sizes[i]) &&
        steps_over(dst.back(), copy.dst_strides[i], copy.sizes[i])) {
      sizes.back() *= copy.sizes[i];
      src.back() = copy.src_strides[i];
      dst.back() = copy.dst_strides[i];
      continue;
    }
    sizes.push_back(copy.sizes[i]);
    src.push_back(copy.src_strides[i]);
    dst.push_back(copy.dst_strides[i]);
  }
  copy.sizes = std::move(sizes);
  copy.src_strides = std::move(src);
  copy.dst_strides = std::move(dst);
  return copy;
}

ExecutionPlan PlanWindowCopy(const OperatorInfo& op, const Layout& output,
                             const InputWindow& window) {
  ExecutionPlan plan = EmptyPlan(op);
  plan.outputs = {output};
  plan.copies = {PlanStridedCopy(output, window, 0, 0)};
  plan.windows = {window};
  return plan;
}

}  // namespace tensorop
