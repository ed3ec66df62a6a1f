// Read-only zero bytes of any length, as stand-ins for bytes that are not in
// host memory while a request is planned (an earlier chain step's output, a
// tensor on an OpenCL device, an input received in pieces): address space
// only, the kernel maps one zero page.
#ifndef TENSOROP_SERVER_MEMORY_ZERO_BYTES_H_
#define TENSOROP_SERVER_MEMORY_ZERO_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"

namespace tensorop::server {

// `bytes` zero bytes, valid for the life of the process. The mappings are the
// process's and never unmapped, so a request planned with stand-ins pays no
// mmap and munmap (a 1 MiB Run read backwards paid two of each). Each is a
// power of two of at least 1 MiB, mapped when more is asked for than any
// before: together less than twice the most ever asked for. Where planning
// reads them (index values from an earlier chain step), the entries mapping the
// zero page stay in the page tables: at most 1/512 of a mapping's length.
absl::StatusOr<std::span<const std::byte>> ZeroBytes(int64_t bytes);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_ZERO_BYTES_H_
