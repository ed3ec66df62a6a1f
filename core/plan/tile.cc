#include "core/plan/tile.h"

#include "core/operator_info.h"
#include "core/plan/strided_copy.h"
#include "core/window.h"

namespace tensorop {

ExecutionPlan PlanTile(const TileGeometry& geometry) {
  const Layout& input = geometry.input;
  const Layout& output = geometry.output;
  // Output dimension i of size repeats[i] * n is two: which repeat (outer; the
  // input does not move) and where in the input (inner; the input's stride).
  // Dimensions repeated once, or of size 1, drop out in PlanStridedCopy, and
  // the innermost run stays the input's own row.
  Layout doubled = output;
  doubled.sizes.clear();
  doubled.strides.clear();
  InputWindow window;
  for (size_t i = 0; i < input.sizes.size(); ++i) {
    const int64_t size = input.sizes[i];
    doubled.sizes.insert(doubled.sizes.end(), {geometry.repeats[i], size});
    doubled.strides.insert(doubled.strides.end(), {size * output.strides[i], output.strides[i]});
    window.strides.insert(window.strides.end(), {0, input.strides[i]});
  }
  ExecutionPlan plan = EmptyPlan(InfoOf<TileAttrs>());
  plan.outputs = {output};
  plan.copies = {PlanStridedCopy(doubled, window, 0, 0)};
  return plan;
}

}  // namespace tensorop
