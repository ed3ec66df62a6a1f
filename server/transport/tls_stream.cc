#include "server/transport/tls_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

// ALPN's wire form: a length byte, then the name.
constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// A socket BIO that never blocks and never raises SIGPIPE: OpenSSL's own
// socket BIO writes with write(2), which raises SIGPIPE on a connection the
// peer reset, and tensord does not ignore the signal. The socket is kept in
// the BIO's data pointer.
int SocketOf(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t sent =
        ::send(SocketOf(bio), data, static_cast<size_t>(size), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<int>(sent);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t got = ::recv(SocketOf(bio), data, static_cast<size_t>(size), MSG_DONTWAIT);
    if (got > 0) return static_cast<int>(got);
    if (got == 0) {
      BIO_set_flags(bio, BIO_FLAGS_IN_EOF);  // BIO_eof: the peer closed
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long BioCtrl(BIO* bio, int command, long, void* pointer) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing buffered here
    case BIO_CTRL_EOF:
      return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    case BIO_C_GET_FD:
      if (pointer != nullptr) *static_cast<int*>(pointer) = SocketOf(bio);
      return SocketOf(bio);
    default:
      return 0;
  }
}

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* made = BIO_meth_new(
        BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "tensorop socket");
    if (made == nullptr) return made;
    BIO_meth_set_write(made, BioWrite);
    BIO_meth_set_read(made, BioRead);
    BIO_meth_set_ctrl(made, BioCtrl);
    BIO_meth_set_create(made, BioCreate);
    return made;
  }();
  return method;
}

// Offers http/1.1 and nothing else: a client that offers ALPN without it
// (an HTTP/2-only or gRPC client on the wrong port) gets the
// no_application_protocol alert (RFC 7301); one that offers none proceeds.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* out_length,
               const unsigned char* offered, unsigned int offered_length, void*) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_length, kHttp11, sizeof(kHttp11), offered,
                            offered_length) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
struct CtxDeleter {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

int NoPassphrase(char*, int, int, void*) { return 0; }

absl::Status Refused(absl::string_view what) {
  return absl::InternalError(
      absl::StrCat("TLS for HTTP: OpenSSL refused ", what, ": ", OpenSslError()));
}

// The certificate chain (the server's first) into `ctx`.
absl::Status UseChain(SSL_CTX* ctx, const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  X509* first = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr);
  if (first == nullptr) return Refused("the certificate");
  const int used = SSL_CTX_use_certificate(ctx, first);
  X509_free(first);
  if (used != 1) return Refused("the certificate");
  while (X509* next = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, next) != 1) {  // takes `next` only on success
      X509_free(next);
      return Refused("an intermediate certificate");
    }
  }
  ERR_clear_error();  // the loop ends on "no start line"
  return absl::OkStatus();
}

absl::Status UseKey(SSL_CTX* ctx, const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr);
  if (key == nullptr) return Refused("the private key");
  const int used = SSL_CTX_use_PrivateKey(ctx, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(ctx) != 1) return Refused("the private key");
  return absl::OkStatus();
}

// Client certificates must chain to one of the CAs in `pem`, which are also
// the names the server's CertificateRequest lists.
absl::Status RequireClientCertificates(SSL_CTX* ctx, const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int count = 0;
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    const bool added = X509_STORE_add_cert(store, ca) == 1 && SSL_CTX_add_client_CA(ctx, ca) == 1;
    X509_free(ca);
    if (!added) return Refused("a client CA certificate");
    ++count;
  }
  ERR_clear_error();
  if (count == 0) return Refused("the client CA file (no certificate)");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsServerContext>> TlsServerContext::Create(
    const TlsMaterial& material) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, CtxDeleter> ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) return Refused("a new context");
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return Refused("TLS 1.2 as the minimum version");
  }
  // No renegotiation (TLS 1.2; TLS 1.3 has none). No session resumption:
  // tickets or a cache would let a client skip the certificate check after
  // the client CA was replaced, and one request per connection gains little.
  // An EOF without close_notify reads as a close: HTTP frames its own
  // messages. Partial writes let Write return like send.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET |
                                     SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION |
                                     SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  if (absl::Status chain = UseChain(ctx.get(), material.cert_chain); !chain.ok()) return chain;
  if (absl::Status key = UseKey(ctx.get(), material.private_key); !key.ok()) return key;
  const bool mutual = !material.client_ca.empty();
  if (mutual) {
    if (absl::Status ca = RequireClientCertificates(ctx.get(), material.client_ca); !ca.ok()) {
      return ca;
    }
  }
  return std::shared_ptr<const TlsServerContext>(new TlsServerContext(ctx.release(), mutual));
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(ctx_); }

std::shared_ptr<const TlsServerContext> TlsContextHolder::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

absl::Status TlsContextHolder::Update(const TlsMaterial& material) {
  absl::StatusOr<std::shared_ptr<const TlsServerContext>> made = TlsServerContext::Create(material);
  if (!made.ok()) return made.status();
  std::lock_guard<std::mutex> lock(mu_);
  current_ = *std::move(made);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<TlsContextHolder>> FollowTlsCredentials(
    TlsCredentials& credentials) {
  absl::StatusOr<std::shared_ptr<const TlsServerContext>> initial =
      TlsServerContext::Create(credentials.CurrentMaterial());
  if (!initial.ok()) return initial.status();
  auto holder = std::make_shared<TlsContextHolder>(*std::move(initial));
  credentials.AddReloadListener([holder](const TlsMaterial& material) {
    absl::Status updated = holder->Update(material);
    if (updated.ok()) return updated;
    return absl::Status(updated.code(),
                        absl::StrCat(updated.message(), "; HTTP keeps the previous certificate"));
  });
  return holder;
}

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Accept(
    int socket, std::shared_ptr<const TlsServerContext> context) {
  ERR_clear_error();
  if (context == nullptr) return absl::FailedPreconditionError("TLS for HTTP: no context");
  SSL* ssl = SSL_new(context->get());
  if (ssl == nullptr) return Refused("a new session");
  BIO* bio = SocketMethod() != nullptr ? BIO_new(SocketMethod()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl);
    return Refused("a socket BIO");
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(socket)));
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by `ssl`
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsSession>(new TlsSession(socket, std::move(context), ssl));
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsStep TlsSession::Settle(int result) {
  const int saved_errno = errno;
  const int error = SSL_get_error(ssl_, result);
  switch (error) {
    case SSL_ERROR_WANT_READ:
      last_ = TlsStep::kWantRead;
      break;
    case SSL_ERROR_WANT_WRITE:
      last_ = TlsStep::kWantWrite;
      break;
    case SSL_ERROR_ZERO_RETURN:
      last_ = TlsStep::kClosed;
      ERR_clear_error();
      break;
    case SSL_ERROR_SYSCALL: {
      // An empty queue and no errno: the peer closed mid-handshake.
      failed_ = true;
      std::string reason = OpenSslError();
      if (reason.empty() && saved_errno == 0) {
        last_ = TlsStep::kClosed;
        break;
      }
      last_ = TlsStep::kError;
      error_ = reason.empty() ? std::strerror(saved_errno) : reason;
      break;
    }
    default: {
      failed_ = true;
      last_ = TlsStep::kError;
      error_ = OpenSslError();
      const long verified = SSL_get_verify_result(ssl_);
      if (verified != X509_V_OK) {
        absl::StrAppend(&error_, error_.empty() ? "" : "; ",
                        "client certificate: ", X509_verify_cert_error_string(verified));
      }
      if (error_.empty()) error_ = absl::StrCat("SSL error ", error);
      break;
    }
  }
  return last_;
}

TlsStep TlsSession::Handshake() {
  if (failed_) return last_;
  if (handshake_done_) return last_ = TlsStep::kDone;
  ERR_clear_error();
  errno = 0;
  const int result = SSL_do_handshake(ssl_);
  if (result == 1) {
    handshake_done_ = true;
    return last_ = TlsStep::kDone;
  }
  return Settle(result);
}

ssize_t TlsSession::Read(char* data, size_t size) {
  if (failed_) return -1;
  if (size == 0) return 0;
  ERR_clear_error();
  errno = 0;
  size_t got = 0;
  const int result = SSL_read_ex(ssl_, data, size, &got);
  handshake_done_ = handshake_done_ || SSL_is_init_finished(ssl_) == 1;
  if (result == 1) {
    last_ = TlsStep::kDone;
    return static_cast<ssize_t>(got);
  }
  return Settle(result) == TlsStep::kClosed ? 0 : -1;
}

ssize_t TlsSession::Write(const char* data, size_t size) {
  if (failed_) return -1;
  if (size == 0) return 0;
  ERR_clear_error();
  errno = 0;
  size_t wrote = 0;
  const int result = SSL_write_ex(ssl_, data, size, &wrote);
  handshake_done_ = handshake_done_ || SSL_is_init_finished(ssl_) == 1;
  if (result == 1) {
    last_ = TlsStep::kDone;
    return static_cast<ssize_t>(wrote);
  }
  Settle(result);
  return -1;
}

bool TlsSession::Shutdown() {
  // OpenSSL forbids SSL_shutdown after a fatal error or mid-handshake.
  if (failed_ || shut_down_ || !handshake_done_) return false;
  shut_down_ = true;
  ERR_clear_error();
  const int result = SSL_shutdown(ssl_);  // 0: sent, the peer's not awaited
  ERR_clear_error();
  return result >= 0;
}

short TlsSession::PollEvents() const { return last_ == TlsStep::kWantWrite ? POLLOUT : POLLIN; }

bool TlsSession::Buffered() const { return SSL_has_pending(ssl_) == 1; }

std::string TlsSession::PeerCertificateSubject() const {
  if (!context_->requires_client_certificate() || !handshake_done_) return "";
  X509* cert = SSL_get0_peer_certificate(ssl_);
  if (cert == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) return "";
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
    ERR_clear_error();
    return "";
  }
  char* text = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &text);
  return length > 0 ? std::string(text, static_cast<size_t>(length)) : std::string();
}

std::string TlsSession::Version() const { return SSL_get_version(ssl_); }

std::string TlsSession::Alpn() const {
  const unsigned char* name = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &name, &length);
  return std::string(reinterpret_cast<const char*>(name), name == nullptr ? 0 : length);
}

namespace {

// One HTTPS connection for bounded_http (owns the socket).
class TlsConnection final : public Connection {
 public:
  // A null `session` (OpenSSL could not make one) fails every call.
  TlsConnection(int fd, std::unique_ptr<TlsSession> session)
      : fd_(fd), session_(std::move(session)) {}
  ~TlsConnection() override {
    if (session_ != nullptr) session_->Shutdown();
    session_.reset();  // before the socket it writes to
    ::close(fd_);
  }

  int fd() const override { return fd_; }

  ssize_t Read(char* buffer, size_t size) override {
    if (session_ == nullptr) return Failed();
    const ssize_t got = session_->Read(buffer, size);
    return got >= 0 ? got : Unmoved();
  }

  ssize_t Write(const char* data, size_t size) override {
    if (session_ == nullptr) return Failed();
    const ssize_t sent = session_->Write(data, size);
    return sent >= 0 ? sent : Unmoved();
  }

  short PollEvents(short next) const override {
    if (session_ == nullptr) return next;
    switch (session_->last()) {
      case TlsStep::kWantRead:
        return POLLIN;
      case TlsStep::kWantWrite:
        return POLLOUT;
      default:
        return next;
    }
  }

  // Only after a call that moved bytes: after a want, what OpenSSL holds is
  // part of a record still arriving, which poll() announces.
  bool Pending() const override {
    return session_ != nullptr && session_->last() == TlsStep::kDone && session_->Buffered();
  }

  std::string PeerCertificateSubject() const override {
    return session_ != nullptr ? session_->PeerCertificateSubject() : std::string();
  }

  void ShutdownWrite() override {
    if (session_ != nullptr) session_->Shutdown();
    ::shutdown(fd_, SHUT_WR);
  }

 private:
  static ssize_t Failed() {
    errno = EPROTO;
    return -1;
  }
  // A call that moved nothing: EAGAIN while the session waits for the
  // socket, EPIPE once the peer closed, EPROTO when the session failed.
  ssize_t Unmoved() const {
    switch (session_->last()) {
      case TlsStep::kWantRead:
      case TlsStep::kWantWrite:
        errno = EAGAIN;
        return -1;
      case TlsStep::kClosed:
        errno = EPIPE;
        return -1;
      default:
        return Failed();
    }
  }

  const int fd_;
  std::unique_ptr<TlsSession> session_;
};

}  // namespace

std::function<std::unique_ptr<Connection>(int fd)> TlsConnections(
    std::shared_ptr<TlsContextHolder> holder) {
  return [holder = std::move(holder)](int fd) -> std::unique_ptr<Connection> {
    absl::StatusOr<std::unique_ptr<TlsSession>> session = TlsSession::Accept(fd, holder->Current());
    return std::make_unique<TlsConnection>(
        fd, session.ok() ? *std::move(session) : std::unique_ptr<TlsSession>());
  };
}

}  // namespace tensorop::server
