// Launches of the index walks on the compute queue: a ScatterWalk by
// scatter_elements.cl (its phases when updates collide), a GatherWalk by
// gather.cl; each over rows × columns in launches of bounded size (the device's
// LaunchTable; the stop check runs between), with 32-bit index math where every
// offset fits.
#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/launch_steps.h"

namespace tensorop::opencl_backend {

using launches::Extent;
using launches::IndexVector;
using launches::LaunchExtent;
using launches::LaunchOverRows;
using launches::LaunchPipeline;
using launches::Logged;
using launches::SetArgs;
using launches::SetArgsAt;

template <typename Index>
absl::Status Device::ScatterKernel(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                                   cl_mem output, const StopCheck& stop, EventLog* log) {
  using Vector = typename IndexVector<Index>::type;
  const int64_t width = walk.element_size;
  ASSIGN_OR_RETURN(KernelLease kernel,
                   MakeKernel(Kernel::kScatterElements, walk.element_size, sizeof(Index), 1));
  const int rank = static_cast<int>(walk.sizes.size());
  const int64_t columns = rank > 0 ? walk.sizes.back() : 1;
  const int64_t rows = walk.element_count / columns;
  // Strides in the kernel's units: uints for indices, elements for the rest.
  const auto step = [&](int d, int k) -> int64_t {
    const std::vector<int64_t>* strides[] = {&walk.indices_strides, &walk.updates_strides,
                                             &walk.output_strides};
    return (*strides[k])[d] / (k == 0 ? 4 : width);
  };
  const int outer = std::max(rank - 1, 0);
  const int vector_rank = std::min(outer, 8);
  const int more_rank = outer - vector_rank;
  Vector sizes{}, strides[3] = {};
  std::vector<Index> more(4 * static_cast<size_t>(more_rank));
  for (int c = 0; c < outer; ++c) {
    const int d = rank - 2 - c;
    if (c < 8) {
      sizes.s[c] = static_cast<Index>(walk.sizes[d]);
      for (int k = 0; k < 3; ++k) strides[k].s[c] = static_cast<Index>(step(d, k));
    } else {
      more[c - 8] = static_cast<Index>(walk.sizes[d]);
      for (int k = 0; k < 3; ++k) {
        more[(k + 1) * more_rank + c - 8] = static_cast<Index>(step(d, k));
      }
    }
  }
  const cl_int axis_at = walk.axis_dim < 0           ? -2
                         : walk.axis_dim == rank - 1 ? -1
                                                     : rank - 2 - walk.axis_dim;
  // Every output element an update can reach is below `targets`.
  const int64_t axis_stride = walk.output_axis_stride / width;
  const int64_t targets =
      Extent(0, walk.sizes, walk.output_strides, width) + (walk.axis_size - 1) * axis_stride + 1;
  // The collision flag, then one uint per target (scatter_elements.cl).
  const int64_t map_bytes = 4 * (1 + targets);
  ASSIGN_OR_RETURN(PooledBuffer map, TakeBuffer(map_bytes, "scatter_elements map"));
  ASSIGN_OR_RETURN(
      std::optional<PooledBuffer> more_buffer,
      DimensionsBuffer(more.data(), static_cast<int64_t>(more.size() * sizeof(Index))));
  cl_mem more_mem = more_buffer.has_value() ? more_buffer->mem() : nullptr;
  const cl_int index_mode = (walk.index_size == 8 ? 1 : 0) | (walk.index_signed ? 2 : 0);
  RETURN_IF_ERROR(SetArgs(
      kernel.get(), indices, updates, output, map.mem(), cl_int{0}, sizes, strides[0], strides[1],
      strides[2], static_cast<cl_int>(vector_rank), more_mem, static_cast<cl_int>(more_rank),
      axis_at, static_cast<Index>(rank > 0 ? step(rank - 1, 0) : 0),
      static_cast<Index>(rank > 0 ? step(rank - 1, 1) : 0),
      static_cast<Index>(rank > 0 ? step(rank - 1, 2) : 0), static_cast<Index>(axis_stride),
      static_cast<Index>(walk.axis_size), index_mode));
  LaunchPipeline pipeline(/*wait_on_exit=*/true, log);
  const auto run_phase = [&](cl_int phase) -> absl::Status {
    RETURN_IF_ERROR(SetArgsAt(kernel.get(), 4, phase));
    return LaunchOverRows<Index>({queue_, kernel.get(), 19, launch_table_.items_per_launch,
                                  launch_table_.group_width, 1, "scatter_elements"},
                                 rows, columns, pipeline, stop);
  };
  const cl_uint zero = 0;
  // Phase 0 writes every update (and its rank); only updates of one line can
  // collide, so with one update per line (the axis dropped) that is all.
  RETURN_IF_ERROR(run_phase(0));
  if (walk.axis_dim < 0) return pipeline.Drain();
  RETURN_IF_ERROR(ClStatus(clEnqueueFillBuffer(queue_, map.mem(), &zero, sizeof zero, 0,
                                               sizeof zero, 0, nullptr, Logged(log)),
                           "clEnqueueFillBuffer(scatter_elements flag)"));
  RETURN_IF_ERROR(run_phase(3));
  cl_uint collided = 0;
  RETURN_IF_ERROR(ClStatus(clEnqueueReadBuffer(queue_, map.mem(), CL_TRUE, 0, sizeof collided,
                                               &collided, 0, nullptr, Logged(log)),
                           "clEnqueueReadBuffer(scatter_elements flag)"));
  RETURN_IF_ERROR(pipeline.Drain());
  if (collided == 0) return absl::OkStatus();
  // Two updates met: rank every target's updates by axis position and let the
  // last one write again.
  RETURN_IF_ERROR(
      ClStatus(clEnqueueFillBuffer(queue_, map.mem(), &zero, sizeof zero, 0,
                                   static_cast<size_t>(map_bytes), 0, nullptr, Logged(log)),
               "clEnqueueFillBuffer(scatter_elements ranks)"));
  RETURN_IF_ERROR(run_phase(1));
  RETURN_IF_ERROR(run_phase(2));
  return pipeline.Drain();
}

absl::Status Device::RunScatter(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                                cl_mem output, const StopCheck& stop, EventLog* log) {
  if (walk.element_count == 0) return absl::OkStatus();
  const int64_t width = walk.element_size;
  const int64_t columns = walk.sizes.empty() ? 1 : walk.sizes.back();
  // The largest offset the kernel computes, in its units (uints for indices).
  const int64_t extent =
      std::max({Extent(0, walk.sizes, walk.indices_strides, 4) + 1,
                Extent(0, walk.sizes, walk.updates_strides, width),
                Extent(0, walk.sizes, walk.output_strides, width) +
                    (walk.axis_size - 1) * (walk.output_axis_stride / width) + 1,
                walk.axis_size, LaunchExtent(walk.element_count / columns, columns)});
  if (extent <= index32_limit_.load(std::memory_order_relaxed)) {
    return ScatterKernel<cl_int>(walk, indices, updates, output, stop, log);
  }
  return ScatterKernel<cl_long>(walk, indices, updates, output, stop, log);
}

template <typename Index>
absl::Status Device::GatherKernel(const GatherWalk& walk, cl_mem input, cl_mem indices,
                                  cl_mem output, const StopCheck& stop, EventLog* log) {
  using Vector = typename IndexVector<Index>::type;
  const int64_t width = walk.element_size;
  ASSIGN_OR_RETURN(KernelLease kernel,
                   MakeKernel(Kernel::kGather, walk.element_size, sizeof(Index), 1));
  const int rank = static_cast<int>(walk.sizes.size());
  const int64_t columns = rank > 0 ? walk.sizes.back() : 1;
  const int64_t rows = walk.element_count / columns;
  // Strides in the kernel's units: uints for indices, elements for the rest.
  const auto step = [&](int d, int k) -> int64_t {
    const std::vector<int64_t>* strides[] = {&walk.input_strides, &walk.indices_strides,
                                             &walk.output_strides};
    return (*strides[k])[d] / (k == 1 ? 4 : width);
  };
  // A walk has at most 8 dimensions (no gather output or index tensor has
  // more): the ones outside the row fit the vectors' 8 components.
  const int outer = std::max(rank - 1, 0);
  Vector sizes{}, strides[3] = {};
  for (int c = 0; c < outer; ++c) {
    const int d = rank - 2 - c;
    sizes.s[c] = static_cast<Index>(walk.sizes[d]);
    for (int k = 0; k < 3; ++k) strides[k].s[c] = static_cast<Index>(step(d, k));
  }
  const cl_int index_mode = (walk.index_size == 8 ? 1 : 0) | (walk.index_signed ? 2 : 0);
  RETURN_IF_ERROR(SetArgs(kernel.get(), input, indices, output, sizes, strides[0], strides[1],
                          strides[2], static_cast<cl_int>(outer)));
  RETURN_IF_ERROR(SetArgsAt(kernel.get(), 8, static_cast<Index>(rank > 0 ? step(rank - 1, 0) : 0),
                            static_cast<Index>(rank > 0 ? step(rank - 1, 1) : 0),
                            static_cast<Index>(rank > 0 ? step(rank - 1, 2) : 0),
                            static_cast<Index>(walk.input_axis_stride / width),
                            static_cast<Index>(walk.axis_size), index_mode));
  LaunchPipeline pipeline(/*wait_on_exit=*/true, log);
  RETURN_IF_ERROR(LaunchOverRows<Index>({queue_, kernel.get(), 14, launch_table_.items_per_launch,
                                         launch_table_.group_width, 1, "gather"},
                                        rows, columns, pipeline, stop));
  return pipeline.Drain();
}

absl::Status Device::RunGather(const GatherWalk& walk, cl_mem input, cl_mem indices, cl_mem output,
                               const StopCheck& stop, EventLog* log) {
  if (walk.element_count == 0) return absl::OkStatus();
  if (walk.sizes.size() > 8) return absl::InternalError("gather: a walk of more than 8 dimensions");
  const int64_t width = walk.element_size;
  const int64_t columns = walk.sizes.empty() ? 1 : walk.sizes.back();
  // The largest offset the kernel computes, in its units (uints for indices).
  const int64_t extent =
      std::max({Extent(0, walk.sizes, walk.input_strides, width) +
                    (walk.axis_size - 1) * (walk.input_axis_stride / width) + 1,
                Extent(0, walk.sizes, walk.indices_strides, 4) + 1,
                Extent(0, walk.sizes, walk.output_strides, width), walk.axis_size,
                LaunchExtent(walk.element_count / columns, columns)});
  if (extent <= index32_limit_.load(std::memory_order_relaxed)) {
    return GatherKernel<cl_int>(walk, input, indices, output, stop, log);
  }
  return GatherKernel<cl_long>(walk, input, indices, output, stop, log);
}

}  // namespace tensorop::opencl_backend
