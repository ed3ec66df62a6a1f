// How a client reaches tensord: one address, a list of replicas, or a DNS name
// that resolves to every replica, with requests spread round-robin over the
// replicas and retried on another one when a replica is UNAVAILABLE.
//
// Every tensorop call is idempotent (an operator is a pure function of its
// request), so a call that failed with UNAVAILABLE before any answer arrived is
// safe to send again. gRPC retries only until the first answer bytes arrive, and
// only while the request fits its 256 KiB retry buffer: larger uploads are not
// retried.
#ifndef TENSOROP_CLIENT_CHANNEL_H_
#define TENSOROP_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace tensorop::client {

// The gRPC target for what a user typed:
//   "host:port"                  unchanged; every address the name resolves to
//   "dns:///name:port", "ipv4:…" any gRPC target URI, unchanged
//   "10.0.0.1:50051,10.0.0.2:50051" or "[::1]:1,[::1]:2"
//                                a list of IP literals becomes "ipv4:…"/"ipv6:…"
// INVALID_ARGUMENT naming the entry for an empty target, an empty list entry, a
// list entry that is not an IP literal with a port (names belong in one DNS
// target, which follows the replicas as they change), or a list mixing IPv4 and
// IPv6.
absl::StatusOr<std::string> ChannelTarget(absl::string_view target);

// The service config every client channel uses (client/service_config.json):
// round_robin, and retries of UNAVAILABLE for every TensorOp method.
absl::string_view ServiceConfigJson();

// An insecure channel to `channel_target` (a ChannelTarget result) with the
// service config and message limits in both directions. Without
// `skip_unhealthy_replicas` the service config's health checking is off.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& channel_target,
                                             int max_message_bytes,
                                             bool skip_unhealthy_replicas = true);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CHANNEL_H_
