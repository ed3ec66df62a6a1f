// Operator requests as plain data, and the one entry point that validates and
// plans them. Nothing here knows about gRPC or protobuf.
#ifndef TENSOROP_CORE_OPERATOR_H_
#define TENSOROP_CORE_OPERATOR_H_

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/attrs.h"
#include "core/cancellation.h"
#include "core/limits.h"
#include "core/operator_info.h"
#include "core/plan/plan.h"
#include "core/tensor.h"

namespace tensorop {

// "slice", "strided_slice", "split", "scatter_elements": the names used in the
// conformance format, in error messages and in logs (kOperators' names).
absl::string_view OpName(const OpAttrs& attrs);

struct NamedTensor {
  std::string name;
  TensorView tensor;
};

struct OpRequest {
  OpAttrs attrs;
  std::vector<NamedTensor> inputs = {};  // any order; names per operator
  std::vector<OutputDesc> outputs = {};  // one per output, where the op needs them
};

// Validates every rule of OPERATORS.md for `request` and plans its execution.
// INVALID_ARGUMENT names the field, index and values; RESOURCE_EXHAUSTED when a
// limit is passed. The plan's input slots follow plan.input_names.
// `stop` is asked at bounded intervals of the long loops (every index value,
// every output): its first non-OK status is returned.
absl::StatusOr<ExecutionPlan> PlanOperator(const OpRequest& request, const Limits& limits,
                                           const StopCheck& stop = NeverStop);

// An input's description without its bytes.
struct NamedDesc {
  std::string name;
  TensorDesc desc;
};

// The sizes of the outputs of `attrs`' operator as they follow from the
// attributes and the inputs' dtypes and sizes (input "input", input "indices"
// for gather and gather_elements, the numbered inputs for join; strides and
// bytes are not read), for a front end that describes the outputs before the
// request is planned (v2's models). Split's outputs, whose sizes its callers
// give, take `split_sizes` in turn along the axis. Strided slice's, gather's and
// join's rules are checked as planning checks them, with the same messages; a
// slice window or split axis that breaks a rule is left for planning to name.
absl::StatusOr<std::vector<std::vector<int64_t>>> OutputSizes(
    const OpAttrs& attrs, const std::vector<NamedDesc>& inputs,
    std::span<const int64_t> split_sizes = {});

}  // namespace tensorop

#endif  // TENSOROP_CORE_OPERATOR_H_
