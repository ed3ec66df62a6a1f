#include "client/host_tensor.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/status_macros.h"

namespace tensorop::client {
namespace {

struct DTypeInfo {
  v1::DType dtype;
  absl::string_view name;
  int size;
  bool is_float;
};

constexpr DTypeInfo kDTypes[] = {
    {v1::FLOAT64, "float64", 8, true}, {v1::FLOAT32, "float32", 4, true},
    {v1::FLOAT16, "float16", 2, true}, {v1::INT64, "int64", 8, false},
    {v1::INT32, "int32", 4, false},    {v1::INT16, "int16", 2, false},
    {v1::INT8, "int8", 1, false},      {v1::UINT64, "uint64", 8, false},
    {v1::UINT32, "uint32", 4, false},  {v1::UINT16, "uint16", 2, false},
    {v1::UINT8, "uint8", 1, false},    {v1::BFLOAT16, "bfloat16", 2, true},
    {v1::BOOL, "bool", 1, false},
};

const DTypeInfo* Find(v1::DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

int ElementSize(v1::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? 0 : info->size;
}

absl::string_view DTypeName(v1::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? absl::string_view() : info->name;
}

std::optional<v1::DType> DTypeFromName(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloat(v1::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info != nullptr && info->is_float;
}

std::string FormatDims(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> sizes) {
  int64_t elements = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sizes[", i, "] is negative (", sizes[i], ")"));
    }
    // Past kMaxElements the product is rejected anyway, so clamping keeps it exact
    // where it matters and free of overflow.
    if (__builtin_mul_overflow(elements, sizes[i], &elements)) elements = kMaxElements + 1;
  }
  if (elements > kMaxElements) {
    return absl::InvalidArgumentError(
        absl::StrCat("sizes ", FormatDims(sizes), " hold more than ", kMaxElements, " elements"));
  }
  return elements;
}

absl::StatusOr<int64_t> LayoutBytes(const HostTensor& tensor) {
  const int element_size = ElementSize(tensor.dtype);
  if (element_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", static_cast<int>(tensor.dtype), " is not an element type"));
  }
  if (!tensor.strides.empty() && tensor.strides.size() != tensor.sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strides ", FormatDims(tensor.strides), " do not match sizes ", FormatDims(tensor.sizes)));
  }
  ASSIGN_OR_RETURN(const int64_t elements, ElementCount(tensor.sizes));
  // kMaxElements * 8 fits easily in 64 bits.
  if (tensor.strides.empty()) return elements * element_size;
  for (size_t i = 0; i < tensor.strides.size(); ++i) {
    if (tensor.strides[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("strides[", i, "] is negative (", tensor.strides[i], ")"));
    }
  }
  if (elements == 0) return 0;
  // The element span: 1 + sum((sizes[i]-1) * strides[i]).
  int64_t span = 1;
  bool overflow = false;
  for (size_t i = 0; i < tensor.sizes.size(); ++i) {
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(tensor.sizes[i] - 1, tensor.strides[i], &reach);
    overflow |= __builtin_add_overflow(span, reach, &span);
  }
  int64_t span_bytes = 0;
  overflow |= __builtin_mul_overflow(span, int64_t{element_size}, &span_bytes);
  if (overflow) {
    return absl::InvalidArgumentError(absl::StrCat("strides ", FormatDims(tensor.strides),
                                                   " over sizes ", FormatDims(tensor.sizes),
                                                   " overflow 64 bits"));
  }
  return span_bytes;
}

absl::StatusOr<int64_t> CheckLayout(const HostTensor& tensor) {
  ASSIGN_OR_RETURN(const int64_t layout_bytes, LayoutBytes(tensor));
  const int64_t bytes = static_cast<int64_t>(tensor.data.size());
  if (tensor.strides.empty() && bytes != layout_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("data holds ", bytes, " bytes but packed sizes ",
                                                   FormatDims(tensor.sizes), " need ",
                                                   layout_bytes));
  }
  if (bytes < layout_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data holds ", bytes, " bytes but strides ", FormatDims(tensor.strides),
                     " over sizes ", FormatDims(tensor.sizes), " reach ", layout_bytes));
  }
  return ElementCount(tensor.sizes);
}

std::vector<int64_t> PackedStrides(absl::Span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i > 0; --i) {
    strides[i - 1] = stride;
    // Only an empty tensor can overflow here (a 0 further out); its strides are
    // never used to read, so saturating is enough.
    if (__builtin_mul_overflow(stride, sizes[i - 1], &stride)) stride = INT64_MAX;
  }
  return strides;
}

std::vector<int64_t> EffectiveStrides(const HostTensor& tensor) {
  return tensor.strides.empty() ? PackedStrides(tensor.sizes) : tensor.strides;
}

}  // namespace tensorop::client
