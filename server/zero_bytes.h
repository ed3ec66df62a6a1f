// Read-only zero bytes of any length, as stand-ins for bytes that are not in
// host memory while a request is planned (an earlier chain step's output, a
// tensor on an OpenCL device): address space only, the kernel maps one zero
// page.
#ifndef TENSOROP_SERVER_ZERO_BYTES_H_
#define TENSOROP_SERVER_ZERO_BYTES_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tensorop::server {

class ZeroBytes {
 public:
  ZeroBytes() = default;
  ZeroBytes(const ZeroBytes&) = delete;
  ZeroBytes& operator=(const ZeroBytes&) = delete;
  ~ZeroBytes() {
    for (const auto& [address, length] : mappings_) munmap(address, length);
  }

  // `bytes` zero bytes. Earlier spans stay valid: a longer one is a new mapping.
  absl::StatusOr<std::span<const std::byte>> Get(int64_t bytes) {
    if (bytes == 0) return std::span<const std::byte>();
    if (mappings_.empty() || static_cast<int64_t>(mappings_.back().second) < bytes) {
      const size_t length = static_cast<size_t>(bytes);
      void* address =
          mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (address == MAP_FAILED) {
        return absl::ResourceExhaustedError(
            absl::StrCat("no address space to stand for ", bytes, " bytes"));
      }
      mappings_.emplace_back(address, length);
    }
    return std::span<const std::byte>(static_cast<const std::byte*>(mappings_.back().first),
                                      static_cast<size_t>(bytes));
  }

 private:
  std::vector<std::pair<void*, size_t>> mappings_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_ZERO_BYTES_H_
