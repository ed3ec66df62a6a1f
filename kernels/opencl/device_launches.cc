// Launches of one StridedCopy or ScatterWalk on the compute queue: a
// contiguous run or runs of up to three dimensions by clEnqueueCopyBuffer*,
// anything else by the strided_copy / scatter_elements kernels in launches of
// bounded size (the stop check runs between), with 32-bit index math where
// every offset fits.
#include <algorithm>
#include <array>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"

namespace tensorop::opencl_backend {
namespace {

// Work-items per launch: between launches the stop check runs.
constexpr int64_t kItemsPerLaunch = int64_t{1} << 22;

template <typename T>
absl::Status SetArg(cl_kernel kernel, cl_uint index, const T& value) {
  return ClStatus(clSetKernelArg(kernel, index, sizeof(T), &value),
                  absl::StrCat("clSetKernelArg(", index, ")"));
}

// Sets the kernel's arguments in order from `first`; the first failure is
// returned.
template <typename... Args>
absl::Status SetArgsAt(cl_kernel kernel, cl_uint first, const Args&... args) {
  absl::Status status;
  cl_uint index = first;
  ((status.ok() ? (status = SetArg(kernel, index++, args), 0) : 0), ...);
  return status;
}

template <typename... Args>
absl::Status SetArgs(cl_kernel kernel, const Args&... args) {
  return SetArgsAt(kernel, 0, args...);
}

// Words (or updates) per work-item: ITEMS in the .cl files.
constexpr int64_t kItemsPerWorkItem = 4;
// Rows per launch at most: a runtime built on CUDA may map the range's second
// dimension to a grid dimension, which CUDA caps at 65535 blocks.
constexpr int64_t kMaxRowsPerLaunch = 65535;
// Runs shorter than this go to the kernel rather than clEnqueueCopyBufferRect,
// whose per-row cost would dominate short rows.
constexpr int64_t kRectMinRunBytes = 256;
// Bytes per clEnqueueCopyBuffer(Rect) command: the stop check runs between.
constexpr int64_t kBytesPerCommand = kItemsPerLaunch * 16;

template <typename Index>
struct IndexVector;
template <>
struct IndexVector<cl_int> {
  using type = cl_int8;
};
template <>
struct IndexVector<cl_long> {
  using type = cl_long8;
};

// The commands of one walk, at most two queued at a time: after each enqueue it
// waits for the one before, so the device stays busy while a stop condition is
// still noticed within about one launch. The last command is not waited for
// (the caller's next command queues behind it) unless `wait_on_exit`: then,
// declared after the pooled buffers its commands use, it waits for them even
// on an early return, before those buffers go back to the pool.
class LaunchPipeline {
 public:
  explicit LaunchPipeline(bool wait_on_exit) : wait_on_exit_(wait_on_exit) {}
  LaunchPipeline(const LaunchPipeline&) = delete;
  LaunchPipeline& operator=(const LaunchPipeline&) = delete;
  ~LaunchPipeline() {
    for (cl_event event : {previous_, fresh_}) {
      if (event == nullptr) continue;
      if (wait_on_exit_) clWaitForEvents(1, &event);
      clReleaseEvent(event);
    }
  }
  // Where the next enqueue writes its event.
  cl_event* event() { return &fresh_; }
  absl::Status Launched(cl_command_queue queue) {
    cl_event wait = previous_;
    previous_ = fresh_;
    fresh_ = nullptr;
    if (wait == nullptr) return absl::OkStatus();
    const cl_int error = clFlush(queue);
    if (error != CL_SUCCESS) clReleaseEvent(wait);
    RETURN_IF_ERROR(ClStatus(error, "clFlush"));
    return Wait(wait);
  }
  // Waits for every command so far.
  absl::Status Drain() {
    cl_event wait = previous_;
    previous_ = nullptr;
    return Wait(wait);
  }

 private:
  static absl::Status Wait(cl_event event) {
    if (event == nullptr) return absl::OkStatus();
    const cl_int error = clWaitForEvents(1, &event);
    clReleaseEvent(event);
    return ClStatus(error, "clWaitForEvents");
  }
  bool wait_on_exit_;
  cl_event previous_ = nullptr;
  cl_event fresh_ = nullptr;
};

// Splits rows × columns into launches of at most kItemsPerLaunch items: whole
// rows when rows are shorter, else pieces of one row. fn(row_begin, row_count,
// column_begin, column_end).
template <typename Fn>
absl::Status ForEachLaunch(int64_t rows, int64_t columns, Fn&& fn) {
  if (columns >= kItemsPerLaunch) {
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; column += kItemsPerLaunch) {
        RETURN_IF_ERROR(fn(row, 1, column, std::min(columns, column + kItemsPerLaunch)));
      }
    }
    return absl::OkStatus();
  }
  const int64_t rows_per_launch = std::min(kMaxRowsPerLaunch, kItemsPerLaunch / columns);
  for (int64_t row = 0; row < rows; row += rows_per_launch) {
    RETURN_IF_ERROR(fn(row, std::min(rows_per_launch, rows - row), 0, columns));
  }
  return absl::OkStatus();
}

// The 2-D range of a launch: ITEMS columns per work-item, one row per line.
// The first dimension is rounded up (to a power of two below 64, else to a
// multiple of 64; the kernel skips columns past the end) so that a runtime
// choosing the work-group size itself finds one of full warps, whatever the
// row length.
std::array<size_t, 2> LaunchRange(int64_t row_count, int64_t column_begin, int64_t column_end) {
  int64_t items = (column_end - column_begin + kItemsPerWorkItem - 1) / kItemsPerWorkItem;
  if (items < 64) {
    int64_t power = 1;
    while (power < items) power *= 2;
    items = power;
  } else {
    items = (items + 63) / 64 * 64;
  }
  return {static_cast<size_t>(items), static_cast<size_t>(row_count)};
}

// |offset| + sum((size - 1) * |stride|): no partial sum of an address is larger.
int64_t Extent(int64_t offset, const std::vector<int64_t>& sizes,
               const std::vector<int64_t>& strides, int64_t unit) {
  int64_t extent = std::abs(offset / unit);
  for (size_t d = 0; d < sizes.size(); ++d) {
    extent += (sizes[d] - 1) * std::abs(strides[d] / unit);
  }
  return extent;
}

// The largest index a launch over rows × columns computes besides addresses:
// the row, and a column past the end by up to ITEMS strides of LaunchRange's
// rounded-up width.
int64_t LaunchExtent(int64_t rows, int64_t columns) { return std::max(rows, 4 * columns + 1024); }

// clEnqueueCopyBufferRect's origin of byte `offset` for these pitches.
std::array<size_t, 3> RectOrigin(int64_t offset, int64_t row_pitch, int64_t slice_pitch) {
  if (slice_pitch == 0) {
    return {static_cast<size_t>(offset % row_pitch), static_cast<size_t>(offset / row_pitch), 0};
  }
  const int64_t in_slice = offset % slice_pitch;
  return {static_cast<size_t>(in_slice % row_pitch), static_cast<size_t>(in_slice / row_pitch),
          static_cast<size_t>(offset / slice_pitch)};
}

// Whether clEnqueueCopyBufferRect can take strides of a copy of 2 or 3
// dimensions whose runs are `run` bytes: positive pitches that do not overlap
// the run, slices a whole number of rows.
bool RectFits(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t run) {
  if (sizes.size() == 2) return strides[0] >= run;
  return strides[1] >= run && strides[0] >= sizes[1] * strides[1] && strides[0] % strides[1] == 0;
}

}  // namespace

absl::Status Device::CopyRun(cl_mem src, cl_mem dst, int64_t src_offset, int64_t dst_offset,
                             int64_t bytes, const StopCheck& stop) {
  LaunchPipeline pipeline(/*wait_on_exit=*/false);
  for (int64_t first = 0; first < bytes; first += kBytesPerCommand) {
    RETURN_IF_ERROR(stop());
    RETURN_IF_ERROR(
        ClStatus(clEnqueueCopyBuffer(queue_, src, dst, static_cast<size_t>(src_offset + first),
                                     static_cast<size_t>(dst_offset + first),
                                     static_cast<size_t>(std::min(kBytesPerCommand, bytes - first)),
                                     0, nullptr, pipeline.event()),
                 "clEnqueueCopyBuffer"));
    RETURN_IF_ERROR(pipeline.Launched(queue_));
  }
  return absl::OkStatus();
}

absl::Status Device::CopyRect(const StridedCopy& copy, cl_mem src, cl_mem dst,
                              const StopCheck& stop) {
  const bool three = copy.sizes.size() == 3;
  const int64_t run = copy.sizes.back() * copy.element_size;
  const int64_t rows = three ? copy.sizes[1] : 1;  // per step of the outermost dimension
  const int64_t outer = copy.sizes[0];
  const int64_t per_command = std::max<int64_t>(1, kBytesPerCommand / (run * rows));
  // Pitches: rows and slices; a 2-D copy's slice pitch 0 lets OpenCL compute it.
  const int64_t src_row = copy.src_strides[three ? 1 : 0];
  const int64_t dst_row = copy.dst_strides[three ? 1 : 0];
  const int64_t src_slice = three ? copy.src_strides[0] : 0;
  const int64_t dst_slice = three ? copy.dst_strides[0] : 0;
  LaunchPipeline pipeline(/*wait_on_exit=*/false);
  for (int64_t first = 0; first < outer; first += per_command) {
    RETURN_IF_ERROR(stop());
    const int64_t count = std::min(per_command, outer - first);
    const std::array<size_t, 3> src_origin =
        RectOrigin(copy.src_offset + first * copy.src_strides[0], src_row, src_slice);
    const std::array<size_t, 3> dst_origin =
        RectOrigin(copy.dst_offset + first * copy.dst_strides[0], dst_row, dst_slice);
    const std::array<size_t, 3> region = {static_cast<size_t>(run),
                                          static_cast<size_t>(three ? rows : count),
                                          static_cast<size_t>(three ? count : 1)};
    RETURN_IF_ERROR(ClStatus(
        clEnqueueCopyBufferRect(queue_, src, dst, src_origin.data(), dst_origin.data(),
                                region.data(), static_cast<size_t>(src_row),
                                static_cast<size_t>(src_slice), static_cast<size_t>(dst_row),
                                static_cast<size_t>(dst_slice), 0, nullptr, pipeline.event()),
        "clEnqueueCopyBufferRect"));
    RETURN_IF_ERROR(pipeline.Launched(queue_));
  }
  return absl::OkStatus();
}

template <typename Index>
absl::Status Device::CopyKernel(const StridedCopy& words, cl_mem src, cl_mem dst,
                                const StopCheck& stop) {
  using Vector = typename IndexVector<Index>::type;
  ASSIGN_OR_RETURN(KernelLease kernel, MakeKernel(Source::kStridedCopy, words.element_size,
                                                  sizeof(Index), "strided_copy"));
  const int rank = static_cast<int>(words.sizes.size());
  const int64_t columns = words.sizes.back();
  const int64_t rows = words.element_count / columns;
  // Dimensions outside the row, innermost first: 8 as vector components, the
  // rest (rare: only size-1 dimensions are dropped) in a small pooled buffer.
  const int outer = rank - 1;
  const int vector_rank = std::min(outer, 8);
  const int more_rank = outer - vector_rank;
  Vector sizes{}, src_strides{}, dst_strides{};
  std::vector<Index> more(3 * static_cast<size_t>(more_rank));
  for (int c = 0; c < outer; ++c) {
    const int d = rank - 2 - c;
    const Index values[] = {static_cast<Index>(words.sizes[d]),
                            static_cast<Index>(words.src_strides[d]),
                            static_cast<Index>(words.dst_strides[d])};
    if (c < 8) {
      sizes.s[c] = values[0];
      src_strides.s[c] = values[1];
      dst_strides.s[c] = values[2];
    } else {
      for (int k = 0; k < 3; ++k) more[k * more_rank + c - 8] = values[k];
    }
  }
  std::optional<PooledBuffer> more_buffer;
  cl_mem more_mem = nullptr;
  if (more_rank > 0) {
    const int64_t bytes = static_cast<int64_t>(more.size() * sizeof(Index));
    ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "strided_copy dimensions"));
    RETURN_IF_ERROR(
        ClStatus(clEnqueueWriteBuffer(queue_, buffer.mem(), CL_TRUE, 0, static_cast<size_t>(bytes),
                                      more.data(), 0, nullptr, nullptr),
                 "clEnqueueWriteBuffer(strided_copy dimensions)"));
    more_mem = buffer.mem();
    more_buffer.emplace(std::move(buffer));
  }
  RETURN_IF_ERROR(SetArgs(
      kernel.get(), src, dst, sizes, src_strides, dst_strides, static_cast<cl_int>(vector_rank),
      more_mem, static_cast<cl_int>(more_rank), static_cast<Index>(words.src_strides.back()),
      static_cast<Index>(words.dst_strides.back()), static_cast<Index>(words.src_offset),
      static_cast<Index>(words.dst_offset)));
  LaunchPipeline pipeline(/*wait_on_exit=*/more_buffer.has_value());
  RETURN_IF_ERROR(ForEachLaunch(
      rows, columns,
      [&](int64_t row, int64_t row_count, int64_t column_begin,
          int64_t column_end) -> absl::Status {
        RETURN_IF_ERROR(stop());
        RETURN_IF_ERROR(SetArgsAt(kernel.get(), 12, static_cast<Index>(row),
                                  static_cast<Index>(column_begin),
                                  static_cast<Index>(column_end)));
        const std::array<size_t, 2> range = LaunchRange(row_count, column_begin, column_end);
        RETURN_IF_ERROR(
            ClStatus(clEnqueueNDRangeKernel(queue_, kernel.get(), 2, nullptr, range.data(), nullptr,
                                            0, nullptr, pipeline.event()),
                     "clEnqueueNDRangeKernel(strided_copy)"));
        return pipeline.Launched(queue_);
      }));
  return more_buffer.has_value() ? pipeline.Drain() : absl::OkStatus();
}

absl::Status Device::RunCopy(const StridedCopy& copy, cl_mem src, cl_mem dst,
                             const StopCheck& stop) {
  if (copy.element_count == 0) return absl::OkStatus();
  const int64_t width = copy.element_size;
  const size_t rank = copy.sizes.size();
  // The plan merged every dimension it could, so a contiguous innermost
  // dimension is as long a run as the copy has.
  const bool contiguous =
      rank == 0 || (copy.src_strides.back() == width && copy.dst_strides.back() == width);
  if (contiguous && rank <= 1) {
    return CopyRun(src, dst, copy.src_offset, copy.dst_offset, copy.element_count * width, stop);
  }
  if (contiguous && rank <= 3 && copy.sizes.back() * width >= kRectMinRunBytes &&
      RectFits(copy.sizes, copy.src_strides, copy.sizes.back() * width) &&
      RectFits(copy.sizes, copy.dst_strides, copy.sizes.back() * width)) {
    return CopyRect(copy, src, dst, stop);
  }
  // The kernel moves words: contiguous runs as the widest of 16, 8, 4 or 2
  // bytes that divides the run, both offsets and every outer stride.
  int64_t word = width;
  if (contiguous) {
    for (int64_t wide : {16, 8, 4, 2}) {
      if (wide <= width) break;
      bool fits = (copy.sizes.back() * width) % wide == 0 && copy.src_offset % wide == 0 &&
                  copy.dst_offset % wide == 0;
      for (size_t d = 0; d + 1 < rank; ++d) {
        fits = fits && copy.src_strides[d] % wide == 0 && copy.dst_strides[d] % wide == 0;
      }
      if (fits) {
        word = wide;
        break;
      }
    }
  }
  StridedCopy words = copy;
  words.element_size = static_cast<int>(word);
  words.element_count = copy.element_count * width / word;
  words.sizes.back() = copy.sizes.back() * width / word;
  for (int64_t& stride : words.src_strides) stride /= word;
  for (int64_t& stride : words.dst_strides) stride /= word;
  if (contiguous) words.src_strides.back() = words.dst_strides.back() = 1;  // was one element
  words.src_offset /= word;
  words.dst_offset /= word;
  const int64_t extent =
      std::max({Extent(words.src_offset, words.sizes, words.src_strides, 1),
                Extent(words.dst_offset, words.sizes, words.dst_strides, 1),
                LaunchExtent(words.element_count / words.sizes.back(), words.sizes.back())});
  if (extent <= index32_limit_.load(std::memory_order_relaxed)) {
    return CopyKernel<cl_int>(words, src, dst, stop);
  }
  return CopyKernel<cl_long>(words, src, dst, stop);
}

template <typename Index>
absl::Status Device::ScatterKernel(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                                   cl_mem output, const StopCheck& stop) {
  using Vector = typename IndexVector<Index>::type;
  const int64_t width = walk.element_size;
  ASSIGN_OR_RETURN(KernelLease kernel, MakeKernel(Source::kScatterElements, walk.element_size,
                                                  sizeof(Index), "scatter_elements"));
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
  const int64_t map_bytes = 4 * (1 + (targets + 31) / 32);
  ASSIGN_OR_RETURN(PooledBuffer map, TakeBuffer(map_bytes, "scatter_elements map"));
  std::optional<PooledBuffer> ranks;
  std::optional<PooledBuffer> more_buffer;
  cl_mem more_mem = nullptr;
  if (more_rank > 0) {
    const int64_t bytes = static_cast<int64_t>(more.size() * sizeof(Index));
    ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "scatter_elements dimensions"));
    RETURN_IF_ERROR(
        ClStatus(clEnqueueWriteBuffer(queue_, buffer.mem(), CL_TRUE, 0, static_cast<size_t>(bytes),
                                      more.data(), 0, nullptr, nullptr),
                 "clEnqueueWriteBuffer(scatter_elements dimensions)"));
    more_mem = buffer.mem();
    more_buffer.emplace(std::move(buffer));
  }
  const cl_uint zero = 0;
  RETURN_IF_ERROR(ClStatus(clEnqueueFillBuffer(queue_, map.mem(), &zero, sizeof zero, 0,
                                               static_cast<size_t>(map_bytes), 0, nullptr, nullptr),
                           "clEnqueueFillBuffer(scatter_elements map)"));
  const cl_int index_mode = (walk.index_size == 8 ? 1 : 0) | (walk.index_signed ? 2 : 0);
  RETURN_IF_ERROR(SetArgs(
      kernel.get(), indices, updates, output, map.mem(), cl_int{0}, sizes, strides[0], strides[1],
      strides[2], static_cast<cl_int>(vector_rank), more_mem, static_cast<cl_int>(more_rank),
      axis_at, static_cast<Index>(rank > 0 ? step(rank - 1, 0) : 0),
      static_cast<Index>(rank > 0 ? step(rank - 1, 1) : 0),
      static_cast<Index>(rank > 0 ? step(rank - 1, 2) : 0), static_cast<Index>(axis_stride),
      static_cast<Index>(walk.axis_size), index_mode));
  LaunchPipeline pipeline(/*wait_on_exit=*/true);
  const auto run_phase = [&](cl_int phase, cl_mem phase_map) -> absl::Status {
    RETURN_IF_ERROR(SetArgsAt(kernel.get(), 3, phase_map, phase));
    return ForEachLaunch(
        rows, columns,
        [&](int64_t row, int64_t row_count, int64_t column_begin,
            int64_t column_end) -> absl::Status {
          RETURN_IF_ERROR(stop());
          RETURN_IF_ERROR(SetArgsAt(kernel.get(), 19, static_cast<Index>(row),
                                    static_cast<Index>(column_begin),
                                    static_cast<Index>(column_end)));
          const std::array<size_t, 2> range = LaunchRange(row_count, column_begin, column_end);
          RETURN_IF_ERROR(
              ClStatus(clEnqueueNDRangeKernel(queue_, kernel.get(), 2, nullptr, range.data(),
                                              nullptr, 0, nullptr, pipeline.event()),
                       "clEnqueueNDRangeKernel(scatter_elements)"));
          return pipeline.Launched(queue_);
        });
  };
  RETURN_IF_ERROR(run_phase(0, map.mem()));
  cl_uint collided = 0;
  RETURN_IF_ERROR(ClStatus(clEnqueueReadBuffer(queue_, map.mem(), CL_TRUE, 0, sizeof collided,
                                               &collided, 0, nullptr, nullptr),
                           "clEnqueueReadBuffer(scatter_elements map)"));
  RETURN_IF_ERROR(pipeline.Drain());
  if (collided == 0) return absl::OkStatus();
  // Two updates met: rank every target's updates by axis position and let the
  // last one write again.
  ASSIGN_OR_RETURN(PooledBuffer rank_buffer, TakeBuffer(4 * targets, "scatter_elements ranks"));
  ranks.emplace(std::move(rank_buffer));
  RETURN_IF_ERROR(
      ClStatus(clEnqueueFillBuffer(queue_, ranks->mem(), &zero, sizeof zero, 0,
                                   static_cast<size_t>(4 * targets), 0, nullptr, nullptr),
               "clEnqueueFillBuffer(scatter_elements ranks)"));
  RETURN_IF_ERROR(run_phase(1, ranks->mem()));
  RETURN_IF_ERROR(run_phase(2, ranks->mem()));
  return pipeline.Drain();
}

absl::Status Device::RunScatter(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                                cl_mem output, const StopCheck& stop) {
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
    return ScatterKernel<cl_int>(walk, indices, updates, output, stop);
  }
  return ScatterKernel<cl_long>(walk, indices, updates, output, stop);
}
}  // namespace tensorop::opencl_backend
