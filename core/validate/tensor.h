// Validation of single tensors: inputs as the caller sent them, and the output
// layouts the caller asks for. Every product and sum is overflow-checked.
#ifndef TENSOROP_CORE_VALIDATE_TENSOR_H_
#define TENSOROP_CORE_VALIDATE_TENSOR_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/limits.h"
#include "core/operator_info.h"
#include "core/tensor.h"

namespace tensorop {

// Checks rank, sizes, strides and element count of a tensor whose bytes are
// still to come (Put): its layout, whose buffer_bytes() the bytes must fill.
absl::StatusOr<Layout> ValidateInputLayout(const TensorDesc& desc, absl::string_view name,
                                           const RankRule& rule, const Limits& limits);

// Checks dtype size, rank, sizes, strides, element count and that `data` holds
// the buffer the layout addresses. `name` prefixes every message ("input").
absl::StatusOr<Layout> ValidateInput(const TensorView& tensor, absl::string_view name,
                                     const RankRule& rule, const Limits& limits);

// Builds the layout of an output whose sizes are known to be valid: packed when
// `strides` is empty, else those strides, which must be >= 1 and must not make
// two elements share an address. `name` is e.g. "outputs[0]".
absl::StatusOr<Layout> ValidateOutputLayout(DType dtype, std::span<const int64_t> sizes,
                                            std::span<const int64_t> strides,
                                            absl::string_view name, const Limits& limits);

// The layout of the one output of an operator that derives its sizes
// (OutputRule::kOneDerived): `outputs` may be empty, or one entry whose sizes,
// when given, must equal `sizes` and whose strides, when given, lay it out.
absl::StatusOr<Layout> ValidateDerivedOutput(const OperatorInfo& op, DType dtype,
                                             std::span<const int64_t> sizes,
                                             std::span<const OutputDesc> outputs,
                                             const Limits& limits);

// The request's `outputs` has `count` entries: INVALID_ARGUMENT when `op`'s
// OutputRule does not allow that many.
absl::Status CheckOutputCount(const OperatorInfo& op, size_t count);

// The element count of `sizes` (each >= 0): INVALID_ARGUMENT when it overflows,
// RESOURCE_EXHAUSTED over the limit.
absl::StatusOr<int64_t> CheckedElementCount(std::span<const int64_t> sizes, absl::string_view name,
                                            const Limits& limits);

// "[2, 3, 4]"; beyond 64 entries "[1, 1, ...(60000000 entries)]".
std::string FormatList(std::span<const int64_t> values);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_TENSOR_H_
