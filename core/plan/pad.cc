#include "core/plan/pad.h"

#include <utility>

#include "core/operator_info.h"
#include "core/plan/strided_copy.h"
#include "core/window.h"

namespace tensorop {
namespace {

int64_t ElementsOf(const std::vector<int64_t>& sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) product *= size;  // within the output's element count
  return product;
}

// The input into the interior, and the value into the slabs around it: for
// dimension i, its start and end padding across the interior of the dimensions
// before it and the whole of those after it, so no element is written twice.
void PlanConstant(const PadGeometry& geometry, ExecutionPlan& plan) {
  const Layout& input = geometry.input;
  const Layout& output = geometry.output;
  const size_t rank = input.sizes.size();
  const int64_t element_size = ElementSize(output.dtype);
  int64_t interior = 0;
  for (size_t i = 0; i < rank; ++i) interior += geometry.start_padding[i] * output.strides[i];
  Layout part = output;
  part.sizes = input.sizes;
  part.element_count = input.element_count;
  StridedCopy copy = PlanStridedCopy(part, InputWindow{0, input.strides}, 0, 0);
  copy.dst_offset = interior * element_size;
  plan.copies.push_back(std::move(copy));

  const InputWindow value{0, std::vector<int64_t>(rank, 0)};
  for (size_t i = 0; i < rank; ++i) {
    const int64_t start = geometry.start_padding[i];
    const int64_t end = output.sizes[i] - start - input.sizes[i];
    for (const auto& [first, count] :
         {std::pair{int64_t{0}, start}, {start + input.sizes[i], end}}) {
      if (count == 0) continue;
      Layout slab = output;
      int64_t offset = first * output.strides[i];
      for (size_t j = 0; j < i; ++j) {
        slab.sizes[j] = input.sizes[j];
        offset += geometry.start_padding[j] * output.strides[j];
      }
      slab.sizes[i] = count;
      slab.element_count = ElementsOf(slab.sizes);
      StridedCopy fill = PlanStridedCopy(slab, value, -1, 0);
      fill.dst_offset = offset * element_size;
      plan.fills.push_back(std::move(fill));
    }
  }
  for (size_t b = 0; b < plan.fill_value.size(); ++b) {
    plan.fill_value[b] = static_cast<std::byte>((geometry.value_bits >> (8 * b)) & 0xFF);
  }
}

// One copy per choice of a run in every dimension. A run that repeats is two
// dimensions, as in tile: which repeat (the input does not move) and where in
// the run.
void PlanRuns(const PadGeometry& geometry, ExecutionPlan& plan) {
  const Layout& input = geometry.input;
  const Layout& output = geometry.output;
  const size_t rank = input.sizes.size();
  const int64_t element_size = ElementSize(output.dtype);
  std::vector<size_t> chosen(rank, 0);
  while (true) {
    Layout doubled = output;
    doubled.sizes.clear();
    doubled.strides.clear();
    InputWindow window;
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) {
      const PadRun& run = geometry.runs[i][chosen[i]];
      doubled.sizes.insert(doubled.sizes.end(), {run.repeats, run.length});
      doubled.strides.insert(doubled.strides.end(),
                             {run.period * output.strides[i], output.strides[i]});
      window.strides.insert(window.strides.end(), {0, run.in_step * input.strides[i]});
      window.base += run.in_begin * input.strides[i];
      offset += run.out_begin * output.strides[i];
    }
    doubled.element_count = ElementsOf(doubled.sizes);
    StridedCopy copy = PlanStridedCopy(doubled, window, 0, 0);
    copy.dst_offset = offset * element_size;
    plan.copies.push_back(std::move(copy));
    // The next choice, the innermost dimension fastest.
    size_t i = rank;
    while (i > 0 && ++chosen[i - 1] == geometry.runs[i - 1].size()) chosen[--i] = 0;
    if (i == 0) return;
  }
}

}  // namespace

ExecutionPlan PlanPad(const PadGeometry& geometry) {
  ExecutionPlan plan = EmptyPlan(InfoOf<PadAttrs>());
  plan.outputs = {geometry.output};
  if (geometry.mode == PadMode::kConstant) {
    PlanConstant(geometry, plan);
  } else {
    PlanRuns(geometry, plan);
  }
  return plan;
}

}  // namespace tensorop
