// Which bytes of each input a plan reads, so a backend that must move inputs
// (the OpenCL device) moves only those.
#ifndef TENSOROP_CORE_PLAN_BYTE_RANGE_H_
#define TENSOROP_CORE_PLAN_BYTE_RANGE_H_

#include <cstdint>
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

// For each input slot of `plan`, the smallest range holding every byte its
// copies and walks read; empty for a slot nothing reads.
std::vector<ByteRange> InputReadRanges(const ExecutionPlan& plan);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_BYTE_RANGE_H_
