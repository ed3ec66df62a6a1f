// Slice (DML_SLICE1_OPERATOR_DESC): every rule of OPERATORS.md "Slice".
#ifndef TENSOROP_CORE_VALIDATE_SLICE_H_
#define TENSOROP_CORE_VALIDATE_SLICE_H_

#include <span>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// The validated shape of one slice: the output is a window on the input.
struct SliceGeometry {
  Layout input;
  Layout output;
  InputWindow window;
};

absl::StatusOr<SliceGeometry> ValidateSlice(const SliceAttrs& attrs, const TensorView& input,
                                            std::span<const OutputDesc> outputs,
                                            const Limits& limits);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_SLICE_H_
