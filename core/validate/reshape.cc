#include "core/validate/reshape.h"

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> ReshapedSizes(const ReshapeAttrs& attrs,
                                                   int64_t element_count) {
  const RankRule& rule = InfoOf<ReshapeAttrs>().input_rank;
  const auto rank = static_cast<int64_t>(attrs.sizes.size());
  if (rank < rule.min_rank || rank > rule.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat("reshape.sizes has ", rank,
                                                   " entries; reshape takes ", rule.min_rank, "..",
                                                   rule.max_rank));
  }
  int64_t inferred = -1;  // the index of the -1
  int64_t product = 1;    // of the other entries
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t size = attrs.sizes[i];
    if (size == -1) {
      if (inferred >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("reshape.sizes[", i,
                                                       "] is a second -1 (reshape.sizes[", inferred,
                                                       "] is one); at most one"));
      }
      inferred = i;
      continue;
    }
    if (size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("reshape.sizes[", i, "] must be >= 1 or -1, got ", size));
    }
    std::optional<int64_t> next = CheckedMul(product, size);
    if (!next) {  // each entry >= 1: past 2^63, surely past the count
      return absl::InvalidArgumentError(absl::StrCat("reshape.sizes ", FormatList(attrs.sizes),
                                                     " hold more than the input's ", element_count,
                                                     " elements"));
    }
    product = *next;
  }
  std::vector<int64_t> sizes = attrs.sizes;
  if (inferred >= 0) {
    if (element_count % product != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reshape.sizes ", FormatList(attrs.sizes), ": the input's ", element_count,
          " elements are not a multiple of ", product, ", the product of the other entries"));
    }
    sizes[inferred] = element_count / product;
  } else if (product != element_count) {
    return absl::InvalidArgumentError(absl::StrCat("reshape.sizes ", FormatList(attrs.sizes),
                                                   " hold ", product, " elements; the input has ",
                                                   element_count));
  }
  return sizes;
}

absl::StatusOr<ReshapeGeometry> ValidateReshape(const ReshapeAttrs& attrs, const TensorView& input,
                                                std::span<const OutputDesc> outputs,
                                                const Limits& limits) {
  const OperatorInfo& op = InfoOf<ReshapeAttrs>();
  ReshapeGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const Layout& in = geometry.input;
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReshapedSizes(attrs, in.element_count));
  ASSIGN_OR_RETURN(geometry.output, ValidateDerivedOutput(op, in.dtype, sizes, outputs, limits));
  return geometry;
}

}  // namespace tensorop
