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
  const std::vector<int64_t> origin = Coordinates(middle.sizes, outer.base);
  std::vector<int64_t> lowest = origin;
  std::vector<int64_t> highest = origin;
  for (size_t j = 0; j < output_sizes.size(); ++j) {
    if (output_sizes[j] <= 1) continue;
    const std::vector<int64_t> to = Coordinates(middle.sizes, outer.base + outer.strides[j]);
    for (size_t k = 0; k < origin.size(); ++k) {
      const int64_t reach = (to[k] - origin[k]) * (output_sizes[j] - 1);
      (reach < 0 ? lowest : highest)[k] += reach;
    }
  }
  for (size_t k = 0; k < origin.size(); ++k) {
    if (lowest[k] < 0 || highest[k] >= middle.sizes[k]) return false;
  }
  return true;
}

InputWindow ComposeWindows(const InputWindow& inner, const Layout& middle, const InputWindow& outer,
                           std::span<const int64_t> output_sizes) {
  // Windows are affine in the output coordinates, and so is the packed
  // layout's inverse on its elements: where the origin and one step along
  // each dimension land in `middle` says where they land in the source.
  const std::vector<int64_t> origin = Coordinates(middle.sizes, outer.base);
  InputWindow composed{.base = inner.base + Dot(origin, inner.strides), .strides = {}};
  for (size_t j = 0; j < output_sizes.size(); ++j) {
    if (output_sizes[j] <= 1) {
      composed.strides.push_back(0);
      continue;
    }
    std::vector<int64_t> step = Coordinates(middle.sizes, outer.base + outer.strides[j]);
    std::transform(step.begin(), step.end(), origin.begin(), step.begin(),
                   [](int64_t to, int64_t from) { return to - from; });
    composed.strides.push_back(Dot(step, inner.strides));
  }
  return composed;
}

}  // namespace tensorop
