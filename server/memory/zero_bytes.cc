#include "server/memory/zero_bytes.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tensorop::server {

absl::StatusOr<std::span<const std::byte>> ZeroBytes(int64_t bytes) {
  static constexpr uint64_t kSmallestMapping = uint64_t{1} << 20;
  static std::mutex mutex;
  static const std::byte* longest = nullptr;  // guarded by mutex
  static uint64_t longest_bytes = 0;          // guarded by mutex
  if (bytes <= 0) return std::span<const std::byte>();
  std::lock_guard lock(mutex);
  if (static_cast<uint64_t>(bytes) > longest_bytes) {
    const uint64_t length = std::bit_ceil(std::max(static_cast<uint64_t>(bytes), kSmallestMapping));
    void* address =
        mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (address == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no address space to stand for ", bytes, " bytes"));
    }
    longest = static_cast<const std::byte*>(address);
    longest_bytes = length;
  }
  return std::span<const std::byte>(longest, static_cast<size_t>(bytes));
}

}  // namespace tensorop::server
