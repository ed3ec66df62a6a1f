// One operator request over one zeroed input "input", validated and planned by
// core's entry point (PlanOperator): for the tests of the operators that take
// one input and derive their output.
#ifndef TENSOROP_TESTS_SUPPORT_ONE_INPUT_H_
#define TENSOROP_TESTS_SUPPORT_ONE_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/tensor.h"

namespace tensorop::testing {

struct OneInput {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides = {};  // elements; empty: packed
  int64_t buffer_elements = -1;       // -1: exactly what the layout addresses

  // Plans `attrs` on a zeroed buffer of this input, with `outputs` as asked.
  absl::StatusOr<ExecutionPlan> Plan(OpAttrs attrs, std::vector<OutputDesc> outputs = {},
                                     const Limits& limits = Limits{}) const {
    int64_t elements = buffer_elements;
    if (elements < 0) {
      elements = 1;
      for (size_t i = 0; i < sizes.size(); ++i) {
        elements += (sizes[i] - 1) * (strides.empty() ? Packed(i) : strides[i]);
      }
    }
    const std::vector<std::byte> data(static_cast<size_t>(elements * ElementSize(dtype)));
    OpRequest request{std::move(attrs),
                      {{"input", TensorView{{dtype, sizes, strides}, data}}},
                      std::move(outputs)};
    return PlanOperator(request, limits);
  }

 private:
  int64_t Packed(size_t i) const {
    int64_t stride = 1;
    for (size_t k = i + 1; k < sizes.size(); ++k) stride *= sizes[k];
    return stride;
  }
};

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_ONE_INPUT_H_
