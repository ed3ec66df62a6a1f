// Execution plans: what validation and planning hand to a backend. Plain data in
// bytes; a backend binds buffers to the slots and walks the plan, nothing more
// (XNNPACK's reshape/setup split).
#ifndef TENSOROP_CORE_PLAN_PLAN_H_
#define TENSOROP_CORE_PLAN_PLAN_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/operator_info.h"
#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// dst[dst_offset + dot(c, dst_strides)] = src[src_offset + dot(c, src_strides)]
// for every coordinate c in `sizes`. Dimensions of size 1 are dropped and
// neighbours that are contiguous in both source and destination are merged, so
// the innermost dimension is as long as it can be.
struct StridedCopy {
  int input_slot = 0;
  int output_slot = 0;
  int element_size = 1;              // 1, 2, 4 or 8
  std::vector<int64_t> sizes;        // outermost first; empty: one element
  std::vector<int64_t> src_strides;  // bytes, any sign
  std::vector<int64_t> dst_strides;  // bytes, > 0
  int64_t src_offset = 0;            // bytes
  int64_t dst_offset = 0;            // bytes
  int64_t element_count = 0;         // product(sizes); 0: nothing to copy
};

// After the copy of `input` into the output: for every coordinate c of indices,
// in row-major order, output[c with c[axis] = k] = updates[c], where k is the
// index (plus axis_size when negative). Indices are already checked in range.
// The walk visits the indices' coordinates in row-major order (size-1
// dimensions dropped); the output address is the walk's output offset, where
// the axis contributes nothing, plus k * output_axis_stride. Updates collide only
// when every coordinate but the axis agrees, so blocks split `partition_dim`
// (never the axis) run in parallel and each keeps row-major order inside: the
// last update wins, deterministically.
struct ScatterWalk {
  int indices_slot = 1;
  int updates_slot = 2;
  int output_slot = 0;
  int element_size = 1;  // of updates/output
  int index_size = 4;    // 4 or 8
  bool index_signed = true;
  int64_t axis_size = 1;                 // input.sizes[axis]
  std::vector<int64_t> sizes;            // outermost first
  std::vector<int64_t> indices_strides;  // bytes
  std::vector<int64_t> updates_strides;  // bytes
  std::vector<int64_t> output_strides;   // bytes; 0 along the axis
  int64_t output_axis_stride = 0;        // bytes
  int axis_dim = -1;                     // the axis in `sizes`; -1: size 1, dropped
  int partition_dim = -1;                // in `sizes`; -1: one block
  int64_t element_count = 0;             // updates to apply
};

// output[dot(c, output_strides)] = input[dot(c, input_strides) + k * input_axis_stride]
// for every coordinate c in `sizes`, where k = indices[dot(c, indices_strides)]
// (plus axis_size when negative; validation checked every index in range).
// Gather walks the output's coordinates: the indices' dimensions have input
// stride 0, the others indices stride 0. GatherElements walks the indices':
// the axis has input stride 0. Each coordinate writes an element of its own,
// so any block of the walk may run beside any other.
struct GatherWalk {
  int input_slot = 0;
  int indices_slot = 1;
  int output_slot = 0;
  int element_size = 1;  // of input/output
  int index_size = 4;    // 4 or 8
  bool index_signed = true;
  int64_t axis_size = 1;                 // input.sizes[axis]
  std::vector<int64_t> sizes;            // outermost first; no size-1 dimension
  std::vector<int64_t> input_strides;    // bytes, >= 0
  std::vector<int64_t> indices_strides;  // bytes, >= 0
  std::vector<int64_t> output_strides;   // bytes, > 0
  int64_t input_axis_stride = 0;         // bytes; 0 when axis_size is 1
  int64_t element_count = 0;             // product(sizes)
};

struct ExecutionPlan {
  absl::string_view op;                        // "slice", ...
  std::vector<absl::string_view> input_names;  // slot i binds the input named so
  std::vector<Layout> outputs;                 // the buffers the caller provides
  std::vector<StridedCopy> copies;             // disjoint outputs: any order
  // Copies of one element, `fill_value`, to every coordinate (pad's constant):
  // input_slot -1, source strides 0; disjoint from the copies' outputs.
  std::vector<StridedCopy> fills;
  std::array<std::byte, 8> fill_value{};  // the fills' element_size bytes
  std::vector<ScatterWalk> scatters;      // after every copy
  std::vector<GatherWalk> gathers;        // disjoint outputs, none a copy's
  // For an operator whose outputs are windows on input slot 0 (slice,
  // strided_slice, split): output j's window, before copies[j] folded it;
  // empty for any other. A chain composes them (core/plan/compose_windows.h).
  std::vector<InputWindow> windows;
  int64_t bytes_moved = 0;  // for scheduling decisions
};

// A plan named for `op` with its input slots, nothing to move yet.
inline ExecutionPlan EmptyPlan(const OperatorInfo& op) {
  ExecutionPlan plan;
  plan.op = op.name;
  plan.input_names.assign(op.input_names.begin(), op.input_names.end());
  return plan;
}

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_PLAN_H_
