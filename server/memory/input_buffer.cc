#include "server/memory/input_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensorop::server {

OutputBuffer InputBuffer::Allocate(int64_t capacity, BufferPool* pool, bool* kept) {
  const size_t bytes = static_cast<size_t>(capacity);
  *kept = false;
  if (bytes < BufferPool::kMinBytes) {
    return OutputBuffer(static_cast<std::byte*>(std::malloc(std::max<size_t>(bytes, 1))));
  }
  void* memory = pool != nullptr ? pool->Take(bytes, kept) : BufferPool::Allocate(bytes);
  return OutputBuffer(static_cast<std::byte*>(memory),
                      BufferDeleter{.pool = pool, .capacity = BufferPool::CapacityFor(bytes)});
}

absl::Status InputBuffer::Resize(int64_t capacity, BufferPool* pool, absl::string_view what) {
  MemoryBudget::Reservation grown = reservation_.Sibling();
  absl::Status reserved = grown.Grow(capacity, what);
  if (!reserved.ok()) return reserved;
  bool kept = false;
  OutputBuffer buffer = Allocate(capacity, pool, &kept);
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory for ", what));
  }
  if (size_ > 0) std::memcpy(buffer.get(), data_.get(), static_cast<size_t>(size_));
  data_ = std::move(buffer);
  capacity_ = capacity;
  reservation_ = std::move(grown);  // the old buffer's reservation goes with it
  return absl::OkStatus();
}

bool InputBuffer::SizeAhead(int64_t capacity, BufferPool* pool, absl::string_view what) {
  bool kept = false;
  OutputBuffer buffer = Allocate(capacity, pool, &kept);
  if (buffer == nullptr) return false;
  if (kept && !reservation_.Grow(capacity, what).ok()) return false;  // back to the pool
  data_ = std::move(buffer);
  capacity_ = capacity;
  return true;
}

absl::Status InputBuffer::HoldAtLeast(int64_t bytes, absl::string_view what) {
  return reservation_.Grow(bytes - reservation_.bytes(), what);
}

void InputBuffer::TakeOver(MemoryBudget::Reservation& from, int64_t bytes) {
  from.TransferTo(reservation_, bytes);
}

}  // namespace tensorop::server
