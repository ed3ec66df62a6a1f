#include "core/validate/tensor.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/checked_math.h"
#include "core/status_macros.h"

namespace tensorop {
namespace {

// 1 + sum((sizes[i]-1) * strides[i]) elements, or 0 for an empty tensor. The
// sum is checked even for an empty tensor: its strides still must fit 64 bits.
absl::StatusOr<int64_t> BufferExtent(std::span<const int64_t> sizes,
                                     std::span<const int64_t> strides, absl::string_view name) {
  int64_t last = 0;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) {
      empty = true;
      continue;
    }
    std::optional<int64_t> reach = CheckedMul(sizes[i] - 1, strides[i]);
    std::optional<int64_t> sum = reach ? CheckedAdd(last, *reach) : std::nullopt;
    if (!sum || !CheckedAdd(*sum, 1)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": sizes ", FormatList(sizes),
                                                     " with strides ", FormatList(strides),
                                                     " reach past 2^63 - 1 elements"));
    }
    last = *sum;
  }
  return empty ? 0 : last + 1;
}

absl::Status CheckBufferBytes(int64_t elements, DType dtype, absl::string_view name,
                              const Limits& limits) {
  if (!CheckedMul(elements, ElementSize(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", elements, " elements of ", DTypeName(dtype), " overflow 64 bits"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatList(std::span<const int64_t> values) {
  // Lists longer than any valid rank come from hostile requests (60 M sizes):
  // the message names the length instead of carrying them all.
  constexpr size_t kMaxListed = 64;
  if (values.size() > kMaxListed) {
    return absl::StrCat("[", absl::StrJoin(values.subspan(0, 2), ", "), ", ...(", values.size(),
                        " entries)]");
  }
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

absl::Status CheckOutputCount(const OperatorInfo& op, size_t count) {
  switch (op.outputs) {
    case OutputRule::kOneGiven:
      if (count == 1) return absl::OkStatus();
      break;
    case OutputRule::kOneDerived:
      if (count <= 1) return absl::OkStatus();
      break;
    case OutputRule::kOneOrMoreGiven:
      if (count >= 1) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("outputs is empty; ", op.name, " needs at least one output"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("outputs has ", count, " entries; ", op.name, " has exactly one output"));
}

absl::StatusOr<Layout> ValidateDerivedOutput(const OperatorInfo& op, DType dtype,
                                             std::span<const int64_t> sizes,
                                             std::span<const OutputDesc> outputs,
                                             const Limits& limits) {
  std::span<const int64_t> strides;
  if (!outputs.empty()) {
    RETURN_IF_ERROR(CheckOutputCount(op, outputs.size()));
    // Empty: not given (a rank-0 output's sizes are empty either way).
    const std::vector<int64_t>& given = outputs[0].sizes;
    if (!given.empty() && !std::equal(given.begin(), given.end(), sizes.begin(), sizes.end())) {
      return absl::InvalidArgumentError(absl::StrCat("outputs[0].sizes is ", FormatList(given),
                                                     "; ", op.name, " produces ",
                                                     FormatList(sizes)));
    }
    strides = outputs[0].strides;
  }
  return ValidateOutputLayout(dtype, sizes, strides, OutputName(0), limits);
}

absl::StatusOr<int64_t> CheckedElementCount(std::span<const int64_t> sizes, absl::string_view name,
                                            const Limits& limits) {
  // The product of the non-zero sizes must fit even when a zero makes the count
  // 0: packed strides are built from it, and the answer must not depend on
  // where the zero stands.
  int64_t product = 1;
  bool empty = false;
  for (int64_t size : sizes) {
    empty = empty || size == 0;
    std::optional<int64_t> next = CheckedMul(product, size == 0 ? 1 : size);
    if (!next) {
      return absl::InvalidArgumentError(absl::StrCat(name, ".sizes ", FormatList(sizes),
                                                     ": the element count overflows 64 bits"));
    }
    product = *next;
  }
  const int64_t count = empty ? 0 : product;
  const int64_t limit = std::min(limits.max_tensor_elements, kMaxTensorElements);
  if (count > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ".sizes ", FormatList(sizes), " hold ",
                                                     count, " elements; the limit is ", limit));
  }
  return count;
}

absl::StatusOr<Layout> ValidateInputLayout(const TensorDesc& desc, absl::string_view name,
                                           const RankRule& rule, const Limits& limits) {
  const int64_t rank = static_cast<int64_t>(desc.sizes.size());
  if (rank < rule.min_rank || rank > rule.max_rank) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".sizes has ", rank, " dimensions; ",
                                                   rule.op, " takes rank ", rule.min_rank, "..",
                                                   rule.max_rank));
  }
  const int64_t min_size = rule.allow_zero_sizes ? 0 : 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (desc.sizes[i] < min_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".sizes[", i, "] must be >= ", min_size, ", got ", desc.sizes[i]));
    }
  }
  if (!desc.strides.empty() && static_cast<int64_t>(desc.strides.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".strides has ", desc.strides.size(),
                                                   " entries; ", name, ".sizes has ", rank));
  }
  for (size_t i = 0; i < desc.strides.size(); ++i) {
    if (desc.strides[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".strides[", i, "] must be >= 0, got ", desc.strides[i]));
    }
  }

  Layout layout;
  layout.dtype = desc.dtype;
  layout.sizes = desc.sizes;
  ASSIGN_OR_RETURN(layout.element_count, CheckedElementCount(desc.sizes, name, limits));
  if (desc.strides.empty()) {
    layout.strides = PackedStrides(desc.sizes);
    layout.buffer_elements = layout.element_count;
    return layout;
  }
  layout.strides = desc.strides;
  ASSIGN_OR_RETURN(layout.buffer_elements, BufferExtent(desc.sizes, desc.strides, name));
  RETURN_IF_ERROR(CheckBufferBytes(layout.buffer_elements, desc.dtype, name, limits));
  return layout;
}

absl::StatusOr<Layout> ValidateInput(const TensorView& tensor, absl::string_view name,
                                     const RankRule& rule, const Limits& limits) {
  const TensorDesc& desc = tensor.desc;
  ASSIGN_OR_RETURN(Layout layout, ValidateInputLayout(desc, name, rule, limits));
  const int64_t element_size = ElementSize(desc.dtype);
  const int64_t bytes = static_cast<int64_t>(tensor.data.size());
  if (desc.strides.empty()) {
    // element_count <= 2^32-1, so the product cannot overflow.
    if (bytes != layout.element_count * element_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".data has ", bytes, " bytes; packed ", DTypeName(desc.dtype), " ",
          FormatList(desc.sizes), " needs exactly ", layout.element_count * element_size));
    }
    return layout;
  }
  if (bytes % element_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data has ", bytes, " bytes, not a multiple of the ",
                     DTypeName(desc.dtype), " element size ", element_size));
  }
  if (bytes < layout.buffer_elements * element_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data has ", bytes / element_size, " elements; ", DTypeName(desc.dtype),
                     " ", FormatList(desc.sizes), " with strides ", FormatList(desc.strides),
                     " needs at least ", layout.buffer_elements));
  }
  return layout;
}

absl::StatusOr<Layout> ValidateOutputLayout(DType dtype, std::span<const int64_t> sizes,
                                            std::span<const int64_t> strides,
                                            absl::string_view name, const Limits& limits) {
  Layout layout;
  layout.dtype = dtype;
  layout.sizes.assign(sizes.begin(), sizes.end());
  ASSIGN_OR_RETURN(layout.element_count, CheckedElementCount(sizes, name, limits));
  if (strides.empty()) {
    layout.strides = PackedStrides(sizes);
    layout.buffer_elements = layout.element_count;
    return layout;
  }
  if (strides.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".strides has ", strides.size(), " entries; ", name, ".sizes has ", sizes.size()));
  }
  for (size_t i = 0; i < strides.size(); ++i) {
    if (strides[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".strides[", i, "] must be >= 1, got ", strides[i]));
    }
  }
  layout.strides.assign(strides.begin(), strides.end());
  ASSIGN_OR_RETURN(layout.buffer_elements, BufferExtent(sizes, strides, name));
  RETURN_IF_ERROR(CheckBufferBytes(layout.buffer_elements, dtype, name, limits));

  // No two elements may share an address. Taken in ascending stride order, each
  // dimension's stride must clear everything the smaller ones reach. This is the
  // usual sufficient test (it rejects some exotic interleavings that happen not to
  // collide); it is exact for every permutation of packed and padded layouts.
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t reach = 0;  // the largest offset the dimensions seen so far address
  for (size_t i : order) {
    if (sizes[i] <= 1) continue;
    if (reach > 0 && strides[i] <= reach) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".strides ", FormatList(strides), " overlap: dimension ", i,
                       " (stride ", strides[i], ") steps inside offsets 0..", reach,
                       ", which the dimensions with smaller strides already address"));
    }
    reach += (sizes[i] - 1) * strides[i];  // bounded by BufferExtent
  }
  return layout;
}

}  // namespace tensorop
