// The gRPC transport's limits, set explicitly rather than left to gRPC's
// defaults (unlimited streams per connection, idle connections kept for ever,
// no memory quota), and the process's open-file limit.
#ifndef TENSOROP_SERVER_TRANSPORT_TRANSPORT_H_
#define TENSOROP_SERVER_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

struct TransportOptions {
  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: calls open at once per connection.
  int max_concurrent_streams = 128;
  // A connection without calls for this long is closed (GOAWAY); 0: never.
  int max_connection_idle_seconds = 600;
  // gRPC's ResourceQuota: the memory its transports may hold (buffers of
  // connections and calls; under pressure gRPC shrinks them and at the limit
  // cancels calls) and the threads of its synchronous services (reflection).
  int64_t quota_memory_bytes = int64_t{1} << 30;
  int quota_max_threads = 16;
};

// Channel arguments on `builder`: the stream cap, the idle limit, keepalive
// (tensord pings a silent client every 60 s and drops it after 20 s without an
// answer; a client may ping at most every 10 s while no call is open, else
// GOAWAY after 2 strikes) and the ResourceQuota `quota`, which must outlive
// BuildAndStart().
void ApplyTransportLimits(const TransportOptions& options, grpc::ResourceQuota& quota,
                          grpc::ServerBuilder& builder);

// Raises RLIMIT_NOFILE's soft limit to the hard limit (the most an
// unprivileged process may have) and returns the limit now in force.
absl::StatusOr<uint64_t> RaiseOpenFileLimit();

// Bytes this process's stream sockets have written that their peers have not
// yet taken, summed: for TCP what the peer's kernel has not acknowledged, for
// Unix sockets what the peer has not read (with the kernel's bookkeeping). A
// connection
// closed while it still holds some (with unread input, Linux then resets it)
// loses them, so a shutdown waits for zero before gRPC closes connections.
int64_t UnsentSocketBytes();

// The memory this process may use: the cgroup's limit when there is one (v2,
// then v1), else physical RAM.
int64_t ProcessMemoryBytes();

// Why `flag`'s `addresses` could not all be listened on, for tensord's exit
// message: "FLAG=ADDR: cannot listen there: REASON", naming the first TCP
// address a probe socket cannot bind the way a server does (SO_REUSEADDR,
// never SO_REUSEPORT) and the OS's reason ("Address already in use"), else
// the first address without a reason.
std::string CannotListen(absl::string_view flag, const std::vector<std::string>& addresses);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_TRANSPORT_H_
