// Gather (DML_GATHER_OPERATOR_DESC, ONNX Gather): every rule of OPERATORS.md
// "Gather", including the range of every index value.
#ifndef TENSOROP_CORE_VALIDATE_GATHER_H_
#define TENSOROP_CORE_VALIDATE_GATHER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/cancellation.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

// output[a, b, e] = input[a, indices[b], e], with a the `axis` coordinates
// before the axis, b the indices' and e the input's after it.
struct GatherGeometry {
  Layout input;
  Layout indices;
  Layout output;
  int64_t axis = 0;
};

// Reads every index (through its strides) to check its range, so `indices.data`
// must stay valid for the call only. The checks run in OPERATORS.md's order:
// sizes and dtypes, the element limit, then the index values.
absl::StatusOr<GatherGeometry> ValidateGather(const GatherAttrs& attrs, const TensorView& input,
                                              const TensorView& indices,
                                              std::span<const OutputDesc> outputs,
                                              const Limits& limits,
                                              const StopCheck& stop = NeverStop);

// input.sizes[0:axis] ++ indices.sizes ++ input.sizes[axis+1:]: INVALID_ARGUMENT
// for an axis or rank the rules refuse. For OutputSizes too, which has no bytes.
absl::StatusOr<std::vector<int64_t>> GatheredSizes(const GatherAttrs& attrs,
                                                   std::span<const int64_t> input_sizes,
                                                   std::span<const int64_t> indices_sizes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_GATHER_H_
