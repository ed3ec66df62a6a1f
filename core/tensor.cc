#include "core/tensor.h"

namespace tensorop {

std::vector<int64_t> PackedStrides(std::span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    // A zero size would zero every outer stride; keep them distinct instead so
    // the layout stays a valid non-overlapping one (nothing is addressed anyway).
    stride *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return strides;
}

}  // namespace tensorop
