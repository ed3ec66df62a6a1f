// tensord's transport security, as server/process/server.cc wires it: the credentials of the
// main port (plaintext, or TLS / mutual TLS from server/security/tls_credentials.h, with
// bearer tokens from server/security/auth.h), whether reflection is served, and a thread
// that rereads the certificate, key, CA and token files every second and on
// SIGHUP, so they rotate without a restart.
#ifndef TENSOROP_SERVER_SECURITY_SECURITY_H_
#define TENSOROP_SERVER_SECURITY_SECURITY_H_

#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/auth.h"
#include "server/security/tls_credentials.h"
#include "server/telemetry/metrics.h"

namespace tensorop::server {

struct SecurityOptions {
  TlsFiles tls;                 // no cert file: plaintext
  std::string auth_token_file;  // empty: no tokens
  ReflectionAccess reflection = ReflectionAccess::kAuth;

  bool tls_enabled() const { return !tls.cert_file.empty(); }
  bool reloads() const { return tls_enabled() || !auth_token_file.empty(); }
};

// The usage error in `options` (a key without a certificate, tokens without
// TLS, ...), or OK. Files are not read here.
absl::Status CheckSecurityFlags(const SecurityOptions& options);

// An event line of the log (LogEvent): "info", or "warning" for a failed reload.
void LogSecurityEvent(absl::string_view event, absl::string_view detail);

class Security {
 public:
  // Reads and checks every file (the error names the flag, the file and the
  // problem) and, with tokens, adds tensorop_auth_failures_total{reason} to
  // `metrics`.
  static absl::StatusOr<std::unique_ptr<Security>> Create(const SecurityOptions& options,
                                                          Metrics* metrics);
  ~Security();
  Security(const Security&) = delete;
  Security& operator=(const Security&) = delete;

  // SIGHUP must be blocked in every thread before any starts (main.cc does it
  // with the shutdown signals) for the reload thread to receive it.
  static void AddReloadSignal(sigset_t* signals) { sigaddset(signals, SIGHUP); }

  // The main port's credentials, and reflection left out when it is off.
  void Configure(grpc::ServerBuilder& builder,
                 std::shared_ptr<grpc::ServerCredentials>* credentials);

  // Starts the thread that reloads the files every second and on SIGHUP.
  void StartReloading();

  // For the v2 HTTP API's bearer tokens (server/v2/inference_http.h): the tokens
  // (null without --auth_token_file) and the counters gRPC's refusals go to.
  const TokenStore* tokens() const { return tokens_.get(); }
  AuthCounters* auth_counters() { return &counters_; }
  // The main port's certificate, key and client CA (reloaded with them), for
  // HTTPS on the v2 HTTP API; null without --tls_cert_file.
  TlsCredentials* tls_credentials() { return tls_.get(); }

 private:
  explicit Security(const SecurityOptions& options) : options_(options) {}
  void ReloadLoop();

  const SecurityOptions options_;
  std::unique_ptr<TlsCredentials> tls_;
  std::unique_ptr<TokenStore> tokens_;
  AuthCounters counters_;
  std::atomic<bool> stopping_{false};
  std::thread reloader_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_SECURITY_H_
