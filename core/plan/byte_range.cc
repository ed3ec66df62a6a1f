#include "core/plan/byte_range.h"

#include <algorithm>
#include <cstddef>

namespace tensorop {
namespace {

// [offset + lowest, offset + highest + width) over every coordinate of `sizes`.
// Validation bounds every address inside its buffer, so nothing overflows.
ByteRange Span(int64_t offset, const std::vector<int64_t>& sizes,
               const std::vector<int64_t>& strides, int64_t width, int64_t count) {
  if (count == 0) return {};
  int64_t low = offset;
  int64_t high = offset;
  for (size_t d = 0; d < sizes.size() && d < strides.size(); ++d) {
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? low : high) += reach;
  }
  return {low, high + width};
}

// The smallest range holding both; an empty side adds nothing.
ByteRange Hull(const ByteRange& a, const ByteRange& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {std::min(a.begin, b.begin), std::max(a.end, b.end)};
}

void Widen(std::vector<ByteRange>& ranges, int slot, const ByteRange& range) {
  if (slot < 0) return;
  if (static_cast<size_t>(slot) >= ranges.size()) ranges.resize(static_cast<size_t>(slot) + 1);
  ranges[static_cast<size_t>(slot)] = Hull(ranges[static_cast<size_t>(slot)], range);
}

}  // namespace

ByteRange ReadByteRange(const StridedCopy& copy) {
  return Span(copy.src_offset, copy.sizes, copy.src_strides, copy.element_size, copy.element_count);
}

ByteRange IndicesByteRange(const ScatterWalk& walk) {
  return Span(0, walk.sizes, walk.indices_strides, walk.index_size, walk.element_count);
}

ByteRange UpdatesByteRange(const ScatterWalk& walk) {
  return Span(0, walk.sizes, walk.updates_strides, walk.element_size, walk.element_count);
}

std::vector<ByteRange> InputReadRanges(const ExecutionPlan& plan) {
  std::vector<ByteRange> ranges(plan.input_names.size());
  for (const StridedCopy& copy : plan.copies) Widen(ranges, copy.input_slot, ReadByteRange(copy));
  for (const ScatterWalk& walk : plan.scatters) {
    Widen(ranges, walk.indices_slot, IndicesByteRange(walk));
    Widen(ranges, walk.updates_slot, UpdatesByteRange(walk));
  }
  return ranges;
}

}  // namespace tensorop
