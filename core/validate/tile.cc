#include "core/validate/tile.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<std::vector<int64_t>> TiledSizes(const TileAttrs& attrs,
                                                std::span<const int64_t> input_sizes) {
  if (attrs.repeats.size() != input_sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tile.repeats has ", attrs.repeats.size(), " entries; the input has rank ",
                     input_sizes.size(), " and takes one repeat count per dimension"));
  }
  std::vector<int64_t> sizes(input_sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t repeats = attrs.repeats[i];
    if (repeats < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tile.repeats[", i, "] must be >= 1, got ", repeats));
    }
    const std::optional<int64_t> size = CheckedMul(input_sizes[i], repeats);
    if (!size) {
      return absl::InvalidArgumentError(
          absl::StrCat("tile.repeats[", i, "] = ", repeats, " times input.sizes[", i,
                       "] = ", input_sizes[i], " does not fit 64 bits"));
    }
    sizes[i] = *size;
  }
  return sizes;
}

absl::StatusOr<TileGeometry> ValidateTile(const TileAttrs& attrs, const TensorView& input,
                                          std::span<const OutputDesc> outputs,
                                          const Limits& limits) {
  const OperatorInfo& op = InfoOf<TileAttrs>();
  TileGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, TiledSizes(attrs, geometry.input.sizes));
  // The element count (2^32 - 1 at most) is checked here, before anything
  // sized by it exists.
  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, geometry.input.dtype, sizes, outputs, limits));
  geometry.repeats = attrs.repeats;
  return geometry;
}

}  // namespace tensorop
