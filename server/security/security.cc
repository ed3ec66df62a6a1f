#include "server/security/security.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/security/health_listener.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {

absl::Status CheckSecurityFlags(const SecurityOptions& options) {
  const TlsFiles& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together: give both, or neither for plaintext");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file needs --tls_cert_file and --tls_key_file: client certificates "
        "are checked in a TLS handshake");
  }
  if (!options.auth_token_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--auth_token_file needs --tls_cert_file and --tls_key_file: a bearer token sent in "
        "plaintext can be read and replayed by anyone on the path");
  }
  return absl::OkStatus();
}

// Reloads of certificates and tokens, as the log's event lines: a failed
// one a warning (the old files still serve).
void LogSecurityEvent(absl::string_view event, absl::string_view detail) {
  LogEvent(event, detail, absl::EndsWith(event, "_failed") ? "warning" : "info");
}

absl::StatusOr<std::unique_ptr<Security>> Security::Create(const SecurityOptions& options,
                                                           Metrics* metrics) {
  if (absl::Status flags = CheckSecurityFlags(options); !flags.ok()) return flags;
  std::unique_ptr<Security> security(new Security(options));
  if (options.tls_enabled()) {
    absl::StatusOr<std::unique_ptr<TlsCredentials>> tls =
        TlsCredentials::Create(options.tls, LogSecurityEvent);
    if (!tls.ok()) return tls.status();
    security->tls_ = *std::move(tls);
  }
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenStore>> tokens =
        TokenStore::Load(options.auth_token_file, LogSecurityEvent);
    if (!tokens.ok()) return tokens.status();
    security->tokens_ = *std::move(tokens);
    if (metrics != nullptr) {
      const std::string help =
          "calls refused before any handler: no bearer token (missing) or one not accepted "
          "(invalid)";
      AuthCounters* counters = &security->counters_;
      metrics->AddSampled("tensorop_auth_failures_total", help, "counter", {{"reason", "missing"}},
                          [counters] { return static_cast<int64_t>(counters->missing.load()); });
      metrics->AddSampled("tensorop_auth_failures_total", help, "counter", {{"reason", "invalid"}},
                          [counters] { return static_cast<int64_t>(counters->invalid.load()); });
    }
  }
  return security;
}

Security::~Security() {
  if (reloader_.joinable()) {
    stopping_ = true;
    // Wakes its sigtimedwait at once.
    pthread_kill(reloader_.native_handle(), SIGHUP);
    reloader_.join();
  }
}

void Security::Configure(grpc::ServerBuilder& builder,
                         std::shared_ptr<grpc::ServerCredentials>* credentials) {
  if (options_.reflection == ReflectionAccess::kOff) builder.SetOption(WithoutReflection());
  if (tls_ == nullptr) {
    *credentials = grpc::InsecureServerCredentials();
    return;
  }
  *credentials = tls_->ServerCredentials();
  if (tokens_ != nullptr) {
    (*credentials)
        ->SetAuthMetadataProcessor(
            std::make_shared<TokenAuthProcessor>(tokens_.get(), options_.reflection, &counters_));
  }
}

void Security::StartReloading() {
  if (!options_.reloads()) return;
  reloader_ = std::thread([this] { ReloadLoop(); });
}

void Security::ReloadLoop() {
  sigset_t reload;
  sigemptyset(&reload);
  sigaddset(&reload, SIGHUP);
  const timespec second{1, 0};
  while (!stopping_) {
    // A second, or a SIGHUP, whichever comes first.
    sigtimedwait(&reload, nullptr, &second);
    if (stopping_) break;
    if (tls_ != nullptr) tls_->Reload();
    if (tokens_ != nullptr) tokens_->Reload();
  }
}

}  // namespace tensorop::server
