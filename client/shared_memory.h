// Client side of shared memory (docs/colocated.md): a POSIX shared memory
// object this process creates and maps, and a helper that runs one request
// with every input and output in such a region.
#ifndef TENSOROP_CLIENT_SHARED_MEMORY_H_
#define TENSOROP_CLIENT_SHARED_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "client/client.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

// A shared memory object created (shm_open O_CREAT|O_EXCL, mode 0600) and
// mapped here; unmapped and unlinked when destroyed.
class SharedMemoryRegion {
 public:
  // `key`: the object's name without its leading '/' ("tensorctl-123-1").
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(const std::string& key,
                                                                    int64_t byte_size);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& key() const { return key_; }
  std::span<std::byte> bytes() const { return {base_, static_cast<size_t>(byte_size_)}; }

 private:
  SharedMemoryRegion(std::string key, std::byte* base, int64_t byte_size)
      : key_(std::move(key)), base_(base), byte_size_(byte_size) {}
  std::string key_;
  std::byte* base_;
  int64_t byte_size_;
};

// Runs `request` (unary Run) with its inputs copied into a fresh region and its
// outputs written by the server into the same region, then copies the outputs
// back into the Result: the same answer as client.Run(request), through shared
// memory. The region is registered as `region_name` for the call and
// unregistered (and unlinked) after it. A request without outputs gets one
// described, so that it too goes to the region (DescribeOutputs).
absl::StatusOr<Result> RunInSharedMemory(Client& client, const v1::RunRequest& request,
                                         const std::string& region_name);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_SHARED_MEMORY_H_
