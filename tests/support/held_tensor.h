// A tensor whose bytes the test holds, for the validation tests of operators
// with more than one input (indices, updates): zeroed, or given value by value.
#ifndef TENSOROP_TESTS_SUPPORT_HELD_TENSOR_H_
#define TENSOROP_TESTS_SUPPORT_HELD_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tensorop::testing {

struct HeldTensor {
  TensorDesc desc;
  std::vector<std::byte> bytes;
  TensorView view() const { return TensorView{desc, bytes}; }
};

// Zeroed, packed.
inline HeldTensor Zeros(DType dtype, std::vector<int64_t> sizes) {
  int64_t elements = 1;
  for (int64_t size : sizes) elements *= size;
  HeldTensor tensor;
  tensor.bytes.assign(static_cast<size_t>(elements * ElementSize(dtype)), std::byte{0});
  tensor.desc = TensorDesc{dtype, std::move(sizes), {}};
  return tensor;
}

// `values` is the whole buffer (row-major when `strides` is empty).
template <typename T>
HeldTensor Values(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values,
                  std::vector<int64_t> strides = {}) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  HeldTensor tensor;
  tensor.bytes.resize(values.size() * sizeof(T));
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  tensor.desc = TensorDesc{dtype, std::move(sizes), std::move(strides)};
  return tensor;
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_HELD_TENSOR_H_
