// GatherElements (DML_GATHER_ELEMENTS_OPERATOR_DESC, ONNX GatherElements):
// every rule of OPERATORS.md "GatherElements", including the range of every
// index value.
#ifndef TENSOROP_CORE_VALIDATE_GATHER_ELEMENTS_H_
#define TENSOROP_CORE_VALIDATE_GATHER_ELEMENTS_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/cancellation.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

// output[c] = input[c with c[axis] = indices[c]]; the output has the indices'
// sizes.
struct GatherElementsGeometry {
  Layout input;
  Layout indices;
  Layout output;
  int64_t axis = 0;
};

// Reads every index (through its strides) to check its range, so `indices.data`
// must stay valid for the call only.
absl::StatusOr<GatherElementsGeometry> ValidateGatherElements(
    const GatherElementsAttrs& attrs, const TensorView& input, const TensorView& indices,
    std::span<const OutputDesc> outputs, const Limits& limits, const StopCheck& stop = NeverStop);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_GATHER_ELEMENTS_H_
