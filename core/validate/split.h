// Split (DML_SPLIT_OPERATOR_DESC): every rule of OPERATORS.md "Split".
#ifndef TENSOROP_CORE_VALIDATE_SPLIT_H_
#define TENSOROP_CORE_VALIDATE_SPLIT_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/cancellation.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// Each output is a window on the input starting at its offset along the axis.
struct SplitGeometry {
  Layout input;
  std::vector<Layout> outputs;
  std::vector<InputWindow> windows;
};

absl::StatusOr<SplitGeometry> ValidateSplit(const SplitAttrs& attrs, const TensorView& input,
                                            std::span<const OutputDesc> outputs,
                                            const Limits& limits,
                                            const StopCheck& stop = NeverStop);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_SPLIT_H_
