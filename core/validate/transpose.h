// Transpose (ONNX Transpose): every rule of OPERATORS.md "Transpose".
#ifndef TENSOROP_CORE_VALIDATE_TRANSPOSE_H_
#define TENSOROP_CORE_VALIDATE_TRANSPOSE_H_

#include <span>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// The output is the input with its dimensions permuted: a window whose
// strides are the input's, permuted.
struct TransposeGeometry {
  Layout input;
  Layout output;
  InputWindow window;
};

absl::StatusOr<TransposeGeometry> ValidateTranspose(const TransposeAttrs& attrs,
                                                    const TensorView& input,
                                                    std::span<const OutputDesc> outputs,
                                                    const Limits& limits);

// perm as given, or reversed when empty; INVALID_ARGUMENT unless it is a
// permutation of 0..rank-1. For OutputSizes too, which has no input bytes.
absl::StatusOr<std::vector<int64_t>> TransposePermutation(const TransposeAttrs& attrs,
                                                          int64_t rank);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_TRANSPOSE_H_
