#include "core/validate/strided_slice.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {
namespace {

struct Mask {
  absl::string_view name;
  const std::vector<int64_t>* bits;
  // Missing entries are 0; callers only ask for i < M.
  bool operator[](size_t i) const { return i < bits->size() && (*bits)[i] == 1; }
};

// Entries past M are ignored, so only the first M are checked for 0/1.
absl::Status CheckMask(const Mask& mask, size_t steps) {
  const size_t checked = std::min(mask.bits->size(), steps);
  for (size_t i = 0; i < checked; ++i) {
    const int64_t bit = (*mask.bits)[i];
    if (bit != 0 && bit != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("strided_slice.", mask.name, "[", i, "] must be 0 or 1, got ", bit));
    }
  }
  return absl::OkStatus();
}

// The number of elements begin, begin+step, ... strictly before `end` in the
// step's direction: max(0, ceil((end - begin) / step)), computed unsigned so a
// step of INT64_MIN cannot overflow. |end - begin| <= n + 1 fits.
int64_t RangeCount(int64_t begin, int64_t end, int64_t step) {
  if (step > 0) {
    if (end <= begin) return 0;
    const uint64_t distance = static_cast<uint64_t>(end - begin);
    const uint64_t magnitude = static_cast<uint64_t>(step);
    return static_cast<int64_t>(distance / magnitude + (distance % magnitude != 0));
  }
  if (end >= begin) return 0;
  const uint64_t distance = static_cast<uint64_t>(begin - end);
  const uint64_t magnitude = 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>(distance / magnitude + (distance % magnitude != 0));
}

// A negative bound counts from the end once. Adding n (>= 0) to a negative
// value cannot overflow.
int64_t FromEnd(int64_t value, int64_t n) { return value < 0 ? value + n : value; }

}  // namespace

absl::StatusOr<StridedSliceGeometry> ValidateStridedSlice(const StridedSliceAttrs& attrs,
                                                          const TensorView& input,
                                                          std::span<const OutputDesc> outputs,
                                                          const Limits& limits) {
  const OperatorInfo& op = InfoOf<StridedSliceAttrs>();
  StridedSliceGeometry geometry;
  ASSIGN_OR_RETURN(geometry.input, ValidateInput(input, op.input_names[0], op.input_rank, limits));
  const Layout& in = geometry.input;
  const int64_t rank = static_cast<int64_t>(in.sizes.size());
  const size_t steps = attrs.begin.size();

  if (attrs.end.size() != steps) {
    return absl::InvalidArgumentError(absl::StrCat("strided_slice.end has ", attrs.end.size(),
                                                   " entries; strided_slice.begin has ", steps));
  }
  if (!attrs.stride.empty() && attrs.stride.size() != steps) {
    return absl::InvalidArgumentError(absl::StrCat("strided_slice.stride has ", attrs.stride.size(),
                                                   " entries; strided_slice.begin has ", steps));
  }
  const Mask begin_mask{"begin_mask", &attrs.begin_mask};
  const Mask end_mask{"end_mask", &attrs.end_mask};
  const Mask new_axis{"new_axis_mask", &attrs.new_axis_mask};
  const Mask shrink{"shrink_axis_mask", &attrs.shrink_axis_mask};
  const Mask ellipsis{"ellipsis_mask", &attrs.ellipsis_mask};
  for (const Mask& mask : {begin_mask, end_mask, new_axis, shrink, ellipsis}) {
    RETURN_IF_ERROR(CheckMask(mask, steps));
  }

  int64_t new_axis_count = 0;
  int64_t ellipsis_step = -1;
  for (size_t i = 0; i < steps; ++i) {
    if (new_axis[i] + shrink[i] + ellipsis[i] > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("strided_slice step ", i,
                       " sets more than one of ellipsis_mask, new_axis_mask, shrink_axis_mask"));
    }
    if (ellipsis[i]) {
      if (ellipsis_step >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("strided_slice.ellipsis_mask has more than one bit set (steps ",
                         ellipsis_step, " and ", i, ")"));
      }
      ellipsis_step = static_cast<int64_t>(i);
    }
    new_axis_count += new_axis[i];
  }
  const int64_t consuming =
      static_cast<int64_t>(steps) - new_axis_count - (ellipsis_step >= 0 ? 1 : 0);
  if (consuming > rank) {
    return absl::InvalidArgumentError(absl::StrCat("strided_slice consumes ", consuming,
                                                   " input dimensions; input has rank ", rank));
  }
  // Every new axis adds an output dimension: refuse absurd step lists before
  // building anything for them.
  if (new_axis_count > limits.max_output_rank) {
    return absl::ResourceExhaustedError(
        absl::StrCat("strided_slice.new_axis_mask adds ", new_axis_count,
                     " dimensions; the output rank limit is ", limits.max_output_rank));
  }

  std::vector<int64_t> out_sizes;
  InputWindow& window = geometry.window;
  int64_t dim = 0;  // next input dimension to consume
  auto copy_whole = [&](int64_t d) {
    out_sizes.push_back(in.sizes[d]);
    window.strides.push_back(in.sizes[d] > 1 ? in.strides[d] : 0);
  };
  for (size_t i = 0; i < steps; ++i) {
    if (ellipsis[i]) {
      for (int64_t k = 0; k < rank - consuming; ++k) copy_whole(dim++);
      continue;
    }
    if (new_axis[i]) {
      out_sizes.push_back(1);
      window.strides.push_back(0);
      continue;
    }
    const int64_t n = in.sizes[dim];
    if (shrink[i]) {
      const int64_t index = FromEnd(attrs.begin[i], n);
      if (index < 0 || index >= n) {
        return absl::InvalidArgumentError(absl::StrCat(
            "strided_slice.begin[", i, "] = ", attrs.begin[i], " is outside [", -n, ", ", n,
            ") of input.sizes[", dim, "] = ", n, " (shrink_axis_mask[", i, "] is 1)"));
      }
      window.base += index * in.strides[dim];
      ++dim;
      continue;
    }
    const int64_t step = attrs.stride.empty() ? 1 : attrs.stride[i];
    if (step == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("strided_slice.stride[", i, "] must not be 0"));
    }
    int64_t begin, end;
    if (step > 0) {
      begin = begin_mask[i] ? 0 : std::clamp<int64_t>(FromEnd(attrs.begin[i], n), 0, n);
      end = end_mask[i] ? n : std::clamp<int64_t>(FromEnd(attrs.end[i], n), 0, n);
    } else {
      begin = begin_mask[i]
                  ? n - 1
                  : std::clamp<int64_t>(FromEnd(attrs.begin[i], n), 0, std::max<int64_t>(n - 1, 0));
      end = end_mask[i] ? -1 : std::clamp<int64_t>(FromEnd(attrs.end[i], n), -1, n);
    }
    const int64_t count = n == 0 ? 0 : RangeCount(begin, end, step);
    out_sizes.push_back(count);
    if (count > 0) window.base += begin * in.strides[dim];
    // |step| * (count - 1) < n when count > 1, so the product stays in the buffer.
    window.strides.push_back(count > 1 ? step * in.strides[dim] : 0);
    ++dim;
  }
  // Without an ellipsis, dimensions after the last step are copied whole.
  while (dim < rank) copy_whole(dim++);

  const int64_t output_rank = static_cast<int64_t>(out_sizes.size());
  if (output_rank > limits.max_output_rank) {
    return absl::ResourceExhaustedError(absl::StrCat("strided_slice output has rank ", output_rank,
                                                     "; the limit is ", limits.max_output_rank));
  }
  // An empty output reads nothing; keep its window trivially in bounds.
  if (std::find(out_sizes.begin(), out_sizes.end(), 0) != out_sizes.end()) {
    window.base = 0;
  }

  ASSIGN_OR_RETURN(geometry.output,
                   ValidateDerivedOutput(op, in.dtype, out_sizes, outputs, limits));
  return geometry;
}

}  // namespace tensorop
