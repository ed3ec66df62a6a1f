// Join (DML_JOIN_OPERATOR_DESC, ONNX Concat): every rule of OPERATORS.md "Join".
#ifndef TENSOROP_CORE_VALIDATE_JOIN_H_
#define TENSOROP_CORE_VALIDATE_JOIN_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

// Input k lands in the output from offsets[k] along the axis.
struct JoinGeometry {
  std::vector<Layout> inputs;
  Layout output;
  int64_t axis = 0;
  std::vector<int64_t> offsets;
};

// `inputs` in their numbered order (inputs_0, inputs_1, ...), at least one.
absl::StatusOr<JoinGeometry> ValidateJoin(const JoinAttrs& attrs,
                                          std::span<const TensorView* const> inputs,
                                          std::span<const OutputDesc> outputs,
                                          const Limits& limits);

// The inputs' sizes with their sizes along the axis summed: INVALID_ARGUMENT for
// an axis, rank or size the rules refuse (checked in OPERATORS.md's order, with
// planning's messages). For OutputSizes too, which has no bytes.
absl::StatusOr<std::vector<int64_t>> JoinedSizes(const JoinAttrs& attrs,
                                                 std::span<const TensorDesc* const> inputs);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_JOIN_H_
