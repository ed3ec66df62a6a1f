#include "core/validate/join.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> JoinedSizes(const JoinAttrs& attrs,
                                                 std::span<const TensorDesc* const> inputs) {
  const OperatorInfo& op = InfoOf<JoinAttrs>();
  if (inputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs is empty; ", op.name, " takes one or more, \"", NumberedInputName(0), "\" first"));
  }
  const TensorDesc& first = *inputs[0];
  const int64_t rank = static_cast<int64_t>(first.sizes.size());
  for (size_t k = 1; k < inputs.size(); ++k) {
    const TensorDesc& input = *inputs[k];
    const absl::string_view name = NumberedInputName(k);
    if (input.dtype != first.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".dtype is ", DTypeName(input.dtype), "; ", NumberedInputName(0), ".dtype is ",
          DTypeName(first.dtype), " (", op.name, "'s inputs have one dtype)"));
    }
    if (input.sizes.size() != first.sizes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has rank ", input.sizes.size(), "; ",
                                                     NumberedInputName(0), " has rank ", rank, " (",
                                                     op.name, "'s inputs have one rank)"));
    }
  }
  const int64_t axis = attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.name, ".axis = ", axis, " is outside [0, ", rank, ")"));
  }
  std::vector<int64_t> sizes = first.sizes;
  for (size_t k = 1; k < inputs.size(); ++k) {
    const std::vector<int64_t>& other = inputs[k]->sizes;
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis || other[d] == sizes[d]) continue;
      return absl::InvalidArgumentError(
          absl::StrCat(NumberedInputName(k), ".sizes[", d, "] = ", other[d], " must equal ",
                       NumberedInputName(0), ".sizes[", d, "] = ", sizes[d], " (only ", op.name,
                       ".axis = ", axis, " may differ)"));
    }
    const std::optional<int64_t> sum = CheckedAdd(sizes[axis], other[axis]);
    if (!sum) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs_0..", NumberedInputName(k), ".sizes[", axis, "] sum past 2^63 - 1"));
    }
    sizes[axis] = *sum;
  }
  return sizes;
}

absl::StatusOr<JoinGeometry> ValidateJoin(const JoinAttrs& attrs,
                                          std::span<const TensorView* const> inputs,
                                          std::span<const OutputDesc> outputs,
                                          const Limits& limits) {
  const OperatorInfo& op = InfoOf<JoinAttrs>();
  JoinGeometry geometry;
  std::vector<const TensorDesc*> descs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSIGN_OR_RETURN(Layout layout,
                     ValidateInput(*inputs[k], NumberedInputName(k), op.input_rank, limits));
    geometry.inputs.push_back(std::move(layout));
    descs.push_back(&inputs[k]->desc);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, JoinedSizes(attrs, descs));
  geometry.axis = attrs.axis;
  // The element count (2^32 - 1 at most) is checked here, before anything
  // sized by it exists.
  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, geometry.inputs[0].dtype, sizes, outputs, limits));
  int64_t offset = 0;  // the sum fits: it is an output size
  for (const Layout& input : geometry.inputs) {
    geometry.offsets.push_back(offset);
    offset += input.sizes[static_cast<size_t>(attrs.axis)];
  }
  return geometry;
}

}  // namespace tensorop
