// Tensors and results as the client hands them to its callers, and the layout
// arithmetic that makes reading them safe whatever the server sent.
#ifndef TENSOROP_CLIENT_HOST_TENSOR_H_
#define TENSOROP_CLIENT_HOST_TENSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

// One tensor in host memory: the wire Tensor without protobuf.
struct HostTensor {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> sizes;
  // In elements, one per size; empty means packed row-major.
  std::vector<int64_t> strides;
  // The elements, little-endian, in memory order.
  std::string data;
  // Outputs only: set for an output kept on the server (OutputDesc.keep), which
  // then has its layout above and no data; Client::Fetch reads its bytes.
  std::optional<v1::TensorHandle> handle = std::nullopt;
};

// What one request produced.
struct Result {
  std::vector<HostTensor> outputs;
  // Where it ran: "cpu" or "opencl:<device>".
  std::string backend;
};

// The most elements one tensor may hold (OPERATORS.md).
inline constexpr int64_t kMaxElements = (int64_t{1} << 32) - 1;

// Bytes per element, or 0 when `dtype` names no element type.
int ElementSize(v1::DType dtype);

// The conformance format's names: "float32", "uint8", ...; "" for none.
absl::string_view DTypeName(v1::DType dtype);
std::optional<v1::DType> DTypeFromName(absl::string_view name);

bool IsFloat(v1::DType dtype);

// The product of `sizes`: INVALID_ARGUMENT when a size is negative or the
// product exceeds kMaxElements (checked without overflow).
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> sizes);

// Checks that every logical element of `tensor` lies inside `data`: a known dtype,
// sizes >= 0, strides empty or one per size and each >= 0, at most kMaxElements
// elements, and `data` holding exactly the packed bytes (no strides) or at least
// 1 + sum((sizes[i]-1) * strides[i]) elements (with strides). All arithmetic is
// overflow-checked. Returns the number of logical elements, else INVALID_ARGUMENT
// naming what is wrong.
absl::StatusOr<int64_t> CheckLayout(const HostTensor& tensor);

// The bytes `tensor`'s layout addresses, whatever `data` holds: product(sizes)
// elements packed, else 1 + sum((sizes[i]-1) * strides[i]) elements (0 when a
// size is 0). The same checks and errors as CheckLayout but for `data`.
absl::StatusOr<int64_t> LayoutBytes(const HostTensor& tensor);

// Packed row-major strides for `sizes`. The caller has checked that the product
// of `sizes` fits (CheckLayout).
std::vector<int64_t> PackedStrides(absl::Span<const int64_t> sizes);

// `tensor.strides`, or the packed strides when it has none.
std::vector<int64_t> EffectiveStrides(const HostTensor& tensor);

// Calls fn(element_offset) for every logical element in row-major order, where
// the element's bytes start at element_offset * ElementSize(dtype). `strides` has
// one entry per size. Only for layouts CheckLayout accepted.
template <typename Fn>
void ForEachElementOffset(absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides,
                          Fn&& fn) {
  for (int64_t size : sizes) {
    if (size == 0) return;
  }
  // An odometer: bump the innermost index, carrying outwards.
  std::vector<int64_t> index(sizes.size(), 0);
  int64_t offset = 0;
  for (;;) {
    fn(offset);
    size_t dim = sizes.size();
    for (;;) {
      if (dim == 0) return;
      --dim;
      if (++index[dim] < sizes[dim]) {
        offset += strides[dim];
        break;
      }
      offset -= (sizes[dim] - 1) * strides[dim];
      index[dim] = 0;
    }
  }
}

// "[1,2,3]", for messages.
std::string FormatDims(absl::Span<const int64_t> dims);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_HOST_TENSOR_H_
