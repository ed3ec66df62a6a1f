// Mappings of files a client can shrink under us (shared memory regions): a
// read or write past the file's new end raises SIGBUS, which would kill the
// server. A watched mapping turns that into a flag instead, as Wayland
// compositors do for their clients' buffers: the SIGBUS handler maps
// anonymous zero pages over the whole mapping, marks it faulted and returns,
// so the access that faulted completes on the stand-in pages. Whoever used
// the mapping asks `faulted()` once done and refuses the result (the bytes
// read or written were not the client's); the mapping stays faulted until it
// is unwatched and unmapped.
//
// A fault outside every watched mapping goes to the handler that was there
// before (a sanitizer's), or kills the process as SIGBUS always did.
#ifndef TENSOROP_SERVER_DATA_MAPPING_GUARD_H_
#define TENSOROP_SERVER_DATA_MAPPING_GUARD_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"

namespace tensorop::server {

// The most mappings watched at once (shared memory regions are capped below it).
inline constexpr int kMaxWatchedMappings = 4096;

class WatchedMapping {
 public:
  // Watches [base, base + bytes), installing the SIGBUS handler the first
  // time; RESOURCE_EXHAUSTED when kMaxWatchedMappings are watched already.
  static absl::StatusOr<std::unique_ptr<WatchedMapping>> Watch(void* base, size_t bytes);
  // Stops watching: call before the mapping is unmapped.
  ~WatchedMapping();
  WatchedMapping(const WatchedMapping&) = delete;
  WatchedMapping& operator=(const WatchedMapping&) = delete;

  // Whether an access faulted, and the mapping now holds stand-in zero pages.
  bool faulted() const;

 private:
  explicit WatchedMapping(int slot) : slot_(slot) {}
  const int slot_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_DATA_MAPPING_GUARD_H_
