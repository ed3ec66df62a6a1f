// Hand-made layouts for tests, built as validation builds them.
#ifndef TENSOROP_TESTS_SUPPORT_LAYOUT_H_
#define TENSOROP_TESTS_SUPPORT_LAYOUT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tensorop::testing {

// A layout of `sizes` with element `strides` (packed when empty).
inline Layout MakeLayout(DType dtype, std::vector<int64_t> sizes,
                         std::vector<int64_t> strides = {}) {
  Layout layout;
  layout.dtype = dtype;
  layout.strides = strides.empty() ? PackedStrides(sizes) : std::move(strides);
  layout.sizes = std::move(sizes);
  layout.element_count = 1;
  layout.buffer_elements = 1;
  for (size_t i = 0; i < layout.sizes.size(); ++i) {
    layout.element_count *= layout.sizes[i];
    layout.buffer_elements += (layout.sizes[i] - 1) * layout.strides[i];
  }
  if (layout.element_count == 0) layout.buffer_elements = 0;
  return layout;
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_LAYOUT_H_
