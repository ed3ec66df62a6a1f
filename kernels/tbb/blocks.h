// Splitting work into blocks on oneTBB, with a stop check per block. Shared by
// every kernel so each only says what one block does.
#ifndef TENSOROP_KERNELS_TBB_BLOCKS_H_
#define TENSOROP_KERNELS_TBB_BLOCKS_H_

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/tsan_annotations.h"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/parallel_for.h"
#include "oneapi/tbb/task_group.h"

namespace tensorop::tbb_backend {

// Up to this many bytes a request runs on the calling thread. Waking oneTBB's
// workers for a 1 MiB copy saves under 0.1 ms on an idle machine, and they
// then spin and yield before sleeping: a server making 1 MiB calls used about
// a quarter more CPU per call that way, CPU its clients' threads wanted
// (bench/NOTES.md, "Bulk data"). Concurrent requests keep the cores busy.
inline constexpr int64_t kSerialBytes = int64_t{1} << 20;
// The bytes one block moves: large enough to amortise scheduling, small enough
// that a stop request is noticed quickly and both cores get work.
inline constexpr int64_t kBlockBytes = 256 << 10;

// Calls block(begin, end) over [0, items) in blocks of `items_per_block`, in
// parallel unless the whole is below kSerialBytes. Returns the first non-OK
// status of `stop`, after which no further block starts.
template <typename Block>
absl::Status ForEachBlock(int64_t items, int64_t items_per_block, int64_t total_bytes,
                          const StopCheck& stop, Block&& block) {
  if (items <= 0) return absl::OkStatus();
  items_per_block = std::max<int64_t>(items_per_block, 1);
  const int64_t blocks = (items + items_per_block - 1) / items_per_block;
  if (total_bytes <= kSerialBytes || blocks == 1) {
    for (int64_t b = 0; b < blocks; ++b) {
      if (absl::Status status = stop(); !status.ok()) return status;
      block(b * items_per_block, std::min(items, (b + 1) * items_per_block));
    }
    return absl::OkStatus();
  }
  std::mutex mutex;
  absl::Status first_stop;
  tbb::task_group_context context;
  // TSan only: the spawn and the join of the loop (core/tsan_annotations.h).
  const char fork = 0, join = 0;
  TsanRelease(&fork);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, blocks, 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        TsanAcquire(&fork);
        for (int64_t b = range.begin(); b != range.end(); ++b) {
          if (absl::Status status = stop(); !status.ok()) {
            std::lock_guard<std::mutex> lock(mutex);
            if (first_stop.ok()) first_stop = status;
            context.cancel_group_execution();
            break;
          }
          block(b * items_per_block, std::min(items, (b + 1) * items_per_block));
        }
        TsanRelease(&join);
      },
      tbb::simple_partitioner(), context);
  TsanAcquire(&join);
  return first_stop;
}

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_BLOCKS_H_
