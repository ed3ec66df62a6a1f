#include "server/memory/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "server/telemetry/metrics.h"

namespace tensorop::server {

void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (begin + bytes) & ~(kHugePage - 1);
  if (last <= first) return;
  madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

BufferPool::BufferPool(int64_t max_bytes, MemoryBudget* budget)
    : max_bytes_(std::max<int64_t>(max_bytes, 0)), budget_(budget) {}

BufferPool::~BufferPool() {
  std::multimap<size_t, Kept> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kept.swap(kept_);
    kept_bytes_ = 0;
  }
  Free(kept);
}

size_t BufferPool::CapacityFor(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kAlignment - 1) & ~(kAlignment - 1);
}

void* BufferPool::Allocate(size_t bytes) {
  const size_t capacity = CapacityFor(bytes);
  void* data = std::aligned_alloc(kAlignment, capacity);
  if (data != nullptr) AdviseHugePages(data, capacity);
  return data;
}

void* BufferPool::Take(size_t bytes, bool* kept) {
  const size_t capacity = CapacityFor(bytes);
  if (kept != nullptr) *kept = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = kept_.find(capacity);
    if (found != kept_.end()) {
      void* data = found->second.data;
      kept_bytes_ -= static_cast<int64_t>(capacity);
      ++reuses_;
      // The caller reserved the buffer's bytes for itself; the pool's
      // reservation goes with the node.
      kept_.erase(found);
      if (kept != nullptr) *kept = true;
      return data;
    }
    ++allocations_;
  }
  return Allocate(bytes);
}

void BufferPool::Give(void* data, size_t capacity) {
  if (data == nullptr) return;
  const int64_t bytes = static_cast<int64_t>(capacity);
  // Reserved before the lock: the budget may call back into Release.
  std::optional<MemoryBudget::Reservation> reservation;
  if (budget_ == nullptr) {
    reservation.emplace();
  } else if (bytes <= max_bytes_) {
    reservation = budget_->TryReserveIfFree(bytes);
  }
  if (reservation.has_value()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_bytes_ + bytes <= max_bytes_) {
      kept_bytes_ += bytes;
      kept_.emplace(
          capacity,
          Kept{.data = data, .given = absl::Now(), .reservation = *std::move(reservation)});
      return;
    }
  }
  std::free(data);
}

int64_t BufferPool::Free(std::multimap<size_t, Kept>& kept) {
  int64_t bytes = 0;
  for (auto& [capacity, buffer] : kept) {
    std::free(buffer.data);
    bytes += static_cast<int64_t>(capacity);
  }
  kept.clear();  // the reservations go back to the budget
  return bytes;
}

int64_t BufferPool::Release(int64_t bytes) {
  std::multimap<size_t, Kept> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::multimap<size_t, Kept>::iterator> oldest;
    for (auto it = kept_.begin(); it != kept_.end(); ++it) oldest.push_back(it);
    std::sort(oldest.begin(), oldest.end(),
              [](const auto& a, const auto& b) { return a->second.given < b->second.given; });
    int64_t freed = 0;
    for (auto it : oldest) {
      if (freed >= bytes) break;
      freed += static_cast<int64_t>(it->first);
      kept_bytes_ -= static_cast<int64_t>(it->first);
      released.insert(kept_.extract(it));
    }
  }
  return Free(released);
}

int64_t BufferPool::ReleaseIdle(absl::Time now) {
  std::multimap<size_t, Kept> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end();) {
      auto next = std::next(it);
      if (now - it->second.given >= kIdleRelease) {
        kept_bytes_ -= static_cast<int64_t>(it->first);
        released.insert(kept_.extract(it));
      }
      it = next;
    }
  }
  return Free(released);
}

int64_t BufferPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_bytes_;
}

int64_t BufferPool::reuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reuses_;
}

int64_t BufferPool::allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocations_;
}

void AddBufferPoolSeries(Metrics& metrics, const BufferPool& pool) {
  metrics.AddSampled("tensorop_buffer_pool_bytes",
                     "Bytes of large freed buffers kept for reuse (--buffer_pool_bytes); "
                     "reserved in --max_memory_bytes.",
                     "gauge", {}, [&pool] { return pool.kept_bytes(); });
  metrics.AddSampled("tensorop_buffer_pool_reuses_total",
                     "Large buffers (4 MiB and more) served from the pool.", "counter", {},
                     [&pool] { return pool.reuses(); });
  metrics.AddSampled("tensorop_buffer_pool_allocations_total",
                     "Large buffers (4 MiB and more) freshly allocated.", "counter", {},
                     [&pool] { return pool.allocations(); });
}

}  // namespace tensorop::server
