// Expand (ONNX Expand): every rule of OPERATORS.md "Expand".
#ifndef TENSOROP_CORE_VALIDATE_EXPAND_H_
#define TENSOROP_CORE_VALIDATE_EXPAND_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// The output is the input broadcast: a window with stride 0 along every
// dimension the input has size 1 in, or does not have.
struct ExpandGeometry {
  Layout input;
  Layout output;
  InputWindow window;
};

absl::StatusOr<ExpandGeometry> ValidateExpand(const ExpandAttrs& attrs, const TensorView& input,
                                              std::span<const OutputDesc> outputs,
                                              const Limits& limits);

// The output's sizes: both lists aligned at their last entry, the larger of
// each pair. INVALID_ARGUMENT for a rule broken; the element count is left to
// the caller. For OutputSizes too, which has no input bytes.
absl::StatusOr<std::vector<int64_t>> ExpandedSizes(const ExpandAttrs& attrs,
                                                   std::span<const int64_t> input_sizes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_EXPAND_H_
