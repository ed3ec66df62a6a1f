#include "server/memory/output_buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/memory/buffer_pool.h"

namespace tensorop::server {

void BufferDeleter::operator()(std::byte* bytes) const {
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

absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(layout.buffer_bytes(), 1));
  void* memory = nullptr;
  BufferDeleter deleter;
  if (!CoversBuffer(layout)) {
    // calloc for padding: large blocks come zeroed from the kernel,
    // untouched until written.
    memory = std::calloc(bytes, 1);
  } else if (bytes >= BufferPool::kMinBytes) {
    // Huge pages, and when there is a pool, a previous call's resident pages.
    if (pool == nullptr) {
      memory = BufferPool::Allocate(bytes);
    } else {
      memory = pool->Take(bytes);
      deleter = {.pool = pool, .capacity = BufferPool::CapacityFor(bytes)};
    }
  } else {
    memory = std::malloc(bytes);
  }
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory for an output of ", layout.buffer_bytes(), " bytes"));
  }
  return OutputBuffer(static_cast<std::byte*>(memory), deleter);
}

SharedOutput Share(OutputBuffer buffer) {
  const BufferDeleter deleter = buffer.get_deleter();
  return SharedOutput(buffer.release(), deleter);
}

}  // namespace tensorop::server
