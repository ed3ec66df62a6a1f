#include "core/validate/scatter_elements.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/indices.h"
#include "core/validate/tensor.h"

namespace tensorop {
absl::StatusOr<ScatterElementsGeometry> ValidateScatterElements(
    const ScatterElementsAttrs& attrs, const TensorView& input, const TensorView& indices,
    const TensorView& updates, std::span<const OutputDesc> outputs, const Limits& limits,
    const StopCheck& stop) {
  const OperatorInfo& op = InfoOf<ScatterElementsAttrs>();
  ScatterElementsGeometry geometry;
  const RankRule& rule = op.input_rank;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], rule, limits));
  ASSIGN_OR_RETURN(geometry.indices, ValidateInput(indices, op.input_names[1], rule, limits));
  ASSIGN_OR_RETURN(geometry.updates, ValidateInput(updates, op.input_names[2], rule, limits));
  const Layout& in = geometry.input;
  const Layout& idx = geometry.indices;
  const Layout& upd = geometry.updates;
  const int64_t rank = static_cast<int64_t>(in.sizes.size());

  for (const auto& [name, layout] :
       {std::pair<absl::string_view, const Layout*>{op.input_names[1], &idx},
        {op.input_names[2], &upd}}) {
    if (static_cast<int64_t>(layout->sizes.size()) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " has rank ", layout->sizes.size(), "; input has rank ", rank));
    }
  }
  const int64_t axis = attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("scatter_elements.axis = ", axis, " is outside [0, ", rank, ")"));
  }
  RETURN_IF_ERROR(CheckIndexDType(idx));
  if (upd.dtype != in.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("updates.dtype is ", DTypeName(upd.dtype),
                                                   "; input.dtype is ", DTypeName(in.dtype)));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (upd.sizes[d] != idx.sizes[d]) {
      return absl::InvalidArgumentError(absl::StrCat("updates.sizes[", d, "] = ", upd.sizes[d],
                                                     " must equal indices.sizes[", d,
                                                     "] = ", idx.sizes[d]));
    }
    if (d != axis && idx.sizes[d] != in.sizes[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "indices.sizes[", d, "] = ", idx.sizes[d], " must equal input.sizes[", d,
          "] = ", in.sizes[d], " (only scatter_elements.axis = ", axis, " may differ)"));
    }
  }

  ASSIGN_OR_RETURN(geometry.output, ValidateDerivedOutput(op, in.dtype, in.sizes, outputs, limits));
  geometry.axis = axis;
  RETURN_IF_ERROR(CheckIndexValues(op.name, idx, indices.data, axis, in.sizes[axis], stop));
  return geometry;
}

}  // namespace tensorop
