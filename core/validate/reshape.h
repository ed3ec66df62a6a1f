// Reshape (ONNX Reshape, no allowzero): every rule of OPERATORS.md "Reshape".
#ifndef TENSOROP_CORE_VALIDATE_RESHAPE_H_
#define TENSOROP_CORE_VALIDATE_RESHAPE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

// The output holds the input's elements in row-major order under new sizes;
// whether that is a window on the input's buffer is planning's question.
struct ReshapeGeometry {
  Layout input;
  Layout output;
};

absl::StatusOr<ReshapeGeometry> ValidateReshape(const ReshapeAttrs& attrs, const TensorView& input,
                                                std::span<const OutputDesc> outputs,
                                                const Limits& limits);

// reshape.sizes with its -1 resolved against `element_count` elements; the
// rules on `sizes` and the count. For OutputSizes too, which has no input bytes.
absl::StatusOr<std::vector<int64_t>> ReshapedSizes(const ReshapeAttrs& attrs,
                                                   int64_t element_count);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_RESHAPE_H_
