// An input's bytes held apart from its request (a RunChunked upload, a Run
// request's data copied out of the received slices), with the share of the
// memory budget they hold: the accounting travels with the bytes, and is
// given back when the buffer is freed, whoever frees it.
#ifndef TENSOROP_SERVER_MEMORY_INPUT_BUFFER_H_
#define TENSOROP_SERVER_MEMORY_INPUT_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/memory/output_buffer.h"

namespace tensorop::server {

// The bytes are appended as they arrive, in a buffer sized ahead where the
// size is known, so they never move. A large buffer is a buffer pool's
// (resident pages a previous call left, else fresh address space whose pages
// only the bytes touch) and goes back to it.
//
// What it reserves: a buffer allocated whole (Resize) reserves its capacity;
// one sized ahead as address space (SizeAhead) reserves its pages as the
// bytes touch them (HoldAtLeast), but a pool's resident buffer whole.
class InputBuffer {
 public:
  // A buffer reserving in no budget.
  InputBuffer() = default;
  // One whose bytes are reserved in `reservation`'s budget (and call): an
  // empty reservation, its own from here.
  explicit InputBuffer(MemoryBudget::Reservation reservation)
      : reservation_(std::move(reservation)) {}

  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  // The bytes of the budget it holds.
  int64_t reserved() const { return reservation_.bytes(); }
  std::span<const std::byte> bytes() const { return {data_.get(), static_cast<size_t>(size_)}; }
  // Where the next `bytes` go; make room first when they do not fit.
  std::byte* Extend(int64_t bytes) {
    std::byte* end = data_.get() + size_;
    size_ += bytes;
    return end;
  }
  // Where the bytes at `offset` go in a buffer filled out of order (an upload
  // storing only the bytes its op reads); they end within capacity().
  std::byte* At(int64_t offset) { return data_.get() + offset; }
  // Every byte of the capacity, for such a buffer once all its bytes arrived.
  std::span<const std::byte> Room() const { return {data_.get(), static_cast<size_t>(capacity_)}; }

  // Room for `capacity` bytes, the held ones copied over, reserved whole for
  // `what` before it is allocated (beside the old buffer, for the moment of
  // the copy, whose reservation goes with it). RESOURCE_EXHAUSTED when the
  // budget or the memory has no room, the buffer as it was.
  absl::Status Resize(int64_t capacity, BufferPool* pool, absl::string_view what);
  // An empty buffer's room for `capacity` bytes as address space, reserving
  // nothing until bytes touch it (HoldAtLeast), but a pool's resident buffer,
  // whose pages are all there, whole. False, holding nothing, when there is
  // no memory for it or the resident buffer does not fit the budget.
  bool SizeAhead(int64_t capacity, BufferPool* pool, absl::string_view what);
  // Holds at least `bytes` of the budget for `what`: the pages the bytes
  // stored so far touched. RESOURCE_EXHAUSTED when they do not fit.
  absl::Status HoldAtLeast(int64_t bytes, absl::string_view what);
  // Takes over `bytes` that `from` holds for the buffer's bytes (a request's
  // inline data, reserved with the request and copied here).
  void TakeOver(MemoryBudget::Reservation& from, int64_t bytes);

 private:
  OutputBuffer data_;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
  MemoryBudget::Reservation reservation_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_INPUT_BUFFER_H_
