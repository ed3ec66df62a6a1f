#include "core/validate/expand.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> ExpandedSizes(const ExpandAttrs& attrs,
                                                   std::span<const int64_t> input_sizes) {
  const RankRule& rule = InfoOf<ExpandAttrs>().input_rank;
  const auto given = static_cast<int64_t>(attrs.sizes.size());
  if (given < rule.min_rank || given > rule.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expand.sizes has ", given, " entries; expand takes ", rule.min_rank, "..", rule.max_rank));
  }
  for (int64_t i = 0; i < given; ++i) {
    if (attrs.sizes[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("expand.sizes[", i, "] must be >= 1, got ", attrs.sizes[i]));
    }
  }
  const auto rank = static_cast<int64_t>(input_sizes.size());
  const int64_t out_rank = std::max(rank, given);
  std::vector<int64_t> sizes(static_cast<size_t>(out_rank));
  for (int64_t j = 0; j < out_rank; ++j) {
    // Position j of the output is entry j - (out_rank - n) of a list of n.
    const int64_t i = j - (out_rank - rank);
    const int64_t k = j - (out_rank - given);
    const int64_t from_input = i >= 0 ? input_sizes[i] : 1;
    const int64_t from_attrs = k >= 0 ? attrs.sizes[k] : 1;
    if (from_input != from_attrs && from_input != 1 && from_attrs != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expand.sizes[", k, "] = ", from_attrs, " does not broadcast with input.sizes[", i,
          "] = ", from_input, ": they must be equal or one of them 1"));
    }
    sizes[j] = std::max(from_input, from_attrs);
  }
  return sizes;
}

absl::StatusOr<ExpandGeometry> ValidateExpand(const ExpandAttrs& attrs, const TensorView& input,
                                              std::span<const OutputDesc> outputs,
                                              const Limits& limits) {
  const OperatorInfo& op = InfoOf<ExpandAttrs>();
  ExpandGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const Layout& in = geometry.input;
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ExpandedSizes(attrs, in.sizes));
  // The element count (2^32 - 1 at most) is checked here, before anything
  // sized by it exists.
  ASSIGN_OR_RETURN(geometry.output, ValidateDerivedOutput(op, in.dtype, sizes, outputs, limits));
  const size_t leading = sizes.size() - in.sizes.size();
  geometry.window.strides.assign(sizes.size(), 0);
  for (size_t i = 0; i < in.sizes.size(); ++i) {
    if (in.sizes[i] > 1) geometry.window.strides[leading + i] = in.strides[i];
  }
  return geometry;
}

}  // namespace tensorop
