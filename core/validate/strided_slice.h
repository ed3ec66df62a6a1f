// StridedSlice (OpenVINO StridedSlice-1): every rule of OPERATORS.md
// "StridedSlice", including all five masks.
#ifndef TENSOROP_CORE_VALIDATE_STRIDED_SLICE_H_
#define TENSOROP_CORE_VALIDATE_STRIDED_SLICE_H_

#include <span>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// The output is a window on the input: shrunk dimensions fold into the base,
// new axes are size-1 dimensions with stride 0.
struct StridedSliceGeometry {
  Layout input;
  Layout output;
  InputWindow window;
};

absl::StatusOr<StridedSliceGeometry> ValidateStridedSlice(const StridedSliceAttrs& attrs,
                                                          const TensorView& input,
                                                          std::span<const OutputDesc> outputs,
                                                          const Limits& limits);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_STRIDED_SLICE_H_
