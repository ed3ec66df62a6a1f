// TLS for tensord's HTTP servers (cpp-httplib behind our own poll()-based
// waiting room), with the certificate, key and client CA of --tls_cert_file,
// --tls_key_file and --tls_client_ca_file (server/security/tls_credentials.h).
//
// gRPC does its own TLS; httplib's SSLServer would give each connection a
// thread that blocks in SSL_accept, so a client that stalls mid-handshake
// would hold a thread. Here a TlsSession never blocks: the waiting room's one
// poll() thread drives the handshakes and request reads of many clients, and
// a stalled client costs only its slot until the waiting room's deadline.
//
// BoundedHttpServer (server/transport/bounded_http.h) drives it through TlsConnections:
// each accepted socket becomes a TlsSession on the context current at accept
// (FollowTlsCredentials keeps it in step with the gRPC credentials' reloads);
// the waiting room polls for what the session wants (PollEvents), and Read and
// Write advance the handshake first. Decrypted bytes may wait inside OpenSSL,
// where poll() cannot see them: a caller reads until Read says what it wants
// before polling again.
#ifndef TENSOROP_SERVER_TRANSPORT_TLS_STREAM_H_
#define TENSOROP_SERVER_TRANSPORT_TLS_STREAM_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <openssl/ssl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/security/tls_credentials.h"
#include "server/transport/bounded_http.h"

namespace tensorop::server {

// One OpenSSL server context: the chain and key, TLS 1.2 and later, OpenSSL's
// default ciphers, ALPN "http/1.1", no renegotiation, no session resumption
// (every connection verifies its client certificate against the current CA);
// with a client CA, a client must present a certificate that chains to it.
// Immutable once made; sessions hold a shared_ptr, so a reload that replaces
// the context leaves connections in flight on the one they started with.
class TlsServerContext {
 public:
  // INTERNAL naming the part OpenSSL refused (CheckTlsFiles has already
  // checked the files, so this is rare).
  static absl::StatusOr<std::shared_ptr<const TlsServerContext>> Create(
      const TlsMaterial& material);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  SSL_CTX* get() const { return ctx_; }
  bool requires_client_certificate() const { return requires_client_certificate_; }

 private:
  TlsServerContext(SSL_CTX* ctx, bool requires_client_certificate)
      : ctx_(ctx), requires_client_certificate_(requires_client_certificate) {}
  SSL_CTX* const ctx_;
  const bool requires_client_certificate_;
};

// The context new handshakes use, replaced on reload. Thread-safe.
class TlsContextHolder {
 public:
  explicit TlsContextHolder(std::shared_ptr<const TlsServerContext> initial)
      : current_(std::move(initial)) {}

  std::shared_ptr<const TlsServerContext> Current() const;

  // Builds a context from `material` and makes it current; on failure keeps
  // the old one and returns why.
  absl::Status Update(const TlsMaterial& material);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const TlsServerContext> current_;
};

// A holder that starts from `credentials`' current material and follows its
// reloads (a context OpenSSL refuses is reported as "tls_reload_failed" and
// the previous one kept). The listener shares the holder, so it lives as long
// as the longer of `credentials` and the caller's pointer.
absl::StatusOr<std::shared_ptr<TlsContextHolder>> FollowTlsCredentials(TlsCredentials& credentials);

// What a TlsSession call is waiting for, or how it ended.
enum class TlsStep {
  kDone,       // the handshake is complete / the call made progress
  kWantRead,   // call again when the socket is readable (POLLIN)
  kWantWrite,  // call again when the socket is writable (POLLOUT)
  kClosed,     // the peer closed the connection (close_notify or EOF)
  kError,      // a protocol, certificate or socket error: error() says which
};

// The server side of one TLS connection over an accepted socket, which it
// reads and writes with recv/send(MSG_DONTWAIT | MSG_NOSIGNAL): no call
// blocks, whether or not the socket is O_NONBLOCK, and a peer that hung up
// never raises SIGPIPE. Does not own the socket: destroy the session, then
// close it. One thread at a time.
class TlsSession {
 public:
  static absl::StatusOr<std::unique_ptr<TlsSession>> Accept(
      int socket, std::shared_ptr<const TlsServerContext> context);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Advances the handshake: kDone once it is complete (then at once on
  // every later call), else what it waits for, or how it failed.
  TlsStep Handshake();

  // Like recv/send: > 0 bytes read or written; 0 from Read when the peer
  // closed; -1 otherwise, with last() saying what to wait for (a read may
  // have to write and a write to read) or kError. Write with partial writes:
  // after -1 with kWantRead/kWantWrite, call Write again with the same bytes.
  // Both complete the handshake first when it is not done yet.
  ssize_t Read(char* data, size_t size);
  ssize_t Write(const char* data, size_t size);

  // Sends close_notify once, without waiting for the peer's; nothing after an
  // error. Best effort: false when it could not be sent now.
  bool Shutdown();

  // True when OpenSSL holds bytes already received (application data or a
  // record not yet processed) that poll() on the socket cannot see.
  bool Buffered() const;

  // What the last call waits for or how it ended.
  TlsStep last() const { return last_; }
  // The poll() events last() waits for: POLLIN or POLLOUT (POLLIN otherwise).
  short PollEvents() const;
  // Why the session failed (OpenSSL's reason), for the log; empty before.
  const std::string& error() const { return error_; }

  // The verified client certificate's subject, RFC 2253 as gRPC's x509
  // subject property writes it ("CN=client-a,O=tensorop test"), when the
  // context requires a client certificate; empty otherwise. CallerIdentity
  // (server/security/auth.h) makes the caller's identity of it.
  std::string PeerCertificateSubject() const;
  // The negotiated protocol ("TLSv1.3") and ALPN protocol ("http/1.1" or "").
  std::string Version() const;
  std::string Alpn() const;

  int socket() const { return socket_; }

 private:
  TlsSession(int socket, std::shared_ptr<const TlsServerContext> context, SSL* ssl)
      : socket_(socket), context_(std::move(context)), ssl_(ssl) {}
  // Maps the result `result` of an SSL_* call to last_ (and error_).
  TlsStep Settle(int result);

  const int socket_;
  const std::shared_ptr<const TlsServerContext> context_;  // keeps ssl_'s SSL_CTX
  SSL* const ssl_;
  bool handshake_done_ = false;
  bool failed_ = false;
  bool shut_down_ = false;
  TlsStep last_ = TlsStep::kWantRead;
  std::string error_;
};

// BoundedHttpOptions::make_connection for HTTPS: each accepted socket becomes
// a TlsSession on `holder`'s current context, driven by the waiting room and
// the workers through the Connection calls: Read and Write
// advance the handshake first and return -1/EAGAIN while it waits for the
// socket (PollEvents says which way), -1/EPROTO when it failed (a plaintext
// client, a missing or untrusted client certificate) and 0 on close; the
// socket is closed (after close_notify, best effort) when it is destroyed.
std::function<std::unique_ptr<Connection>(int fd)> TlsConnections(
    std::shared_ptr<TlsContextHolder> holder);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_TLS_STREAM_H_
