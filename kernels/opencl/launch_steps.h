// What every kernel launch of the OpenCL backend shares: argument setters, the
// pipeline that keeps at most two launches queued, the split of rows × columns
// into bounded launches and their ranges (device_launches.cc for copies,
// device_index_walks.cc for scatters and gathers).
#ifndef TENSOROP_KERNELS_OPENCL_LAUNCH_STEPS_H_
#define TENSOROP_KERNELS_OPENCL_LAUNCH_STEPS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/cancellation.h"
#include "core/status_macros.h"
#include "kernels/opencl/cl_error.h"

namespace tensorop::opencl_backend::launches {

template <typename T>
absl::Status SetArg(cl_kernel kernel, cl_uint index, const T& value) {
  // NOLINTNEXTLINE(bugprone-sizeof-expression): T is often cl_mem, a pointer, as OpenCL wants
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
inline constexpr int64_t kItemsPerWorkItem = 4;
// Rows per launch at most: a runtime built on CUDA may map the range's second
// and third dimensions to grid dimensions, which CUDA caps at 65535 blocks.
inline constexpr int64_t kMaxRowsPerLaunch = 65535;

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
  // With `log`, each command's event is also retained there (profiling).
  LaunchPipeline(bool wait_on_exit, std::vector<cl_event>* log)
      : wait_on_exit_(wait_on_exit), log_(log) {}
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
    if (log_ != nullptr && fresh_ != nullptr && clRetainEvent(fresh_) == CL_SUCCESS) {
      log_->push_back(fresh_);
    }
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
  std::vector<cl_event>* log_;
  cl_event previous_ = nullptr;
  cl_event fresh_ = nullptr;
};

// Where a command outside a LaunchPipeline writes its event: the end of `log`
// when profiling, else nowhere.
inline cl_event* Logged(std::vector<cl_event>* log) {
  if (log == nullptr) return nullptr;
  log->push_back(nullptr);
  return &log->back();
}

// Splits rows × columns into launches of at most `per_launch` items: whole
// rows when rows are shorter, else pieces of one row (a multiple of `align`
// columns each). fn(row_begin, row_count, column_begin, column_end).
template <typename Fn>
absl::Status ForEachLaunch(int64_t rows, int64_t columns, int64_t per_launch, int64_t align,
                           Fn&& fn) {
  if (columns >= per_launch) {
    const int64_t piece = std::max(align, per_launch / align * align);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; column += piece) {
        RETURN_IF_ERROR(fn(row, 1, column, std::min(columns, column + piece)));
      }
    }
    return absl::OkStatus();
  }
  const int64_t rows_per_launch = std::min(kMaxRowsPerLaunch, per_launch / columns);
  for (int64_t row = 0; row < rows; row += rows_per_launch) {
    RETURN_IF_ERROR(fn(row, std::min(rows_per_launch, rows - row), 0, columns));
  }
  return absl::OkStatus();
}

// The 2-D range of a launch: ITEMS times `vec` columns per work-item, one row
// per line. The first dimension is rounded up (to a power of two below 64,
// else to a multiple of 64; the kernel skips columns past the end) so that
// work-groups are full warps, whatever the row length.
inline std::array<size_t, 2> LaunchRange(int64_t row_count, int64_t column_begin,
                                         int64_t column_end, int64_t vec = 1) {
  const int64_t per_item = kItemsPerWorkItem * vec;
  int64_t items = (column_end - column_begin + per_item - 1) / per_item;
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
inline int64_t Extent(int64_t offset, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& strides, int64_t unit) {
  int64_t extent = std::abs(offset / unit);
  for (size_t d = 0; d < sizes.size(); ++d) {
    extent += (sizes[d] - 1) * std::abs(strides[d] / unit);
  }
  return extent;
}

// The work-group of a launch of `range`: the table's width (the largest power
// of two up to it that divides the range's first dimension) by one row, or the
// runtime's choice (null) when the table says 0 or the rows are short.
inline std::array<size_t, 2> GroupOf(const std::array<size_t, 2>& range, size_t width) {
  if (width == 0 || range[0] < 64) return {0, 0};
  size_t group = 1;
  while (group * 2 <= width && range[0] % (group * 2) == 0) group *= 2;
  return {group, 1};
}

// The largest index a launch over rows × columns computes besides addresses:
// the row, and a column past the end by up to ITEMS strides of LaunchRange's
// rounded-up width (64 work-items of up to 16 words each past the end).
inline int64_t LaunchExtent(int64_t rows, int64_t columns) {
  return std::max(rows, 4 * columns + 4096);
}

// One kernel of the .cl files, launched over rows × columns: its arguments but
// the last three are set; those (row_begin, column_begin, column_end, of the
// kernel's IDX type) follow from `range_arg` on.
struct RowLaunches {
  cl_command_queue queue;
  cl_kernel kernel;
  cl_uint range_arg;
  int64_t items_per_launch;  // the device's LaunchTable
  size_t group_width;        // the device's LaunchTable
  int64_t vec;               // VEC words per item (columns align to it)
  const char* what;          // the kernel's name, for messages
};

// Enqueues `launches.kernel` over rows × columns in launches of bounded size
// (ForEachLaunch), `stop` asked before each, through `pipeline`.
template <typename Index>
absl::Status LaunchOverRows(const RowLaunches& launches, int64_t rows, int64_t columns,
                            LaunchPipeline& pipeline, const StopCheck& stop) {
  return ForEachLaunch(
      rows, columns, launches.items_per_launch, launches.vec,
      [&](int64_t row, int64_t row_count, int64_t column_begin,
          int64_t column_end) -> absl::Status {
        RETURN_IF_ERROR(stop());
        RETURN_IF_ERROR(SetArgsAt(launches.kernel, launches.range_arg, static_cast<Index>(row),
                                  static_cast<Index>(column_begin),
                                  static_cast<Index>(column_end)));
        const std::array<size_t, 2> range =
            LaunchRange(row_count, column_begin, column_end, launches.vec);
        const std::array<size_t, 2> group = GroupOf(range, launches.group_width);
        RETURN_IF_ERROR(
            ClStatus(clEnqueueNDRangeKernel(launches.queue, launches.kernel, 2, nullptr,
                                            range.data(), group[0] == 0 ? nullptr : group.data(), 0,
                                            nullptr, pipeline.event()),
                     absl::StrCat("clEnqueueNDRangeKernel(", launches.what, ")")));
        return pipeline.Launched(launches.queue);
      });
}

}  // namespace tensorop::opencl_backend::launches

#endif  // TENSOROP_KERNELS_OPENCL_LAUNCH_STEPS_H_
