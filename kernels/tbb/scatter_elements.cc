#include "kernels/tbb/scatter_elements.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kernels/tbb/blocks.h"
#include "kernels/tbb/load_index.h"
#include "oneapi/tbb/task_arena.h"

namespace tensorop::tbb_backend {
namespace {

// Applies the updates whose partition coordinate lies in [lo, hi), in
// row-major order, so the last of two colliding updates wins. Asks `stop`
// every kStopEvery updates: one block may be the whole walk (every update may
// collide), 2^32-1 updates long. Returns the stop's status, else OK.
template <typename Word, typename Index>
absl::Status ScatterBlock(const ScatterWalk& walk, const std::byte* indices,
                          const std::byte* updates, std::byte* output, int64_t lo, int64_t hi,
                          const StopCheck& stop) {
  const size_t rank = walk.sizes.size();
  const int64_t axis_stride = walk.output_axis_stride;
  if (rank == 0) {
    const int64_t k = LoadIndex<Index>(indices, walk.axis_size);
    std::memcpy(output + k * axis_stride, updates, sizeof(Word));
    return absl::OkStatus();
  }
  StopPoller poller(stop);
  absl::InlinedVector<int64_t, 16> begin(rank, 0), end(walk.sizes.begin(), walk.sizes.end()),
      coords(rank);
  if (walk.partition_dim >= 0) {
    begin[walk.partition_dim] = lo;
    end[walk.partition_dim] = hi;
  }
  int64_t index_offset = 0, update_offset = 0, output_offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    coords[d] = begin[d];
    index_offset += begin[d] * walk.indices_strides[d];
    update_offset += begin[d] * walk.updates_strides[d];
    output_offset += begin[d] * walk.output_strides[d];
  }
  const size_t last = rank - 1;
  const int64_t run = end[last] - begin[last];
  const int64_t index_step = walk.indices_strides[last];
  const int64_t update_step = walk.updates_strides[last];
  const int64_t output_step = walk.output_strides[last];
  while (true) {
    for (int64_t first = 0; first < run; first += kStopEvery) {
      const int64_t stretch = std::min(run, first + kStopEvery);
      for (int64_t i = first; i < stretch; ++i) {
        const int64_t k = LoadIndex<Index>(indices + index_offset + i * index_step, walk.axis_size);
        std::memcpy(output + output_offset + i * output_step + k * axis_stride,
                    updates + update_offset + i * update_step, sizeof(Word));
      }
      if (poller.Tick(stretch - first)) return poller.status();
    }
    // Next run: carry through the outer dimensions, rewinding those that wrap.
    size_t d = last;
    while (true) {
      if (d == 0) return absl::OkStatus();
      --d;
      ++coords[d];
      index_offset += walk.indices_strides[d];
      update_offset += walk.updates_strides[d];
      output_offset += walk.output_strides[d];
      if (coords[d] < end[d]) break;
      const int64_t span = coords[d] - begin[d];
      index_offset -= span * walk.indices_strides[d];
      update_offset -= span * walk.updates_strides[d];
      output_offset -= span * walk.output_strides[d];
      coords[d] = begin[d];
    }
  }
}

template <typename Word, typename Index>
absl::Status Run(const ScatterWalk& walk, const std::byte* indices, const std::byte* updates,
                 std::byte* output, const StopCheck& stop) {
  const int64_t bytes = walk.element_count * (walk.element_size + walk.index_size);
  // The first stop a block saw; later blocks then see it from ForEachBlock's
  // own check (a stop, once given, is given again).
  std::mutex mutex;
  absl::Status stopped;
  const auto block = [&](int64_t lo, int64_t hi) {
    absl::Status status = ScatterBlock<Word, Index>(walk, indices, updates, output, lo, hi, stop);
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(mutex);
    if (stopped.ok()) stopped = std::move(status);
  };
  if (walk.partition_dim < 0) {  // every update may collide with every other
    absl::Status status = ForEachBlock(1, 1, 0, stop, block);
    return status.ok() ? stopped : status;
  }
  // With the partition outermost, blocks of kBlockBytes keep memory order.
  // Otherwise the axis lies outside it, and a thin block would walk memory
  // column by column: then one wide block per thread.
  const int64_t slices = walk.sizes[walk.partition_dim];
  const int64_t wanted_blocks =
      walk.partition_dim == 0 ? bytes / kBlockBytes : tbb::this_task_arena::max_concurrency();
  const int64_t blocks = std::clamp<int64_t>(wanted_blocks, 1, slices);
  absl::Status status = ForEachBlock(slices, (slices + blocks - 1) / blocks, bytes, stop, block);
  return status.ok() ? stopped : status;
}

template <typename Word>
absl::Status DispatchIndex(const ScatterWalk& walk, const std::byte* indices,
                           const std::byte* updates, std::byte* output, const StopCheck& stop) {
  if (walk.index_size == 4) {
    return walk.index_signed ? Run<Word, int32_t>(walk, indices, updates, output, stop)
                             : Run<Word, uint32_t>(walk, indices, updates, output, stop);
  }
  return walk.index_signed ? Run<Word, int64_t>(walk, indices, updates, output, stop)
                           : Run<Word, uint64_t>(walk, indices, updates, output, stop);
}

}  // namespace

absl::Status RunScatterWalk(const ScatterWalk& walk, const std::byte* indices,
                            const std::byte* updates, std::byte* output, const StopCheck& stop) {
  switch (walk.element_size) {
    case 1:
      return DispatchIndex<uint8_t>(walk, indices, updates, output, stop);
    case 2:
      return DispatchIndex<uint16_t>(walk, indices, updates, output, stop);
    case 4:
      return DispatchIndex<uint32_t>(walk, indices, updates, output, stop);
    case 8:
      return DispatchIndex<uint64_t>(walk, indices, updates, output, stop);
  }
  return absl::InternalError("scatter: element size is not 1, 2, 4 or 8");
}

}  // namespace tensorop::tbb_backend
