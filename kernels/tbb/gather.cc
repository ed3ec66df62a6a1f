#include "kernels/tbb/gather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/container/inlined_vector.h"
#include "kernels/tbb/blocks.h"
#include "kernels/tbb/load_index.h"

namespace tensorop::tbb_backend {
namespace {

// `run` elements of a row of the walk (its innermost dimension) from the
// offsets given. Where the row reads one index (Gather along an outer axis),
// it is loaded once, and a row contiguous on both sides is one memcpy.
template <typename Word, typename Index>
void GatherRow(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
               std::byte* output, int64_t run) {
  const bool one = walk.sizes.empty();  // rank 0: one element
  const int64_t input_step = one ? 0 : walk.input_strides.back();
  const int64_t index_step = one ? 0 : walk.indices_strides.back();
  const int64_t output_step = one ? 0 : walk.output_strides.back();
  const int64_t axis_stride = walk.input_axis_stride;
  if (index_step == 0) {
    const std::byte* from = input + LoadIndex<Index>(indices, walk.axis_size) * axis_stride;
    if (input_step == sizeof(Word) && output_step == sizeof(Word)) {
      std::memcpy(output, from, static_cast<size_t>(run) * sizeof(Word));
      return;
    }
    for (int64_t i = 0; i < run; ++i) {
      std::memcpy(output + i * output_step, from + i * input_step, sizeof(Word));
    }
    return;
  }
  for (int64_t i = 0; i < run; ++i) {
    const int64_t k = LoadIndex<Index>(indices + i * index_step, walk.axis_size);
    std::memcpy(output + i * output_step, input + i * input_step + k * axis_stride, sizeof(Word));
  }
}

// Rows [lo, hi) of the walk's outer dimensions, each row in stretches of at
// most kStopEvery elements between stop checks (a row may be 2^32 - 1 long).
// Returns the stop's status, else OK.
template <typename Word, typename Index>
absl::Status GatherRows(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
                        std::byte* output, int64_t lo, int64_t hi, const StopCheck& stop) {
  const size_t rank = walk.sizes.size();
  if (rank == 0) {  // one element
    GatherRow<Word, Index>(walk, input, indices, output, 1);
    return absl::OkStatus();
  }
  const size_t last = rank - 1;
  absl::InlinedVector<int64_t, 8> coords(rank, 0);
  int64_t input_offset = 0, index_offset = 0, output_offset = 0;
  for (size_t d = last, rest = static_cast<size_t>(lo); d-- > 0;) {
    const int64_t size = walk.sizes[d];
    coords[d] = static_cast<int64_t>(rest) % size;
    rest /= static_cast<size_t>(size);
    input_offset += coords[d] * walk.input_strides[d];
    index_offset += coords[d] * walk.indices_strides[d];
    output_offset += coords[d] * walk.output_strides[d];
  }
  StopPoller poller(stop);
  const int64_t run = walk.sizes[last];
  for (int64_t row = lo; row < hi; ++row) {
    for (int64_t first = 0; first < run; first += kStopEvery) {
      const int64_t stretch = std::min(run - first, kStopEvery);
      GatherRow<Word, Index>(walk, input + input_offset + first * walk.input_strides[last],
                             indices + index_offset + first * walk.indices_strides[last],
                             output + output_offset + first * walk.output_strides[last], stretch);
      if (poller.Tick(stretch)) return poller.status();
    }
    // Next row: carry through the outer dimensions, rewinding those that wrap.
    for (size_t d = last; d-- > 0;) {
      input_offset += walk.input_strides[d];
      index_offset += walk.indices_strides[d];
      output_offset += walk.output_strides[d];
      if (++coords[d] < walk.sizes[d]) break;
      input_offset -= coords[d] * walk.input_strides[d];
      index_offset -= coords[d] * walk.indices_strides[d];
      output_offset -= coords[d] * walk.output_strides[d];
      coords[d] = 0;
    }
  }
  return absl::OkStatus();
}

template <typename Word, typename Index>
absl::Status Run(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
                 std::byte* output, const StopCheck& stop) {
  const int64_t bytes = walk.element_count * (walk.element_size + walk.index_size);
  const int64_t run = walk.sizes.empty() ? 1 : walk.sizes.back();
  const int64_t rows = walk.element_count / run;
  const int64_t row_bytes = std::max<int64_t>(1, run * (walk.element_size + walk.index_size));
  if (rows == 1 && run > 1) {
    // One row (a 1-D walk): its columns in blocks, so both cores share it.
    const size_t last = walk.sizes.size() - 1;
    const int64_t element_bytes = walk.element_size + walk.index_size;
    return ForEachBlock(run, kBlockBytes / element_bytes, bytes, stop, [&](int64_t lo, int64_t hi) {
      GatherRow<Word, Index>(walk, input + lo * walk.input_strides[last],
                             indices + lo * walk.indices_strides[last],
                             output + lo * walk.output_strides[last], hi - lo);
    });
  }
  // The first stop a block saw; later blocks then see it from ForEachBlock's
  // own check (a stop, once given, is given again).
  std::mutex mutex;
  absl::Status stopped;
  absl::Status status = ForEachBlock(rows, std::max<int64_t>(1, kBlockBytes / row_bytes), bytes,
                                     stop, [&](int64_t lo, int64_t hi) {
                                       absl::Status block = GatherRows<Word, Index>(
                                           walk, input, indices, output, lo, hi, stop);
                                       if (block.ok()) return;
                                       std::lock_guard<std::mutex> lock(mutex);
                                       if (stopped.ok()) stopped = std::move(block);
                                     });
  return status.ok() ? stopped : status;
}

template <typename Word>
absl::Status DispatchIndex(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
                           std::byte* output, const StopCheck& stop) {
  if (walk.index_size == 4) {
    return walk.index_signed ? Run<Word, int32_t>(walk, input, indices, output, stop)
                             : Run<Word, uint32_t>(walk, input, indices, output, stop);
  }
  return walk.index_signed ? Run<Word, int64_t>(walk, input, indices, output, stop)
                           : Run<Word, uint64_t>(walk, input, indices, output, stop);
}

}  // namespace

absl::Status RunGatherWalk(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
                           std::byte* output, const StopCheck& stop) {
  if (walk.element_count == 0) return absl::OkStatus();
  switch (walk.element_size) {
    case 1:
      return DispatchIndex<uint8_t>(walk, input, indices, output, stop);
    case 2:
      return DispatchIndex<uint16_t>(walk, input, indices, output, stop);
    case 4:
      return DispatchIndex<uint32_t>(walk, input, indices, output, stop);
    case 8:
      return DispatchIndex<uint64_t>(walk, input, indices, output, stop);
  }
  return absl::InternalError("gather: element size is not 1, 2, 4 or 8");
}

}  // namespace tensorop::tbb_backend
