// Test tensors in every layout, a runner for plans on oneTBB, and naive
// reference implementations written straight from OPERATORS.md (no plans, no
// merged dimensions), for the kernel test matrix.
#ifndef TENSOROP_TESTS_CORE_KERNELS_REFERENCE_H_
#define TENSOROP_TESTS_CORE_KERNELS_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace tensorop::testing {

enum class LayoutKind {
  kPacked,     // no strides
  kPadded,     // every pitch larger than packed
  kBroadcast,  // some strides 0
  kPermuted,   // packed strides in another dimension order
};
inline constexpr LayoutKind kAllLayouts[] = {LayoutKind::kPacked, LayoutKind::kPadded,
                                             LayoutKind::kBroadcast, LayoutKind::kPermuted};
std::string LayoutName(LayoutKind kind);

// A tensor the test owns. Every byte of the buffer is random, so NaN payloads,
// -0.0 and extreme integers all occur.
struct OwnedTensor {
  TensorDesc desc;
  std::vector<std::byte> bytes;
  TensorView view() const { return {desc, bytes}; }
};

// Explicit strides of `kind` for `sizes` (empty for kPacked).
std::vector<int64_t> MakeStrides(std::span<const int64_t> sizes, LayoutKind kind,
                                 std::mt19937_64& rng);
OwnedTensor MakeTensor(DType dtype, std::vector<int64_t> sizes, LayoutKind kind,
                       std::mt19937_64& rng);
// A tensor with the given element values (packed), for indices.
OwnedTensor MakeIndexTensor(DType dtype, std::vector<int64_t> sizes,
                            std::span<const int64_t> values, LayoutKind kind, std::mt19937_64& rng);

// The dtypes an index tensor may have.
inline constexpr DType kIndexDTypes[] = {DType::kInt32, DType::kInt64, DType::kUint32,
                                         DType::kUint64};

// `count` indices into an axis of `axis_size`, half of the signed ones spelled
// negative.
std::vector<int64_t> RandomIndices(int64_t count, int64_t axis_size, DType index_type,
                                   std::mt19937_64& rng);
// product(sizes).
int64_t ElementCount(std::span<const int64_t> sizes);

// The bits of one element, read through the strides (packed when none).
uint64_t ElementBits(const TensorDesc& desc, std::span<const std::byte> bytes,
                     std::span<const int64_t> coords);

// Calls fn(coords) for every coordinate of `sizes` in row-major order.
template <typename Fn>
void ForEachCoord(std::span<const int64_t> sizes, Fn&& fn) {
  for (int64_t size : sizes) {
    if (size == 0) return;
  }
  std::vector<int64_t> coords(sizes.size(), 0);
  while (true) {
    fn(std::span<const int64_t>(coords));
    size_t d = sizes.size();
    while (d > 0) {
      --d;
      if (++coords[d] < sizes[d]) break;
      coords[d] = 0;
      if (d == 0) return;
    }
    if (sizes.empty()) return;
  }
}

struct OwnedOutput {
  Layout layout;
  std::vector<std::byte> bytes;
};

enum class Backend { kTbb, kOpenCL };
inline constexpr Backend kAllBackends[] = {Backend::kTbb, Backend::kOpenCL};
std::string BackendName(Backend backend);

// PlanOperator, then execution on `backend` into zeroed buffers. OpenCL runs on
// the first device the ICD loader offers (PoCL's CPU device here); having none
// is an error, never a skip.
absl::StatusOr<std::vector<OwnedOutput>> RunOn(Backend backend, const OpRequest& request,
                                               const Limits& limits = {});
inline absl::StatusOr<std::vector<OwnedOutput>> RunOnTbb(const OpRequest& request,
                                                         const Limits& limits = {}) {
  return RunOn(Backend::kTbb, request, limits);
}

// Logical values, packed row-major.
struct Expected {
  std::vector<int64_t> sizes;
  std::vector<uint64_t> values;
};

Expected ReferenceSlice(const SliceAttrs& attrs, const OwnedTensor& input,
                        std::span<const int64_t> output_sizes);
// nullopt where OPERATORS.md calls the request invalid.
std::optional<Expected> ReferenceStridedSlice(const StridedSliceAttrs& attrs,
                                              const OwnedTensor& input);
std::vector<Expected> ReferenceSplit(int64_t axis, const OwnedTensor& input,
                                     const std::vector<std::vector<int64_t>>& sizes);
Expected ReferenceScatterElements(int64_t axis, const OwnedTensor& input,
                                  const OwnedTensor& indices, const OwnedTensor& updates);

// OPERATORS.md's formulas, element by element; `perm` already resolved (never
// empty), the output sizes already known.
Expected ReferenceTranspose(std::span<const int64_t> perm, const OwnedTensor& input);
Expected ReferenceReshape(std::span<const int64_t> output_sizes, const OwnedTensor& input);
Expected ReferenceExpand(std::span<const int64_t> output_sizes, const OwnedTensor& input);
Expected ReferenceTile(std::span<const int64_t> repeats, const OwnedTensor& input);
Expected ReferenceGather(int64_t axis, const OwnedTensor& input, const OwnedTensor& indices);
// `inputs` one after another along `axis`, in turn.
Expected ReferenceJoin(int64_t axis, const std::vector<OwnedTensor>& inputs);
Expected ReferenceGatherElements(int64_t axis, const OwnedTensor& input,
                                 const OwnedTensor& indices);
// OPERATORS.md "Pad"'s formula per dimension; `value_bits` in constant mode.
Expected ReferencePad(const PadAttrs& attrs, uint64_t value_bits, const OwnedTensor& input);

// The output has the expected sizes, its layout's strides, and every logical
// element's bits equal the expected ones; padding bytes stay zero.
::testing::AssertionResult OutputMatches(const OwnedOutput& output, const Expected& expected);

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_CORE_KERNELS_REFERENCE_H_
