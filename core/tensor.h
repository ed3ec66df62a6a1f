// Tensor descriptions and views: plain data, no ownership of the bytes.
#ifndef TENSOROP_CORE_TENSOR_H_
#define TENSOROP_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tensorop {

// A tensor as the caller describes it. `strides` counts elements; empty means
// packed row-major. Nothing here is trusted until validated.
struct TensorDesc {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes = {};
  std::vector<int64_t> strides = {};
};

// A described tensor over bytes owned by someone else (usually the request).
struct TensorView {
  TensorDesc desc;
  std::span<const std::byte> data;
};

// The layout the caller asks for one output: sizes (where the op lets the caller
// choose them, or as a check) and optional strides (elements; empty: packed).
struct OutputDesc {
  std::vector<int64_t> sizes = {};
  std::vector<int64_t> strides = {};
};

// A validated layout: strides are explicit and every product fits in 64 bits.
struct Layout {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // elements, explicit
  int64_t element_count = 0;     // product(sizes)
  int64_t buffer_elements = 0;   // 1 + sum((size-1)*stride), 0 when empty
  int64_t buffer_bytes() const { return buffer_elements * ElementSize(dtype); }
};

// Packed row-major strides for sizes whose product is known to fit in 64 bits.
std::vector<int64_t> PackedStrides(std::span<const int64_t> sizes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_TENSOR_H_
