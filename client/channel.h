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

// The service config of a channel to one replica (handle calls, client.h):
// the one above with pick_first and no health checking, since a draining
// replica still serves its handles while its health says NOT_SERVING.
absl::string_view ReplicaServiceConfigJson();

// The authority `target` (as the user typed it) names one host by:
// "name:port" for "name:port", "dns:///name:port" and "dns://server/name:port";
// empty for a list of addresses, an ipv4:, ipv6: or unix: target. With TLS,
// replica channels present it, so certificates issued for the name the user
// dialled (a Kubernetes Service's) verify when a pod is reached by its IP.
std::string TargetAuthority(absl::string_view target);

// How a client proves who it talks to and who it is (docs/security.md).
struct ChannelSecurity {
  bool tls = false;        // TLS; implied by any file below
  std::string ca_file;     // PEM CA certificates the server's must chain to; empty: system roots
  std::string cert_file;   // PEM client certificate chain, for mutual TLS (with key_file)
  std::string key_file;    // its PEM private key
  std::string token_file;  // a file holding the bearer token (sent as "authorization: Bearer")

  bool enabled() const {
    return tls || !ca_file.empty() || !cert_file.empty() || !key_file.empty() ||
           !token_file.empty();
  }
};

// `security` with what it leaves empty taken from the environment, so tokens
// and paths stay out of shell history: TENSOROP_TLS (1, true or yes),
// TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE, TENSOROP_TOKEN_FILE.
ChannelSecurity WithSecurityEnvironment(ChannelSecurity security);

// Insecure credentials, or TLS ones with the files read now (and the token as
// call credentials); INVALID_ARGUMENT naming the option, the file and the
// problem (unreadable, empty, a certificate without its key).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ChannelSecurity& security);

// An insecure channel to `channel_target` (a ChannelTarget result) with the
// service config and message limits in both directions. Without
// `skip_unhealthy_replicas` the service config's health checking is off.
// `credentials` (from ChannelCredentials) replace the insecure ones.
std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& channel_target, int max_message_bytes, bool skip_unhealthy_replicas = true,
    std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// A channel to the one replica at `replica` (a TensorHandle.replica) with
// ReplicaServiceConfigJson, the message limits, `credentials` (null:
// insecure) and, unless empty, `authority` (TargetAuthority).
std::shared_ptr<grpc::Channel> CreateReplicaChannel(
    const std::string& replica, int max_message_bytes,
    std::shared_ptr<grpc::ChannelCredentials> credentials, const std::string& authority);

// `status` with a sentence in front saying which part of transport security
// failed, when gRPC's message shows it: the server's certificate is not trusted
// (--ca_file), it does not name the host dialled, the server does not speak
// TLS, or it refused our client certificate. Other statuses (UNAUTHENTICATED
// among them: tensord's message says whether the token was missing or
// refused) are returned unchanged.
absl::Status ExplainSecurityError(const absl::Status& status);

// An UNAVAILABLE "Socket closed" (the server hung up at once) with what it
// most likely means: over TLS (`tls`), that mutual TLS refused our client
// certificate (TLS 1.3 clients learn it only when the server closes the
// connection); in plaintext, that the server wants TLS. Other statuses are
// returned unchanged.
absl::Status ExplainClosedConnection(const absl::Status& status, bool tls);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CHANNEL_H_
