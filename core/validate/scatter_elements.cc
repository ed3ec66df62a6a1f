#include "core/validate/scatter_elements.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"

namespace tensorop {
namespace {

bool IsIndexType(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kInt64 || dtype == DType::kUint32 ||
         dtype == DType::kUint64;
}

// Reads one index as a wide signed value; unsigned values past INT64_MAX come
// back as INT64_MAX + 1 stand-ins via `too_large`.
struct IndexValue {
  int64_t value;
  bool too_large;  // an unsigned value that does not fit int64
  std::string text;
};

IndexValue ReadIndex(const std::byte* at, DType dtype) {
  switch (dtype) {
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, at, sizeof v);
      return {v, false, ""};
    }
    case DType::kUint32: {
      uint32_t v;
      std::memcpy(&v, at, sizeof v);
      return {static_cast<int64_t>(v), false, ""};
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, at, sizeof v);
      return {v, false, ""};
    }
    default: {
      uint64_t v;
      std::memcpy(&v, at, sizeof v);
      if (v > static_cast<uint64_t>(INT64_MAX)) return {0, true, absl::StrCat(v)};
      return {static_cast<int64_t>(v), false, ""};
    }
  }
}

// Whether the `count` packed values of type T at `data` all lie in
// [-axis_size, axis_size): a branch-free loop the compiler vectorizes.
template <typename T>
bool AllInRange(const std::byte* data, int64_t count, int64_t axis_size) {
  bool in_range = true;
  for (int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    if constexpr (std::is_signed_v<T>) {
      in_range &=
          static_cast<int64_t>(value) >= -axis_size && static_cast<int64_t>(value) < axis_size;
    } else {
      in_range &= static_cast<uint64_t>(value) < static_cast<uint64_t>(axis_size);
    }
  }
  return in_range;
}

// Packed indices, in blocks between stop checks: whether every value is valid
// (then the row-major walk that names the first bad one is not needed).
absl::StatusOr<bool> PackedIndicesInRange(const Layout& indices, std::span<const std::byte> data,
                                          int64_t axis_size, const StopCheck& stop) {
  constexpr int64_t kBlock = int64_t{1} << 20;
  const int64_t element_size = ElementSize(indices.dtype);
  for (int64_t start = 0; start < indices.element_count; start += kBlock) {
    RETURN_IF_ERROR(stop());
    const std::byte* at = data.data() + start * element_size;
    const int64_t count = std::min(kBlock, indices.element_count - start);
    const bool in_range =
        indices.dtype == DType::kInt32    ? AllInRange<int32_t>(at, count, axis_size)
        : indices.dtype == DType::kUint32 ? AllInRange<uint32_t>(at, count, axis_size)
        : indices.dtype == DType::kInt64  ? AllInRange<int64_t>(at, count, axis_size)
                                          : AllInRange<uint64_t>(at, count, axis_size);
    if (!in_range) return false;
  }
  return true;
}

// Row-major walk over the indices; the first out-of-range value is the error.
absl::Status CheckIndexValues(const Layout& indices, std::span<const std::byte> data, int64_t axis,
                              int64_t axis_size, const StopCheck& stop) {
  if (indices.buffer_elements == indices.element_count &&
      indices.strides == PackedStrides(indices.sizes)) {
    ASSIGN_OR_RETURN(const bool in_range, PackedIndicesInRange(indices, data, axis_size, stop));
    if (in_range) return absl::OkStatus();
  }
  StopPoller poller(stop);
  const int64_t rank = static_cast<int64_t>(indices.sizes.size());
  const int64_t element_size = ElementSize(indices.dtype);
  std::vector<int64_t> coords(rank, 0);
  int64_t offset = 0;  // elements
  for (int64_t n = 0; n < indices.element_count; ++n) {
    IndexValue index = ReadIndex(data.data() + offset * element_size, indices.dtype);
    const int64_t adjusted = index.value < 0 ? index.value + axis_size : index.value;
    if (index.too_large || adjusted < 0 || adjusted >= axis_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("indices[", absl::StrJoin(coords, ", "),
                       "] = ", index.too_large ? index.text : absl::StrCat(index.value),
                       " is outside [", -axis_size, ", ", axis_size, ") for input.sizes[", axis,
                       "] = ", axis_size, " (scatter_elements.axis = ", axis, ")"));
    }
    if (poller.Tick()) return poller.status();
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += indices.strides[d];
      if (++coords[d] < indices.sizes[d]) break;
      offset -= coords[d] * indices.strides[d];
      coords[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace

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
  if (!IsIndexType(idx.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("indices.dtype is ", DTypeName(idx.dtype),
                                                   "; it must be int32, int64, uint32 or uint64"));
  }
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
  RETURN_IF_ERROR(CheckIndexValues(idx, indices.data, axis, in.sizes[axis], stop));
  return geometry;
}

}  // namespace tensorop
