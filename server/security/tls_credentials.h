// tensord's TLS: the server certificate and key (--tls_cert_file,
// --tls_key_file) and, for mutual TLS, the CA that client certificates must
// chain to (--tls_client_ca_file), served through gRPC's own TLS credentials
// (grpc::experimental::TlsServerCredentials with a FileWatcherCertificateProvider).
//
// Reload without a restart (Kubernetes rewrites mounted Secrets in place):
// Reload() rereads the three files and, when they changed, checks them with
// OpenSSL (each parses, the key matches the certificate, the certificate has not
// expired) before gRPC sees them. gRPC's provider watches a private copy
// (a directory under $TMPDIR) that only a checked set reaches, with the key and
// chain in one file renamed into place at once, so a handshake never meets a
// half-written or mismatched pair, and a bad new file is logged and the old
// certificate kept. Connections in flight keep the session they negotiated.
#ifndef TENSOROP_SERVER_SECURITY_TLS_CREDENTIALS_H_
#define TENSOROP_SERVER_SECURITY_TLS_CREDENTIALS_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

struct TlsFiles {
  std::string cert_file;       // PEM chain, the server's certificate first
  std::string key_file;        // PEM private key, unencrypted
  std::string client_ca_file;  // PEM CA certificates; empty: no client certificates asked
};

// The three files' contents after CheckTlsFiles accepted them.
struct TlsMaterial {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;
};

// OpenSSL's reason for the last failure on this thread (empty when none),
// its error queue cleared (SSL_get_error reads that queue).
std::string OpenSslError();

// Reads and checks `files`: INVALID_ARGUMENT naming the flag, the file and the
// problem ("--tls_key_file=/k.pem: the key does not match the certificate in
// --tls_cert_file=/c.pem").
absl::StatusOr<TlsMaterial> CheckTlsFiles(const TlsFiles& files);

// Called with one line of news about a reload: (event, detail), e.g.
// ("tls_reloaded", "...") or ("tls_reload_failed", "<CheckTlsFiles' message>").
using TlsEventSink = std::function<void(absl::string_view, absl::string_view)>;

class TlsCredentials {
 public:
  // Checks the files (the error names the file and the problem) and prepares
  // the private copy that gRPC watches.
  static absl::StatusOr<std::unique_ptr<TlsCredentials>> Create(const TlsFiles& files,
                                                                TlsEventSink events);
  ~TlsCredentials();
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  // TLS only (no plaintext on that port); with a client CA, a client must
  // present a certificate that chains to it.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;

  // Rereads the files; when they changed and pass CheckTlsFiles, hands them to
  // gRPC (which picks them up within a second) and reports "tls_reloaded", else
  // reports "tls_reload_failed" once per bad version and keeps the old ones.
  // Thread-safe.
  void Reload();

  // The material now served: what Create or the last successful Reload
  // accepted. Thread-safe. (Servers that do their own TLS, such as the HTTP
  // ones of server/transport/tls_stream.h, start from it.)
  TlsMaterial CurrentMaterial() const;

  // Called by Reload, on its thread and under its lock (so in order, and not
  // to call back into this object), with each newly accepted material once
  // gRPC has it. A non-OK status is reported as "tls_reload_failed" with its
  // message (that listener keeps what it had). Thread-safe.
  using ReloadListener = std::function<absl::Status(const TlsMaterial&)>;
  void AddReloadListener(ReloadListener listener);

 private:
  TlsCredentials(TlsFiles files, TlsEventSink events, std::string dir);
  absl::Status Install(const TlsMaterial& material);

  const TlsFiles files_;
  const TlsEventSink events_;
  const std::string dir_;  // the private copy
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  mutable std::mutex mu_;
  TlsMaterial current_;        // what gRPC serves
  std::string last_rejected_;  // the contents last reported as bad
  std::vector<ReloadListener> listeners_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_TLS_CREDENTIALS_H_
