#include "core/plan/byte_range.h"

#include <algorithm>
#include <cstddef>
#include <limits>

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

ByteRange InputByteRange(const GatherWalk& walk) {
  std::vector<int64_t> sizes = walk.sizes;
  std::vector<int64_t> strides = walk.input_strides;
  sizes.push_back(walk.axis_size);
  strides.push_back(walk.input_axis_stride);
  return Span(0, sizes, strides, walk.element_size, walk.element_count);
}

ByteRange IndicesByteRange(const GatherWalk& walk) {
  return Span(0, walk.sizes, walk.indices_strides, walk.index_size, walk.element_count);
}

std::vector<ByteRange> InputReadRanges(const ExecutionPlan& plan) {
  std::vector<ByteRange> ranges(plan.input_names.size());
  for (const StridedCopy& copy : plan.copies) Widen(ranges, copy.input_slot, ReadByteRange(copy));
  for (const ScatterWalk& walk : plan.scatters) {
    Widen(ranges, walk.indices_slot, IndicesByteRange(walk));
    Widen(ranges, walk.updates_slot, UpdatesByteRange(walk));
  }
  for (const GatherWalk& walk : plan.gathers) {
    Widen(ranges, walk.input_slot, InputByteRange(walk));
    Widen(ranges, walk.indices_slot, IndicesByteRange(walk));
  }
  return ranges;
}

// Every dimension of more than one element strided by the bytes of those inside it.
bool IsForwardRun(const StridedCopy& copy) {
  int64_t inner_bytes = copy.element_size;
  for (size_t d = copy.sizes.size(); d-- > 0;) {
    if (copy.sizes[d] == 1) continue;
    if (copy.src_strides[d] != inner_bytes || copy.dst_strides[d] != inner_bytes) return false;
    inner_bytes *= copy.sizes[d];
  }
  return true;
}

std::vector<bool> InputsReadAsRuns(const ExecutionPlan& plan, int64_t several_min_bytes) {
  const std::vector<ByteRange> ranges = InputReadRanges(plan);
  // Per slot, the bytes of its runs (-1 once anything else reads it), how
  // many and the smallest.
  std::vector<int64_t> run_bytes(ranges.size(), 0);
  std::vector<int64_t> runs(ranges.size(), 0);
  std::vector<int64_t> smallest(ranges.size(), std::numeric_limits<int64_t>::max());
  const auto read = [&](int slot, int64_t bytes) {
    if (slot < 0 || static_cast<size_t>(slot) >= run_bytes.size()) return;
    const size_t at = static_cast<size_t>(slot);
    run_bytes[at] = run_bytes[at] < 0 || bytes < 0 ? -1 : run_bytes[at] + bytes;
    ++runs[at];
    smallest[at] = std::min(smallest[at], bytes);
  };
  const auto read_otherwise = [&](int slot) { read(slot, -1); };
  for (const StridedCopy& copy : plan.copies) {
    if (copy.element_count <= 0) continue;
    read(copy.input_slot, IsForwardRun(copy) ? copy.element_count * copy.element_size : -1);
  }
  for (const ScatterWalk& walk : plan.scatters) {
    read_otherwise(walk.indices_slot);
    read_otherwise(walk.updates_slot);
  }
  for (const GatherWalk& walk : plan.gathers) {
    read_otherwise(walk.input_slot);
    read_otherwise(walk.indices_slot);
  }
  std::vector<bool> as_runs(ranges.size());
  for (size_t slot = 0; slot < ranges.size(); ++slot) {
    as_runs[slot] = run_bytes[slot] > 0 && run_bytes[slot] <= ranges[slot].size() &&
                    (runs[slot] == 1 || smallest[slot] >= several_min_bytes);
  }
  return as_runs;
}

std::optional<SlotBytes> OutputAsInputBytes(const ExecutionPlan& plan, int output) {
  for (const ScatterWalk& walk : plan.scatters) {
    if (walk.output_slot == output) return std::nullopt;
  }
  for (const GatherWalk& walk : plan.gathers) {
    if (walk.output_slot == output) return std::nullopt;
  }
  for (const StridedCopy& fill : plan.fills) {
    if (fill.output_slot == output) return std::nullopt;
  }
  const StridedCopy* only = nullptr;
  for (const StridedCopy& copy : plan.copies) {
    if (copy.output_slot != output) continue;
    if (only != nullptr) return std::nullopt;
    only = &copy;
  }
  if (only == nullptr || only->element_count <= 0 || only->dst_offset != 0 ||
      !IsForwardRun(*only)) {
    return std::nullopt;
  }
  const int64_t bytes = only->element_count * only->element_size;
  if (bytes != plan.outputs[static_cast<size_t>(output)].buffer_bytes()) return std::nullopt;
  return SlotBytes{.input_slot = only->input_slot,
                   .range = {only->src_offset, only->src_offset + bytes}};
}

}  // namespace tensorop
