#include "core/plan/compose_windows.h"

#include <algorithm>
#include <vector>

namespace tensorop {
namespace {

// The coordinates of element `address` of a packed row-major layout of `sizes`.
std::vector<int64_t> Coordinates(const std::vector<int64_t>& sizes, int64_t address) {
  std::vector<int64_t> coordinates(sizes.size());
  for (size_t k = sizes.size(); k-- > 0;) {
    coordinates[k] = address % sizes[k];
    address /= sizes[k];
  }
  return coordinates;
}

int64_t Dot(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  int64_t sum = 0;
  for (size_t k = 0; k < a.size(); ++k) sum += a[k] * b[k];
  return sum;
}

// Where `outer` starts in `middle`'s coordinates, and how far one step along
// each output dimension moves them (all 0 for a dimension of size 1).
struct CoordinateSteps {
  std::vector<int64_t> origin;
  std::vector<std::vector<int64_t>> steps;  // by output dimension
};

CoordinateSteps StepsThrough(const Layout& middle, const InputWindow& outer,
                             std::span<const int64_t> output_sizes) {
  CoordinateSteps walk{.origin = Coordinates(middle.sizes, outer.base), .steps = {}};
  for (size_t j = 0; j < output_sizes.size(); ++j) {
    std::vector<int64_t>& step = walk.steps.emplace_back(walk.origin.size(), 0);
    if (output_sizes[j] <= 1) continue;
    const std::vector<int64_t> to = Coordinates(middle.sizes, outer.base + outer.strides[j]);
    for (size_t k = 0; k < step.size(); ++k) step[k] = to[k] - walk.origin[k];
  }
  return walk;
}

}  // namespace

bool ComposableMiddle(const Layout& layout) {
  return layout.element_count > 0 && layout.strides == PackedStrides(layout.sizes);
}

bool ComposesOver(const Layout& middle, const InputWindow& outer,
                  std::span<const int64_t> output_sizes) {
  // The coordinates of output element d are origin + sum(d[j] * step[j]):
  // their dot with the packed strides is the window's address by linearity,
  // so where they stay inside `middle`'s sizes for every d they are that
  // address's coordinates. Per dimension, the extremes of the sum bound them.
  const CoordinateSteps walk = StepsThrough(middle, outer, output_sizes);
  std::vector<int64_t> lowest = walk.origin;
  std::vector<int64_t> highest = walk.origin;
  for (size_t j = 0; j < output_sizes.size(); ++j) {
    for (size_t k = 0; k < walk.origin.size(); ++k) {
      const int64_t reach = walk.steps[j][k] * std::max<int64_t>(output_sizes[j] - 1, 0);
      (reach < 0 ? lowest : highest)[k] += reach;
    }
  }
  for (size_t k = 0; k < walk.origin.size(); ++k) {
    if (lowest[k] < 0 || highest[k] >= middle.sizes[k]) return false;
  }
  return true;
}

InputWindow ComposeWindows(const InputWindow& inner, const Layout& middle, const InputWindow& outer,
                           std::span<const int64_t> output_sizes) {
  // Windows are affine in the output coordinates, and so is the packed
  // layout's inverse on its elements: where the origin and one step along
  // each dimension land in `middle` says where they land in the source.
  const CoordinateSteps walk = StepsThrough(middle, outer, output_sizes);
  InputWindow composed{.base = inner.base + Dot(walk.origin, inner.strides), .strides = {}};
  for (const std::vector<int64_t>& step : walk.steps) {
    composed.strides.push_back(Dot(step, inner.strides));
  }
  return composed;
}

}  // namespace tensorop
