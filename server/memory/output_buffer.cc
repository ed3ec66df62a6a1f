#include "server/memory/output_buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/memory/buffer_pool.h"

namespace tensorop::server {

void BufferDeleter::operator()(std::byte* bytes) {
  // First, so that a pool keeping the buffer finds its bytes free.
  reservation.Release();
  if (pool != nullptr) {
    pool->Give(bytes, capacity);
  } else {
    std::free(bytes);
  }
}

bool CoversBuffer(const Layout& layout) {
  // Validated outputs never place two elements at one address, so as many
  // elements as the buffer has element slots means every slot is an element.
  return layout.element_count == layout.buffer_elements;
}

OutputBuffer AllocateBuffer(size_t bytes, BufferPool* pool, bool* kept) {
  if (kept != nullptr) *kept = false;
  bytes = std::max<size_t>(bytes, 1);
  if (bytes < BufferPool::kMinBytes)
    return OutputBuffer(static_cast<std::byte*>(std::malloc(bytes)));
  if (pool == nullptr) return OutputBuffer(static_cast<std::byte*>(BufferPool::Allocate(bytes)));
  return OutputBuffer(
      static_cast<std::byte*>(pool->Take(bytes, kept)),
      BufferDeleter{.pool = pool, .capacity = BufferPool::CapacityFor(bytes), .reservation = {}});
}

absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(layout.buffer_bytes(), 1));
  // calloc for padding: large blocks come zeroed from the kernel, untouched
  // until written.
  OutputBuffer buffer = CoversBuffer(layout)
                            ? AllocateBuffer(bytes, pool)
                            : OutputBuffer(static_cast<std::byte*>(std::calloc(bytes, 1)));
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory for an output of ", layout.buffer_bytes(), " bytes"));
  }
  return buffer;
}

absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool,
                                            const MemoryBudget::Reservation& call,
                                            absl::string_view what) {
  MemoryBudget::Reservation reservation = call.Sibling();
  RETURN_IF_ERROR(reservation.Grow(layout.buffer_bytes(), what));
  ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(layout, pool));
  buffer.get_deleter().reservation = std::move(reservation);
  return buffer;
}

absl::StatusOr<OutputBuffer> AllocateAdmittedOutput(const Layout& layout, BufferPool* pool,
                                                    MemoryBudget::Reservation& admitted) {
  ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(layout, pool));
  MemoryBudget::Reservation& reservation = buffer.get_deleter().reservation;
  reservation = admitted.Sibling();
  admitted.TransferTo(reservation, layout.buffer_bytes());
  return buffer;
}

SharedOutput Share(OutputBuffer buffer) {
  BufferDeleter deleter = std::move(buffer.get_deleter());
  return SharedOutput(buffer.release(), std::move(deleter));
}

void LeaveCall(OutputBuffer& buffer) { buffer.get_deleter().reservation.LeaveCall(); }

void LeaveCall(const SharedOutput& buffer) {
  if (BufferDeleter* deleter = std::get_deleter<BufferDeleter>(buffer); deleter != nullptr) {
    deleter->reservation.LeaveCall();
  }
}

}  // namespace tensorop::server
