#include "core/validate/slice.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {
namespace {

absl::Status CheckLength(std::span<const int64_t> values, absl::string_view field, int64_t rank) {
  if (static_cast<int64_t>(values.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", values.size(), " entries; input has rank ", rank));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SliceGeometry> ValidateSlice(const SliceAttrs& attrs, const TensorView& input,
                                            std::span<const OutputDesc> outputs,
                                            const Limits& limits) {
  const OperatorInfo& op = InfoOf<SliceAttrs>();
  SliceGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const int64_t rank = static_cast<int64_t>(geometry.input.sizes.size());
  RETURN_IF_ERROR(CheckLength(attrs.offsets, "slice.offsets", rank));
  RETURN_IF_ERROR(CheckLength(attrs.window_sizes, "slice.window_sizes", rank));
  RETURN_IF_ERROR(CheckLength(attrs.window_strides, "slice.window_strides", rank));
  RETURN_IF_ERROR(CheckOutputCount(op, outputs.size()));
  const OutputDesc& output = outputs[0];
  RETURN_IF_ERROR(CheckLength(output.sizes, "outputs[0].sizes", rank));

  geometry.window.strides.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t offset = attrs.offsets[i];
    const int64_t window = attrs.window_sizes[i];
    const int64_t step = attrs.window_strides[i];
    const int64_t input_size = geometry.input.sizes[i];
    if (offset < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice.offsets[", i, "] must be >= 0, got ", offset));
    }
    if (window < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice.window_sizes[", i, "] must be >= 1, got ", window));
    }
    std::optional<int64_t> window_end = CheckedAdd(offset, window);
    if (!window_end || *window_end > input_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice.offsets[", i, "] + slice.window_sizes[", i, "] = ", offset, " + ",
                       window, " exceeds input.sizes[", i, "] = ", input_size));
    }
    if (step == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice.window_strides[", i, "] must not be 0"));
    }
    // |step| computed unsigned: -INT64_MIN does not fit an int64.
    const uint64_t magnitude =
        step < 0 ? 0 - static_cast<uint64_t>(step) : static_cast<uint64_t>(step);
    const int64_t max_size =
        1 + static_cast<int64_t>(static_cast<uint64_t>(window - 1) / magnitude);
    const int64_t size = output.sizes[i];
    if (size < 1 || size > max_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[0].sizes[", i, "] = ", size, " is outside [1, ", max_size,
                       "]: 1 + (slice.window_sizes[", i, "] - 1) / |slice.window_strides[", i,
                       "]| = 1 + (", window, " - 1) / ", magnitude));
    }
    const int64_t start = offset + (step < 0 ? window - 1 : 0);
    const int64_t input_stride = geometry.input.strides[i];
    // Both stay inside the input's buffer extent, which fits in 64 bits.
    geometry.window.base += start * input_stride;
    geometry.window.strides[i] = size > 1 ? step * input_stride : 0;
  }
  ASSIGN_OR_RETURN(geometry.output, ValidateOutputLayout(geometry.input.dtype, output.sizes,
                                                         output.strides, OutputName(0), limits));
  return geometry;
}

}  // namespace tensorop
