// Execution plans: what validation and planning hand to a backend. Plain data in
// bytes; a backend binds buffers to the slots and walks the plan, nothing more
// (XNNPACK's reshape/setup split).
#ifndef TENSOROP_CORE_PLAN_PLAN_H_
#define TENSOROP_CORE_PLAN_PLAN_H_

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

#include "core/tensor.h"

namespace tensorop {

// dst[dst_offset + dot(c, dst_strides)] = src[src_offset + dot(c, src_strides)]
// for every coordinate c in `sizes`. Dimensions of size 1 are dropped and
// neighbours that are contiguous in both source and destination are merged, so
// the innermost dimension is as long as it can be.
struct StridedCopy {
  int input_slot = 0;
  int output_slot = 0;
  int element_size = 1;               // 1, 2, 4 or 8
  std::vector<int64_t> sizes;         // outermost first; empty: one element
  std::vector<int64_t> src_strides;   // bytes, any sign
  std::vector<int64_t> dst_strides;   // bytes, > 0
  int64_t src_offset = 0;             // bytes
  int64_t dst_offset = 0;             // bytes
  int64_t element_count = 0;          // product(sizes); 0: nothing to copy
};

// After the copy of `input` into the output: for every coordinate c of indices,
// in row-major order, output[c with c[axis] = k] = updates[c], where k is the
// index (plus axis_size when negative). Indices are already checked in range.
// The walk is split into rows: `outer` dimensions (all but axis) and the axis,
// innermost, so rows never collide and run in parallel while each row keeps its
// order.
struct ScatterRows {
  int indices_slot = 1;
  int updates_slot = 2;
  int output_slot = 0;
  int element_size = 1;   // of updates/output
  int index_size = 4;     // 4 or 8
  bool index_signed = true;
  int64_t axis_size = 1;  // input.sizes[axis]
  std::vector<int64_t> outer_sizes;
  std::vector<int64_t> indices_outer_strides;  // bytes
  std::vector<int64_t> updates_outer_strides;  // bytes
  std::vector<int64_t> output_outer_strides;   // bytes
  int64_t row_length = 0;                      // indices.sizes[axis]
  int64_t indices_row_stride = 0;              // bytes
  int64_t updates_row_stride = 0;              // bytes
  int64_t output_axis_stride = 0;              // bytes
  int64_t element_count = 0;                   // updates to apply
};

struct ExecutionPlan {
  absl::string_view op;                       // "slice", ...
  std::vector<absl::string_view> input_names; // slot i binds the input named so
  std::vector<Layout> outputs;               // the buffers the caller provides
  std::vector<StridedCopy> copies;           // disjoint outputs: any order
  std::vector<ScatterRows> scatters;         // after every copy
  int64_t bytes_moved = 0;                   // for scheduling decisions
};

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_PLAN_H_
