// Launches of one StridedCopy on the compute queue: a contiguous run or runs of
// up to three dimensions by clEnqueueCopyBuffer*, copies whose source is
// contiguous across the destination's rows by the tiled transpose_copy kernel,
// anything else by the strided_copy kernel (VEC words per store where the
// destination's rows allow); each in launches of bounded size (the device's
// LaunchTable; the stop check runs between), with 32-bit index math where every
// offset fits. The copies are chosen among in RunCopy; scatters and gathers
// launch in device_index_walks.cc.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/launch_steps.h"

namespace tensorop::opencl_backend {
namespace {

using launches::Extent;
using launches::IndexVector;
using launches::kMaxRowsPerLaunch;
using launches::LaunchExtent;
using launches::LaunchOverRows;
using launches::LaunchPipeline;
using launches::SetArgs;
using launches::SetArgsAt;

// Runs shorter than this go to the kernel rather than clEnqueueCopyBufferRect,
// whose per-row cost would dominate short rows.
constexpr int64_t kRectMinRunBytes = 256;
// transpose_copy's tile side and work-group (reqd_work_group_size in the .cl).
constexpr int64_t kTile = 32;
constexpr size_t kTileGroup[3] = {32, 8, 1};

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

// The dimensions of `copy` outside its `inner` innermost ones, innermost first,
// as the kernels take them: 8 as vector components, the rest (rare: only
// size-1 dimensions are dropped) in a small pooled buffer after the call.
template <typename Index>
struct OuterDimensions {
  using Vector = typename IndexVector<Index>::type;
  Vector sizes{}, src_strides{}, dst_strides{};
  int vector_rank = 0;
  int more_rank = 0;
  std::vector<Index> more;  // sizes, then source strides, then destination strides
  OuterDimensions(const StridedCopy& words, int inner) {
    const int rank = static_cast<int>(words.sizes.size());
    const int outer = rank - inner;
    vector_rank = std::min(outer, 8);
    more_rank = outer - vector_rank;
    more.resize(3 * static_cast<size_t>(more_rank));
    for (int c = 0; c < outer; ++c) {
      const int d = rank - inner - 1 - c;
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
  }
};

}  // namespace

absl::Status Device::CopyRun(cl_mem src, cl_mem dst, int64_t src_offset, int64_t dst_offset,
                             int64_t bytes, const StopCheck& stop, EventLog* log) {
  LaunchPipeline pipeline(/*wait_on_exit=*/false, log);
  const int64_t per_command = launch_table_.bytes_per_command;
  for (int64_t first = 0; first < bytes; first += per_command) {
    RETURN_IF_ERROR(stop());
    RETURN_IF_ERROR(
        ClStatus(clEnqueueCopyBuffer(queue_, src, dst, static_cast<size_t>(src_offset + first),
                                     static_cast<size_t>(dst_offset + first),
                                     static_cast<size_t>(std::min(per_command, bytes - first)), 0,
                                     nullptr, pipeline.event()),
                 "clEnqueueCopyBuffer"));
    RETURN_IF_ERROR(pipeline.Launched(queue_));
  }
  return absl::OkStatus();
}

absl::Status Device::CopyRect(const StridedCopy& copy, cl_mem src, cl_mem dst,
                              const StopCheck& stop, EventLog* log) {
  const bool three = copy.sizes.size() == 3;
  const int64_t run = copy.sizes.back() * copy.element_size;
  const int64_t rows = three ? copy.sizes[1] : 1;  // per step of the outermost dimension
  const int64_t outer = copy.sizes[0];
  const int64_t per_command = std::max<int64_t>(1, launch_table_.bytes_per_command / (run * rows));
  // Pitches: rows and slices; a 2-D copy's slice pitch 0 lets OpenCL compute it.
  const int64_t src_row = copy.src_strides[three ? 1 : 0];
  const int64_t dst_row = copy.dst_strides[three ? 1 : 0];
  const int64_t src_slice = three ? copy.src_strides[0] : 0;
  const int64_t dst_slice = three ? copy.dst_strides[0] : 0;
  LaunchPipeline pipeline(/*wait_on_exit=*/false, log);
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

absl::StatusOr<std::optional<PooledBuffer>> Device::DimensionsBuffer(const void* data,
                                                                     int64_t bytes) {
  std::optional<PooledBuffer> result;
  if (bytes == 0) return result;
  ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "kernel dimensions"));
  RETURN_IF_ERROR(
      ClStatus(clEnqueueWriteBuffer(queue_, buffer.mem(), CL_TRUE, 0, static_cast<size_t>(bytes),
                                    data, 0, nullptr, nullptr),
               "clEnqueueWriteBuffer(kernel dimensions)"));
  result.emplace(std::move(buffer));
  return result;
}

template <typename Index>
absl::Status Device::CopyKernel(const StridedCopy& words, int vec, int src_mode, cl_mem src,
                                cl_mem dst, const StopCheck& stop, EventLog* log) {
  ASSIGN_OR_RETURN(KernelLease kernel,
                   MakeKernel(Kernel::kStridedCopy, words.element_size, sizeof(Index), vec));
  const int64_t columns = words.sizes.back();
  const int64_t rows = words.element_count / columns;
  const OuterDimensions<Index> outer(words, 1);
  ASSIGN_OR_RETURN(
      std::optional<PooledBuffer> more_buffer,
      DimensionsBuffer(outer.more.data(), static_cast<int64_t>(outer.more.size() * sizeof(Index))));
  cl_mem more_mem = more_buffer.has_value() ? more_buffer->mem() : nullptr;
  RETURN_IF_ERROR(
      SetArgs(kernel.get(), src, dst, outer.sizes, outer.src_strides, outer.dst_strides,
              static_cast<cl_int>(outer.vector_rank), more_mem,
              static_cast<cl_int>(outer.more_rank), static_cast<Index>(words.src_strides.back()),
              static_cast<Index>(words.dst_strides.back()), static_cast<Index>(words.src_offset),
              static_cast<Index>(words.dst_offset), static_cast<cl_int>(src_mode)));
  LaunchPipeline pipeline(/*wait_on_exit=*/more_buffer.has_value(), log);
  RETURN_IF_ERROR(LaunchOverRows<Index>({queue_, kernel.get(), 13, launch_table_.items_per_launch,
                                         launch_table_.group_width, vec, "strided_copy"},
                                        rows, columns, pipeline, stop));
  return more_buffer.has_value() ? pipeline.Drain() : absl::OkStatus();
}

template <typename Index>
absl::Status Device::TransposeKernel(const StridedCopy& words, cl_mem src, cl_mem dst,
                                     const StopCheck& stop, EventLog* log) {
  ASSIGN_OR_RETURN(KernelLease kernel,
                   MakeKernel(Kernel::kTransposeCopy, words.element_size, sizeof(Index), 1));
  const int rank = static_cast<int>(words.sizes.size());
  const int64_t a_size = words.sizes[rank - 2], b_size = words.sizes[rank - 1];
  const int64_t rows = words.element_count / (a_size * b_size);  // of the outer dimensions
  const OuterDimensions<Index> outer(words, 2);
  ASSIGN_OR_RETURN(
      std::optional<PooledBuffer> more_buffer,
      DimensionsBuffer(outer.more.data(), static_cast<int64_t>(outer.more.size() * sizeof(Index))));
  cl_mem more_mem = more_buffer.has_value() ? more_buffer->mem() : nullptr;
  RETURN_IF_ERROR(
      SetArgs(kernel.get(), src, dst, outer.sizes, outer.src_strides, outer.dst_strides,
              static_cast<cl_int>(outer.vector_rank), more_mem,
              static_cast<cl_int>(outer.more_rank), static_cast<Index>(a_size),
              static_cast<Index>(b_size), static_cast<Index>(words.src_strides[rank - 1]),
              static_cast<Index>(words.dst_strides[rank - 2]), static_cast<Index>(words.src_offset),
              static_cast<Index>(words.dst_offset)));
  // Launches of whole tiles: several outer rows of every tile when they fit the
  // table's items per launch, else bands of tile rows of one outer row.
  const int64_t a_padded = (a_size + kTile - 1) / kTile * kTile;
  const int64_t b_padded = (b_size + kTile - 1) / kTile * kTile;
  const int64_t per_launch = launch_table_.items_per_launch;
  const int64_t rows_per_launch =
      std::clamp<int64_t>(per_launch / (a_padded * b_padded), 1, kMaxRowsPerLaunch);
  const int64_t band =
      std::clamp<int64_t>(per_launch / b_padded / kTile * kTile, kTile, kMaxRowsPerLaunch * kTile);
  LaunchPipeline pipeline(/*wait_on_exit=*/more_buffer.has_value(), log);
  for (int64_t row = 0; row < rows; row += rows_per_launch) {
    const int64_t row_count = std::min(rows_per_launch, rows - row);
    for (int64_t a = 0; a < a_size; a += band) {
      RETURN_IF_ERROR(stop());
      RETURN_IF_ERROR(SetArgsAt(kernel.get(), 14, static_cast<Index>(row), static_cast<Index>(a)));
      const int64_t a_count = std::min(band, a_padded - a);
      const size_t range[3] = {static_cast<size_t>(b_padded),
                               static_cast<size_t>(a_count / kTile * kTileGroup[1]),
                               static_cast<size_t>(row_count)};
      RETURN_IF_ERROR(ClStatus(clEnqueueNDRangeKernel(queue_, kernel.get(), 3, nullptr, range,
                                                      kTileGroup, 0, nullptr, pipeline.event()),
                               "clEnqueueNDRangeKernel(transpose_copy)"));
      RETURN_IF_ERROR(pipeline.Launched(queue_));
    }
  }
  return more_buffer.has_value() ? pipeline.Drain() : absl::OkStatus();
}

absl::Status Device::RunCopy(const StridedCopy& copy, cl_mem src, cl_mem dst, const StopCheck& stop,
                             EventLog* log) {
  if (copy.element_count == 0) return absl::OkStatus();
  const int64_t width = copy.element_size;
  const size_t rank = copy.sizes.size();
  // The plan merged every dimension it could, so a contiguous innermost
  // dimension is as long a run as the copy has.
  const bool contiguous =
      rank == 0 || (copy.src_strides.back() == width && copy.dst_strides.back() == width);
  if (rank == 0 || (contiguous && rank <= 1 && !launch_table_.runs_by_kernel)) {
    return CopyRun(src, dst, copy.src_offset, copy.dst_offset, copy.element_count * width, stop,
                   log);
  }
  if (contiguous && rank <= 3 && !launch_table_.runs_by_kernel &&
      copy.sizes.back() * width >= kRectMinRunBytes &&
      RectFits(copy.sizes, copy.src_strides, copy.sizes.back() * width) &&
      RectFits(copy.sizes, copy.dst_strides, copy.sizes.back() * width)) {
    return CopyRect(copy, src, dst, stop, log);
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
  const int64_t src_extent = Extent(words.src_offset, words.sizes, words.src_strides, 1);
  const int64_t dst_extent = Extent(words.dst_offset, words.sizes, words.dst_strides, 1);
  const auto fits32 = [&](int64_t launch_extent) {
    return std::max({src_extent, dst_extent, launch_extent}) <=
           index32_limit_.load(std::memory_order_relaxed);
  };
  // A transposing copy: the source contiguous along the destination's second
  // innermost dimension, the destination along its innermost, both at least
  // a tile long.
  const int r = static_cast<int>(rank);
  if (!contiguous && r >= 2 && launch_table_.tiles && words.dst_strides[r - 1] == 1 &&
      words.src_strides[r - 2] == 1 && words.sizes[r - 1] >= kTile && words.sizes[r - 2] >= kTile) {
    const int64_t launch_extent =
        std::max({words.element_count / (words.sizes[r - 2] * words.sizes[r - 1]),
                  words.sizes[r - 2] + 2 * kTile, words.sizes[r - 1] + 2 * kTile});
    return fits32(launch_extent) ? TransposeKernel<cl_int>(words, src, dst, stop, log)
                                 : TransposeKernel<cl_long>(words, src, dst, stop, log);
  }
  // VEC words per store: the widest vector of at most 16 bytes whose words
  // divide the row, the destination's offset and every outer destination
  // stride, along a contiguous destination row. The source is then read as one
  // vector when its rows are contiguous (forwards or backwards) and aligned
  // alike, else word by word.
  int vec = 1;
  int src_mode = 0;
  if (!contiguous && words.dst_strides.back() == 1) {
    for (int64_t v = 16 / word; v >= 2; v /= 2) {
      bool fits = words.sizes.back() % v == 0 && words.dst_offset % v == 0;
      for (size_t d = 0; d + 1 < rank; ++d) fits = fits && words.dst_strides[d] % v == 0;
      if (!fits) continue;
      vec = static_cast<int>(v);
      const int64_t step = words.src_strides.back();
      bool aligned = (step == 1 && words.src_offset % v == 0) ||
                     (step == -1 && (words.src_offset - (v - 1)) % v == 0);
      for (size_t d = 0; d + 1 < rank; ++d) aligned = aligned && words.src_strides[d] % v == 0;
      if (aligned) src_mode = step == 1 ? 1 : 2;
      break;
    }
  }
  const int64_t launch_extent =
      LaunchExtent(words.element_count / words.sizes.back(), words.sizes.back());
  return fits32(launch_extent) ? CopyKernel<cl_int>(words, vec, src_mode, src, dst, stop, log)
                               : CopyKernel<cl_long>(words, vec, src_mode, src, dst, stop, log);
}

}  // namespace tensorop::opencl_backend
