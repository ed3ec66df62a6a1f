#include "server/memory/input_buffer.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensorop::server {

absl::Status InputBuffer::Resize(int64_t capacity, BufferPool* pool, absl::string_view what) {
  MemoryBudget::Reservation grown = reservation_.Sibling();
  absl::Status reserved = grown.Grow(capacity, what);
  if (!reserved.ok()) return reserved;
  OutputBuffer buffer = AllocateBuffer(static_cast<size_t>(capacity), pool);
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
  OutputBuffer buffer = AllocateBuffer(static_cast<size_t>(capacity), pool, &kept);
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
