#include "core/validate/gather.h"

#include "absl/strings/str_cat.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/indices.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> GatheredSizes(const GatherAttrs& attrs,
                                                   std::span<const int64_t> input_sizes,
                                                   std::span<const int64_t> indices_sizes) {
  const int64_t rank = static_cast<int64_t>(input_sizes.size());
  const int64_t index_rank = static_cast<int64_t>(indices_sizes.size());
  const int64_t axis = attrs.axis;
  const int64_t max_rank = InfoOf<GatherAttrs>().input_rank.max_rank;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather.axis = ", axis, " is outside [0, ", rank, ")"));
  }
  if (rank + index_rank - 1 > max_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the output's rank would be ", rank + index_rank - 1, " (input rank ", rank,
        " + indices rank ", index_rank, " - 1); gather's output takes rank 1..", max_rank));
  }
  std::vector<int64_t> sizes(input_sizes.begin(), input_sizes.begin() + axis);
  sizes.insert(sizes.end(), indices_sizes.begin(), indices_sizes.end());
  sizes.insert(sizes.end(), input_sizes.begin() + axis + 1, input_sizes.end());
  return sizes;
}

absl::StatusOr<GatherGeometry> ValidateGather(const GatherAttrs& attrs, const TensorView& input,
                                              const TensorView& indices,
                                              std::span<const OutputDesc> outputs,
                                              const Limits& limits, const StopCheck& stop) {
  const OperatorInfo& op = InfoOf<GatherAttrs>();
  GatherGeometry geometry;
  const RankRule& rule = op.input_rank;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], rule, limits));
  ASSIGN_OR_RETURN(geometry.indices, ValidateInput(indices, op.input_names[1], rule, limits));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                   GatheredSizes(attrs, geometry.input.sizes, geometry.indices.sizes));
  RETURN_IF_ERROR(CheckIndexDType(geometry.indices));
  // The element count (2^32 - 1 at most) is checked here, before the index
  // values are read and before anything sized by it exists.
  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, geometry.input.dtype, sizes, outputs, limits));
  geometry.axis = attrs.axis;
  RETURN_IF_ERROR(CheckIndexValues(op.name, geometry.indices, indices.data, attrs.axis,
                                   geometry.input.sizes[attrs.axis], stop));
  return geometry;
}

}  // namespace tensorop
