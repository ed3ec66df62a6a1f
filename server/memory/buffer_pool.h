// Large buffers kept for reuse (--buffer_pool_bytes). A fresh block of 4 MiB
// or more is mapped from the kernel, which faults in and zeroes every page on
// first write: for a 256 MiB result that costs more than the copy that fills
// it (and, while the kernel compacts memory for huge pages, several times
// more). Freed output buffers of that size wait here instead, so the next call
// of a similar size writes into pages already resident.
//
// Every kept byte is reserved in the server's MemoryBudget, so the pool never
// lets tensord hold more than --max_memory_bytes; when a call's reservation
// does not fit, the budget asks the pool to free buffers first
// (MemoryBudget::SetReclaimer). Buffers nobody took for kIdleRelease are freed
// by the server's ticker, so an idle server gives its memory back.
#ifndef TENSOROP_SERVER_MEMORY_BUFFER_POOL_H_
#define TENSOROP_SERVER_MEMORY_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/memory/memory_budget.h"

namespace tensorop::server {

// Asks the kernel to back the 2 MiB-aligned pages inside [data, data + bytes)
// with transparent huge pages: a large buffer written once then takes one
// page fault per 2 MiB instead of per 4 KiB (those faults, the zeroing of the
// pages and their unmapping were most of tensord's CPU on bulk calls). A hint:
// nothing happens where THP is off.
void AdviseHugePages(void* data, size_t bytes);

class Metrics;

class BufferPool {
 public:
  // Buffers from this size on come from (and go back to) the pool; smaller
  // ones are malloc's, which keeps them in its heap anyway.
  static constexpr size_t kMinBytes = size_t{4} << 20;
  // Pooled buffers are whole 2 MiB huge pages, 2 MiB-aligned.
  static constexpr size_t kAlignment = size_t{2} << 20;
  // A kept buffer nobody took for this long is freed by ReleaseIdle.
  static constexpr absl::Duration kIdleRelease = absl::Seconds(10);

  // A pool keeping at most `max_bytes`, each reserved in `budget` (null: no
  // budget). max_bytes 0: nothing is kept, Take always maps fresh memory.
  BufferPool(int64_t max_bytes, MemoryBudget* budget);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The capacity a buffer for `bytes` gets: rounded up to whole huge pages.
  static size_t CapacityFor(size_t bytes);

  // A fresh buffer of CapacityFor(bytes) bytes, huge pages advised, for free();
  // null when out of memory.
  static void* Allocate(size_t bytes);

  // A buffer of CapacityFor(bytes) bytes (bytes >= kMinBytes): a kept one when
  // there is one of that capacity, else freshly allocated with huge pages
  // advised. Its contents are whatever the last user left. Null when out of
  // memory. Give it back with Give(data, capacity). `kept`, when given, tells
  // which it was: a kept buffer's pages are resident.
  void* Take(size_t bytes, bool* kept = nullptr);

  // Takes back a buffer from Take: kept when it fits max_bytes and the budget
  // has room for it, freed otherwise. Any thread.
  void Give(void* data, size_t capacity);

  // Frees kept buffers, least recently given first, until `bytes` are freed
  // (or none is left); returns the bytes freed. Any thread.
  int64_t Release(int64_t bytes);
  // Frees the buffers kept for at least kIdleRelease before `now`.
  int64_t ReleaseIdle(absl::Time now = absl::Now());

  int64_t max_bytes() const { return max_bytes_; }
  int64_t kept_bytes() const;
  // Takes served by a kept buffer, and takes that allocated.
  int64_t reuses() const;
  int64_t allocations() const;

 private:
  struct Kept {
    void* data = nullptr;
    absl::Time given;
    MemoryBudget::Reservation reservation;
  };
  // Frees `kept`'s buffers (outside the lock); returns their bytes.
  static int64_t Free(std::multimap<size_t, Kept>& kept);

  const int64_t max_bytes_;
  MemoryBudget* const budget_;
  mutable std::mutex mutex_;
  std::multimap<size_t, Kept> kept_;  // by capacity; guarded by mutex_
  int64_t kept_bytes_ = 0;            // guarded by mutex_
  int64_t reuses_ = 0;                // guarded by mutex_
  int64_t allocations_ = 0;           // guarded by mutex_
};

// Adds the pool's series to `metrics`, sampled at each scrape:
//   tensorop_buffer_pool_bytes         bytes kept for reuse now
//   tensorop_buffer_pool_reuses_total  large buffers served from the pool
//   tensorop_buffer_pool_allocations_total  large buffers freshly allocated
// `pool` must outlive every scrape.
void AddBufferPoolSeries(Metrics& metrics, const BufferPool& pool);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_BUFFER_POOL_H_
