// Bearer-token authentication for tensord (--auth_token_file), checked by a
// gRPC AuthMetadataProcessor before any handler runs.
//
// The token file: one accepted token a line, either "NAME:TOKEN" (NAME, which
// the request log records as the caller's identity, is letters, digits and
// ._-@) or a bare TOKEN (named "line-N" after its line). Blank lines and lines
// starting with # are skipped; surrounding whitespace is ignored. The file is
// reread when it changes (Reload(), called every second and on SIGHUP), so
// tokens rotate without a restart; a call already admitted is not checked again.
//
// A call must carry `authorization: Bearer <token>`; otherwise, or with a token
// not in the file, it ends UNAUTHENTICATED and is counted in
// tensorop_auth_failures_total{reason="missing"|"invalid"}. Tokens are compared
// as SHA-256 digests with CRYPTO_memcmp against every accepted token, so the
// time taken tells nothing about how much of a token matched. The token itself
// is never logged or counted.
#ifndef TENSOROP_SERVER_SECURITY_AUTH_H_
#define TENSOROP_SERVER_SECURITY_AUTH_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

// The AuthContext property holding the name of the token a call presented.
inline constexpr char kTokenNameProperty[] = "tensorop_token_name";

// Which services a token guards besides tensorop.v1.TensorOp (always) and
// grpc.health.v1 (never).
enum class ReflectionAccess { kOff, kOn, kAuth };

// --reflection=on|off|auth; nothing for anything else.
std::optional<ReflectionAccess> ParseReflectionAccess(absl::string_view text);

struct AcceptedToken {
  std::string name;
  std::array<unsigned char, 32> digest;  // SHA-256 of the token
};

// Parses a token file's text; INVALID_ARGUMENT naming `path`, the line and the
// problem (an empty token, a bad name, a duplicate name), never the token.
absl::StatusOr<std::vector<AcceptedToken>> ParseTokenFile(absl::string_view path,
                                                          absl::string_view text);

class TokenStore {
 public:
  using EventSink = std::function<void(absl::string_view, absl::string_view)>;

  // Reads `path`; the error names the flag, the file and the problem (a file
  // without tokens is an error: it would refuse every call).
  static absl::StatusOr<std::unique_ptr<TokenStore>> Load(const std::string& path,
                                                          EventSink events);

  // The name of the accepted token `token`, or nothing. Constant-time in the
  // token's contents. Thread-safe.
  std::optional<std::string> Check(absl::string_view token) const;

  // Rereads the file; when it changed and parses, the new tokens replace the old
  // ones at once ("auth_tokens_reloaded"); a bad file is reported
  // ("auth_tokens_reload_failed") and the old tokens kept. Thread-safe.
  void Reload();

 private:
  TokenStore(std::string path, EventSink events)
      : path_(std::move(path)), events_(std::move(events)) {}

  const std::string path_;
  const EventSink events_;
  mutable std::mutex mu_;
  std::string text_;  // the file as last read
  std::vector<AcceptedToken> tokens_;
};

// Refusals before any handler, by reason.
struct AuthCounters {
  std::atomic<uint64_t> missing{0};  // no "authorization: Bearer ..." header
  std::atomic<uint64_t> invalid{0};  // a token not in the file
};

class TokenAuthProcessor : public grpc::AuthMetadataProcessor {
 public:
  TokenAuthProcessor(const TokenStore* tokens, ReflectionAccess reflection, AuthCounters* counters)
      : tokens_(tokens), reflection_(reflection), counters_(counters) {}

  // The check is a hash and a few compares in memory: run it on gRPC's thread.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  // Logs the refused call (every RPC has its line) and returns the status.
  grpc::Status Refused(absl::string_view path, const grpc::AuthContext* context,
                       const std::string& message) const;
  const TokenStore* tokens_;
  const ReflectionAccess reflection_;
  AuthCounters* counters_;
};

// The one rule for who a caller is, whichever protocol it came by: "token:NAME"
// for the accepted bearer token named `token_name`, "cert:SUBJECT" for a
// verified client certificate whose subject is `cert_subject` (RFC 2253, as
// gRPC's x509 subject property and TlsSession::PeerCertificateSubject write
// it), both joined by a space when there are both; empty (anonymous) when both
// are empty. The request log records it, and a handle, a shared memory region
// and a quota belong to it, so a caller is the same one over gRPC and HTTPS.
std::string CallerIdentity(absl::string_view token_name, absl::string_view cert_subject);

// The CallerIdentity of a gRPC call: the token name its AuthContext carries
// (TokenAuthProcessor) and its peer's x509 subject.
std::string PeerIdentity(const grpc::ServerContextBase& context);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_AUTH_H_
