// ScatterElements (DML_SCATTER_OPERATOR_DESC): every rule of OPERATORS.md
// "ScatterElements", including the range of every index value.
#ifndef TENSOROP_CORE_VALIDATE_SCATTER_ELEMENTS_H_
#define TENSOROP_CORE_VALIDATE_SCATTER_ELEMENTS_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/cancellation.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

struct ScatterElementsGeometry {
  Layout input;
  Layout indices;
  Layout updates;
  Layout output;
  int64_t axis = 0;
};

// Reads every index (through its strides) to check its range, so `indices.data`
// must stay valid for the call only.
absl::StatusOr<ScatterElementsGeometry> ValidateScatterElements(
    const ScatterElementsAttrs& attrs, const TensorView& input, const TensorView& indices,
    const TensorView& updates, std::span<const OutputDesc> outputs, const Limits& limits,
    const StopCheck& stop = NeverStop);  // asked while the index values are read

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_SCATTER_ELEMENTS_H_
