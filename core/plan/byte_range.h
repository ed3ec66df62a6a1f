// Which bytes of each input a plan reads, so a backend that must move inputs
// (the OpenCL device) moves only those.
#ifndef TENSOROP_CORE_PLAN_BYTE_RANGE_H_
#define TENSOROP_CORE_PLAN_BYTE_RANGE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/plan/plan.h"

namespace tensorop {

// The half-open byte range [begin, end) of a buffer; empty when begin == end.
struct ByteRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

// The bytes `copy` reads from its input: the lowest and highest addresses of
// src_offset + dot(c, src_strides), plus one element. Strides may be negative
// (reversed windows) or 0 (broadcast). Empty when the copy moves nothing.
ByteRange ReadByteRange(const StridedCopy& copy);

// The bytes `walk` reads from its indices and its updates (both addressed from
// byte 0 with non-negative strides). Empty when it applies no update.
ByteRange IndicesByteRange(const ScatterWalk& walk);
ByteRange UpdatesByteRange(const ScatterWalk& walk);

// The bytes `walk` reads from its input (every position along the axis, which
// any index may choose) and from its indices.
ByteRange InputByteRange(const GatherWalk& walk);
ByteRange IndicesByteRange(const GatherWalk& walk);

// For each input slot of `plan`, the smallest range holding every byte its
// copies and walks read; empty for a slot nothing reads.
std::vector<ByteRange> InputReadRanges(const ExecutionPlan& plan);

// Whether `copy` reads and writes its elements as one forward run: its
// element_count * element_size bytes from src_offset into dst_offset.
bool IsForwardRun(const StridedCopy& copy);

// For each input slot of `plan`, whether it is read only by copies of forward
// runs that move, together, no more bytes than its read range (no byte twice),
// and, when there are several, each of at least `several_min_bytes`: a backend
// that must move inputs (the OpenCL device) can move those runs straight into
// their outputs, one transfer each and no copy after it. The bound keeps many
// small runs, whose transfers cost more than copies, together. False for a
// slot nothing reads.
std::vector<bool> InputsReadAsRuns(const ExecutionPlan& plan, int64_t several_min_bytes);

// Bytes of one input slot.
struct SlotBytes {
  int input_slot = 0;
  ByteRange range;
};

// The input bytes that output `output` of `plan` is, byte for byte: when one
// copy writes the whole output buffer (no padding, no walk) from a forward
// contiguous run of one input. A server can then answer with those bytes
// where they are instead of a copy of them. Nullopt otherwise, and for an
// empty output.
std::optional<SlotBytes> OutputAsInputBytes(const ExecutionPlan& plan, int output);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_BYTE_RANGE_H_
