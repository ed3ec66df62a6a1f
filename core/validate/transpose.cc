#include "core/validate/transpose.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> TransposePermutation(const TransposeAttrs& attrs,
                                                          int64_t rank) {
  std::vector<int64_t> perm = attrs.perm;
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("transpose.perm has ", perm.size(), " entries; input has rank ", rank));
  }
  std::vector<int64_t> first_seen_at(static_cast<size_t>(rank), -1);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t axis = perm[i];
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("transpose.perm[", i, "] = ", axis, " is outside [0, ", rank, ")"));
    }
    int64_t& seen = first_seen_at[static_cast<size_t>(axis)];
    if (seen >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("transpose.perm[", i, "] = ", axis, " repeats transpose.perm[", seen, "]"));
    }
    seen = i;
  }
  return perm;
}

absl::StatusOr<TransposeGeometry> ValidateTranspose(const TransposeAttrs& attrs,
                                                    const TensorView& input,
                                                    std::span<const OutputDesc> outputs,
                                                    const Limits& limits) {
  const OperatorInfo& op = InfoOf<TransposeAttrs>();
  TransposeGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const Layout& in = geometry.input;
  const int64_t rank = static_cast<int64_t>(in.sizes.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePermutation(attrs, rank));
  std::vector<int64_t> sizes(static_cast<size_t>(rank));
  geometry.window.strides.resize(static_cast<size_t>(rank));
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto from = static_cast<size_t>(perm[i]);
    sizes[i] = in.sizes[from];
    geometry.window.strides[i] = sizes[i] > 1 ? in.strides[from] : 0;
  }
  ASSIGN_OR_RETURN(geometry.output, ValidateDerivedOutput(op, in.dtype, sizes, outputs, limits));
  return geometry;
}

}  // namespace tensorop
