#include "core/validate/indices.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace tensorop {
namespace {

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

}  // namespace

absl::Status CheckIndexDType(const Layout& indices) {
  const DType dtype = indices.dtype;
  if (dtype == DType::kInt32 || dtype == DType::kInt64 || dtype == DType::kUint32 ||
      dtype == DType::kUint64) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("indices.dtype is ", DTypeName(dtype),
                                                 "; it must be int32, int64, uint32 or uint64"));
}

absl::Status CheckIndexValues(absl::string_view op, const Layout& indices,
                              std::span<const std::byte> data, int64_t axis, int64_t axis_size,
                              const StopCheck& stop) {
  if (indices.buffer_elements == indices.element_count &&
      indices.strides == PackedStrides(indices.sizes)) {
    ASSIGN_OR_RETURN(const bool in_range, PackedIndicesInRange(indices, data, axis_size, stop));
    if (in_range) return absl::OkStatus();
  }
  StopPoller poller(stop);
  const int64_t rank = static_cast<int64_t>(indices.sizes.size());
  const int64_t element_size = ElementSize(indices.dtype);
  // A broadcast dimension (stride 0) reads the same values at every coordinate
  // along it, and row-major order meets them first at coordinate 0 there: the
  // walk takes it as size 1. So indices of a few bytes broadcast to 2^32 - 1
  // elements cost their bytes, not 2^32 reads.
  std::vector<int64_t> sizes = indices.sizes;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (indices.strides[d] == 0) sizes[d] = 1;
    count *= sizes[d];
  }
  std::vector<int64_t> coords(rank, 0);
  int64_t offset = 0;  // elements
  for (int64_t n = 0; n < count; ++n) {
    IndexValue index = ReadIndex(data.data() + offset * element_size, indices.dtype);
    const int64_t adjusted = index.value < 0 ? index.value + axis_size : index.value;
    if (index.too_large || adjusted < 0 || adjusted >= axis_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("indices[", absl::StrJoin(coords, ", "),
                       "] = ", index.too_large ? index.text : absl::StrCat(index.value),
                       " is outside [", -axis_size, ", ", axis_size, ") for input.sizes[", axis,
                       "] = ", axis_size, " (", op, ".axis = ", axis, ")"));
    }
    if (poller.Tick()) return poller.status();
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += indices.strides[d];
      if (++coords[d] < sizes[d]) break;
      offset -= coords[d] * indices.strides[d];
      coords[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace tensorop
