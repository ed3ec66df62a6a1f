#include "core/validate/gather_elements.h"

#include "absl/strings/str_cat.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/indices.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<GatherElementsGeometry> ValidateGatherElements(
    const GatherElementsAttrs& attrs, const TensorView& input, const TensorView& indices,
    std::span<const OutputDesc> outputs, const Limits& limits, const StopCheck& stop) {
  const OperatorInfo& op = InfoOf<GatherElementsAttrs>();
  GatherElementsGeometry geometry;
  const RankRule& rule = op.input_rank;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], rule, limits));
  ASSIGN_OR_RETURN(geometry.indices, ValidateInput(indices, op.input_names[1], rule, limits));
  const Layout& in = geometry.input;
  const Layout& idx = geometry.indices;
  const int64_t rank = static_cast<int64_t>(in.sizes.size());
  if (static_cast<int64_t>(idx.sizes.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("indices has rank ", idx.sizes.size(), "; input has rank ", rank));
  }
  const int64_t axis = attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather_elements.axis = ", axis, " is outside [0, ", rank, ")"));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && idx.sizes[d] != in.sizes[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "indices.sizes[", d, "] = ", idx.sizes[d], " must equal input.sizes[", d,
          "] = ", in.sizes[d], " (only gather_elements.axis = ", axis, " may differ)"));
    }
  }
  RETURN_IF_ERROR(CheckIndexDType(idx));
  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, in.dtype, idx.sizes, outputs, limits));
  geometry.axis = axis;
  RETURN_IF_ERROR(CheckIndexValues(op.name, idx, indices.data, axis, in.sizes[axis], stop));
  return geometry;
}

}  // namespace tensorop
