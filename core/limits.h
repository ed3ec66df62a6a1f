// Server-configurable limits. Exceeding one is RESOURCE_EXHAUSTED: a request the
// server could run with more resources.
#ifndef TENSOROP_CORE_LIMITS_H_
#define TENSOROP_CORE_LIMITS_H_

#include <cstdint>

namespace tensorop {

// The spec's hard ceiling: a tensor holds at most 2^32 - 1 elements.
inline constexpr int64_t kMaxTensorElements = (int64_t{1} << 32) - 1;

struct Limits {
  // Bytes of all inputs plus all output buffers of one request.
  int64_t max_request_bytes = int64_t{4} << 30;
  // Elements of any one tensor (never above kMaxTensorElements).
  int64_t max_tensor_elements = kMaxTensorElements;
  // Rank of a strided_slice output (inputs are capped by the spec at 32).
  int max_output_rank = 64;
};

}  // namespace tensorop

#endif  // TENSOROP_CORE_LIMITS_H_
