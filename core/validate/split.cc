#include "core/validate/split.h"

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {

absl::StatusOr<SplitGeometry> ValidateSplit(const SplitAttrs& attrs, const TensorView& input,
                                            std::span<const OutputDesc> outputs,
                                            const Limits& limits, const StopCheck& stop) {
  const OperatorInfo& op = InfoOf<SplitAttrs>();
  SplitGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const Layout& in = geometry.input;
  const int64_t rank = static_cast<int64_t>(in.sizes.size());
  RETURN_IF_ERROR(CheckOutputCount(op, outputs.size()));
  const int64_t axis = attrs.axis;
  if (axis < 0 || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("split.axis = ", axis, " is outside [0, ", rank, ")"));
  }

  int64_t offset = 0;       // along the axis, where the next output starts
  StopPoller poller(stop);  // millions of outputs take seconds to check
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (poller.Tick(16)) return poller.status();
    const std::string name = OutputName(j);
    const std::vector<int64_t>& sizes = outputs[j].sizes;
    if (static_cast<int64_t>(sizes.size()) != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".sizes has ", sizes.size(), " entries; input has rank ", rank));
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) {
        if (sizes[d] < 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ".sizes[", d, "] must be >= 1, got ", sizes[d]));
        }
      } else if (sizes[d] != in.sizes[d]) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ".sizes[", d, "] = ", sizes[d], " must equal input.sizes[", d,
                         "] = ", in.sizes[d], " (only split.axis = ", axis, " may differ)"));
      }
    }
    std::optional<int64_t> next = CheckedAdd(offset, sizes[axis]);
    if (!next || *next > in.sizes[axis]) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[0..", j, "].sizes[", axis, "] sum to ",
                       next ? absl::StrCat(*next) : std::string("more than 2^63 - 1"),
                       ", past input.sizes[", axis, "] = ", in.sizes[axis]));
    }
    InputWindow window;
    window.base = offset * in.strides[axis];
    window.strides = in.strides;
    geometry.windows.push_back(std::move(window));
    ASSIGN_OR_RETURN(Layout layout,
                     ValidateOutputLayout(in.dtype, sizes, outputs[j].strides, name, limits));
    geometry.outputs.push_back(std::move(layout));
    offset = *next;
  }
  if (offset != in.sizes[axis]) {
    return absl::InvalidArgumentError(absl::StrCat("outputs sizes along split.axis = ", axis,
                                                   " sum to ", offset, "; input.sizes[", axis,
                                                   "] = ", in.sizes[axis]));
  }
  return geometry;
}

}  // namespace tensorop
