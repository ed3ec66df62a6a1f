// TlsSession (server/transport/tls_stream.h) driven by poll() the way the HTTP waiting
// room drives it, against a real OpenSSL client on a loopback TCP connection,
// with certificates made by openssl at test time (tests/support/test_pki.h).
#include "server/transport/tls_stream.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/security/tls_credentials.h"
#include "tests/support/test_pki.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::TestPki;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kBudget{10000};  // a hang, not a slow machine

// A listening socket on 127.0.0.1 and an ephemeral port.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(address.sin_port);
  }
  ~Listener() { ::close(fd_); }

  int port() const { return port_; }

  // The next connection, non-blocking, as the waiting room gets it.
  int Accept() const {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    EXPECT_GE(fd, 0);
    return fd;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  return fd;
}

// A blocking OpenSSL client that trusts `ca_file`, optionally presents a
// certificate, and offers ALPN `alpn` (wire form).
class TlsClient {
 public:
  TlsClient(int port, const std::string& ca_file, const std::string& cert_file = "",
            const std::string& key_file = "", std::string alpn = std::string("\x08http/1.1", 9)) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    EXPECT_EQ(SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr), 1);
    if (!cert_file.empty()) {
      EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()), 1);
      EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM), 1);
    }
    SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(alpn.data()),
                            static_cast<unsigned int>(alpn.size()));
    fd_ = Connect(port);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set1_host(ssl_, "localhost");
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }

  bool Handshake() {
    const bool ok = SSL_connect(ssl_) == 1;
    ERR_clear_error();
    return ok;
  }
  bool WriteAll(const std::string& data) {
    size_t written = 0;
    return data.empty() ||
           (SSL_write_ex(ssl_, data.data(), data.size(), &written) == 1 && written == data.size());
  }
  // Up to `size` bytes, fewer when the connection ends first.
  std::string Read(size_t size) {
    std::string data(size, '\0');
    size_t done = 0;
    while (done < size) {
      size_t got = 0;
      if (SSL_read_ex(ssl_, data.data() + done, size - done, &got) != 1) break;
      done += got;
    }
    ERR_clear_error();
    data.resize(done);
    return data;
  }
  // The server certificate's common name and serial (hex).
  std::string PeerCommonName() const {
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    char name[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof name);
    return name;
  }
  std::string PeerSerial() const {
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    BIGNUM* number = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(number);
    std::string serial = hex;
    OPENSSL_free(hex);
    BN_free(number);
    return serial;
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
};

// Waits on the session's socket for what its last call wants, until
// `deadline`: false when the deadline passed.
bool WaitFor(TlsSession& session, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd entry{session.socket(), session.PollEvents(), 0};
  ::poll(&entry, 1, static_cast<int>(left.count()));
  return true;
}

bool Waiting(TlsStep step) { return step == TlsStep::kWantRead || step == TlsStep::kWantWrite; }

// The waiting room's loop for one client: Handshake() until it is done,
// fails, or `budget` passes (then what it still waits for).
TlsStep DriveHandshake(TlsSession& session, std::chrono::milliseconds budget = kBudget) {
  const Clock::time_point deadline = Clock::now() + budget;
  while (true) {
    const TlsStep step = session.Handshake();
    if (!Waiting(step) || !WaitFor(session, deadline)) return step;
  }
}

// Reads `size` bytes with Read() and poll(): fewer when the session ends.
std::string ReadBytes(TlsSession& session, size_t size) {
  const Clock::time_point deadline = Clock::now() + kBudget;
  std::string data;
  char buffer[16384];
  while (data.size() < size) {
    const ssize_t got = session.Read(buffer, std::min(sizeof buffer, size - data.size()));
    if (got > 0) {
      data.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got == 0 || !Waiting(session.last()) || !WaitFor(session, deadline)) break;
  }
  return data;
}

bool WriteBytes(TlsSession& session, const std::string& data) {
  const Clock::time_point deadline = Clock::now() + kBudget;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t wrote = session.Write(data.data() + done, data.size() - done);
    if (wrote > 0) {
      done += static_cast<size_t>(wrote);
      continue;
    }
    if (!Waiting(session.last()) || !WaitFor(session, deadline)) return false;
  }
  return true;
}

std::string Pattern(size_t size) {
  std::string data(size, '\0');
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>((i * 131 + i / 977) & 0xff);
  return data;
}

// An accepted socket and its session, destroyed in that order (also when an
// assertion returns early, so a client thread waiting on it sees EOF).
struct ServerSide {
  int fd = -1;
  std::unique_ptr<TlsSession> session;
  ~ServerSide() {
    session.reset();
    if (fd >= 0) ::close(fd);
  }
};

class TlsStreamTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The test's blocking client writes through OpenSSL's socket BIO.
    ::signal(SIGPIPE, SIG_IGN);
    pki_ = new TestPki();
    pki_->MakeCa("ca", "tensorop test CA");
    pki_->MakeServerCert("server", "ca");
    pki_->MakeCert("server2", "ca", "tensord-rotated", "DNS:localhost,IP:127.0.0.1");
    pki_->MakeCa("clients", "tensorop client CA");
    pki_->MakeCert("client", "clients", "client-a", "");
    pki_->MakeCa("other", "another CA");
    pki_->MakeCert("stranger", "other", "client-stranger", "");
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static TlsMaterial Material(const std::string& server, const std::string& client_ca = "") {
    TlsMaterial material;
    material.cert_chain = pki_->Read(server + ".crt");
    material.private_key = pki_->Read(server + ".key");
    if (!client_ca.empty()) material.client_ca = pki_->Read(client_ca + ".crt");
    return material;
  }

  static std::shared_ptr<const TlsServerContext> Context(const TlsMaterial& material) {
    absl::StatusOr<std::shared_ptr<const TlsServerContext>> context =
        TlsServerContext::Create(material);
    EXPECT_TRUE(context.ok()) << context.status();
    return context.ok() ? *context : nullptr;
  }

  // The server side of the next connection on `listener`.
  static std::unique_ptr<ServerSide> AcceptSession(
      const Listener& listener, std::shared_ptr<const TlsServerContext> context) {
    auto server = std::make_unique<ServerSide>();
    server->fd = listener.Accept();
    absl::StatusOr<std::unique_ptr<TlsSession>> session =
        TlsSession::Accept(server->fd, std::move(context));
    EXPECT_TRUE(session.ok()) << session.status();
    if (session.ok()) server->session = *std::move(session);
    return server;
  }

  static TestPki* pki_;
};

TestPki* TlsStreamTest::pki_ = nullptr;

TEST_F(TlsStreamTest, HandshakeThenEchoBothWaysIncludingOneMebibyte) {
  Listener listener;
  const std::string big = Pattern(1 << 20);
  auto client = std::async(std::launch::async, [&] {
    TlsClient tls(listener.port(), pki_->Path("ca.crt"));
    std::vector<std::string> got;
    if (!tls.Handshake()) return got;
    got.push_back(tls.PeerCommonName());
    tls.WriteAll("ping");
    got.push_back(tls.Read(4));
    tls.WriteAll(big);
    got.push_back(tls.Read(big.size()));
    got.push_back(tls.Read(1));  // then the server's close_notify
    return got;
  });
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(DriveHandshake(*session), TlsStep::kDone) << session->error();
  EXPECT_THAT(session->Version(), StartsWith("TLSv1."));
  EXPECT_EQ(session->Alpn(), "http/1.1");
  EXPECT_EQ(session->PeerCertificateSubject(), "");  // no client CA: none asked
  EXPECT_EQ(ReadBytes(*session, 4), "ping");
  EXPECT_TRUE(WriteBytes(*session, "pong"));
  EXPECT_EQ(ReadBytes(*session, big.size()), big);
  EXPECT_TRUE(WriteBytes(*session, big));
  EXPECT_TRUE(session->Shutdown());
  const std::vector<std::string> got = client.get();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "tensord");
  EXPECT_EQ(got[1], "pong");
  EXPECT_TRUE(got[2] == big) << "the client read " << got[2].size() << " bytes";
  EXPECT_EQ(got[3], "");
  server.reset();
}

TEST_F(TlsStreamTest, PlainHttpInsteadOfAClientHelloIsAnErrorNotAHang) {
  Listener listener;
  const int client = Connect(listener.port());
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(::send(client, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kError);
  EXPECT_THAT(session->error(), HasSubstr("http request"));
  EXPECT_EQ(session->Handshake(), TlsStep::kError);  // stays failed
  char byte;
  EXPECT_EQ(session->Read(&byte, 1), -1);
  EXPECT_FALSE(session->Shutdown());
  server.reset();
  ::close(client);
}

TEST_F(TlsStreamTest, BinaryGarbageInsteadOfAClientHelloIsAnError) {
  Listener listener;
  const int client = Connect(listener.port());
  const std::string garbage(64, '\xff');
  ASSERT_EQ(::send(client, garbage.data(), garbage.size(), MSG_NOSIGNAL), 64);
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kError);
  EXPECT_THAT(session->error(), HasSubstr("SSL routines"));
  server.reset();
  ::close(client);
}

TEST_F(TlsStreamTest, ASilentClientLeavesTheHandshakeWantingToRead) {
  Listener listener;
  const int client = Connect(listener.port());
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  // The caller's deadline ends it; until then it only waits.
  EXPECT_EQ(DriveHandshake(*session, std::chrono::milliseconds(300)), TlsStep::kWantRead);
  EXPECT_EQ(session->PollEvents(), POLLIN);
  EXPECT_EQ(session->error(), "");
  EXPECT_FALSE(session->Shutdown());  // mid-handshake: nothing to send
  server.reset();
  ::close(client);
}

TEST_F(TlsStreamTest, AClientThatHangsUpMidHandshakeIsClosed) {
  Listener listener;
  const int client = Connect(listener.port());
  ::close(client);
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kClosed);
  server.reset();
}

TEST_F(TlsStreamTest, MutualTlsRefusesAClientWithoutACertificate) {
  Listener listener;
  auto client = std::async(std::launch::async, [&] {
    TlsClient tls(listener.port(), pki_->Path("ca.crt"));
    // TLS 1.3: the client finishes first and learns of the refusal on read.
    return tls.Handshake() && tls.Read(1).size() == 1;
  });
  std::unique_ptr<ServerSide> server =
      AcceptSession(listener, Context(Material("server", "clients")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kError);
  EXPECT_THAT(session->error(), HasSubstr("peer did not return a certificate"));
  EXPECT_EQ(session->PeerCertificateSubject(), "");
  server.reset();
  EXPECT_FALSE(client.get());
}

TEST_F(TlsStreamTest, MutualTlsRefusesAClientCertificateFromAnotherCa) {
  Listener listener;
  auto client = std::async(std::launch::async, [&] {
    TlsClient tls(listener.port(), pki_->Path("ca.crt"), pki_->Path("stranger.crt"),
                  pki_->Path("stranger.key"));
    return tls.Handshake() && tls.Read(1).size() == 1;
  });
  std::unique_ptr<ServerSide> server =
      AcceptSession(listener, Context(Material("server", "clients")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kError);
  EXPECT_THAT(session->error(), HasSubstr("certificate verify failed"));
  EXPECT_THAT(session->error(), HasSubstr("client certificate: unable to get local issuer"));
  server.reset();
  EXPECT_FALSE(client.get());
}

TEST_F(TlsStreamTest, MutualTlsNamesTheVerifiedClient) {
  Listener listener;
  auto client = std::async(std::launch::async, [&] {
    TlsClient tls(listener.port(), pki_->Path("ca.crt"), pki_->Path("client.crt"),
                  pki_->Path("client.key"));
    if (!tls.Handshake()) return std::string("no handshake");
    tls.WriteAll("hi");
    return tls.Read(2);
  });
  std::unique_ptr<ServerSide> server =
      AcceptSession(listener, Context(Material("server", "clients")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(DriveHandshake(*session), TlsStep::kDone) << session->error();
  // As gRPC's x509 subject property (RFC 2253), which CallerIdentity in
  // auth.h makes "cert:CN=client-a,O=tensorop test" of.
  EXPECT_EQ(session->PeerCertificateSubject(), "CN=client-a,O=tensorop test");
  EXPECT_EQ(ReadBytes(*session, 2), "hi");
  EXPECT_TRUE(WriteBytes(*session, "yo"));
  EXPECT_EQ(client.get(), "yo");
  server.reset();
}

TEST_F(TlsStreamTest, AlpnWithoutHttp11IsRefused) {
  Listener listener;
  auto client = std::async(std::launch::async, [&] {
    TlsClient tls(listener.port(), pki_->Path("ca.crt"), "", "", std::string("\x02h2", 3));
    return tls.Handshake();
  });
  std::unique_ptr<ServerSide> server = AcceptSession(listener, Context(Material("server")));
  TlsSession* session = server->session.get();
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(DriveHandshake(*session), TlsStep::kError);
  EXPECT_THAT(session->error(), HasSubstr("no application protocol"));
  server.reset();
  EXPECT_FALSE(client.get());
}

TEST_F(TlsStreamTest, ContextRefusesAKeyThatIsNotPem) {
  TlsMaterial material = Material("server");
  material.private_key = "not a key";
  absl::StatusOr<std::shared_ptr<const TlsServerContext>> context =
      TlsServerContext::Create(material);
  ASSERT_FALSE(context.ok());
  EXPECT_EQ(context.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(context.status().message(), HasSubstr("OpenSSL refused the private key"));
}

// A handshake on `listener` with `holder`'s current context: the client's
// view of the server certificate (common name, serial), and the session.
struct Handshaken {
  std::unique_ptr<TlsClient> client;
  std::unique_ptr<ServerSide> server;
};

TEST_F(TlsStreamTest, ReloadServesNewHandshakesTheNewCertificateAndKeepsOldSessions) {
  pki_->Copy("server.crt", "live.crt");
  pki_->Copy("server.key", "live.key");
  std::vector<std::string> events;
  absl::StatusOr<std::unique_ptr<TlsCredentials>> credentials = TlsCredentials::Create(
      {pki_->Path("live.crt"), pki_->Path("live.key"), ""},
      [&events](absl::string_view event, absl::string_view) { events.emplace_back(event); });
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  absl::StatusOr<std::shared_ptr<TlsContextHolder>> holder = FollowTlsCredentials(**credentials);
  ASSERT_TRUE(holder.ok()) << holder.status();
  Listener listener;

  // Connects a client, drives both handshakes, returns both sides.
  auto handshake = [&](Handshaken& pair) {
    pair.client = std::make_unique<TlsClient>(listener.port(), pki_->Path("ca.crt"));
    auto connected = std::async(std::launch::async, [&] { return pair.client->Handshake(); });
    pair.server = AcceptSession(listener, (*holder)->Current());
    ASSERT_NE(pair.server->session, nullptr);
    TlsSession& session = *pair.server->session;
    ASSERT_EQ(DriveHandshake(session), TlsStep::kDone) << session.error();
    ASSERT_TRUE(connected.get());
  };

  Handshaken before;
  handshake(before);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(before.client->PeerCommonName(), "tensord");
  const std::string old_serial = before.client->PeerSerial();

  pki_->Copy("server2.crt", "live.crt");
  pki_->Copy("server2.key", "live.key");
  (*credentials)->Reload();
  EXPECT_EQ(events, std::vector<std::string>{"tls_reloaded"});
  EXPECT_EQ((*credentials)->CurrentMaterial().cert_chain, pki_->Read("server2.crt"));

  Handshaken after;
  handshake(after);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(after.client->PeerCommonName(), "tensord-rotated");
  EXPECT_NE(after.client->PeerSerial(), old_serial);

  // The session from before the reload still carries data both ways.
  auto old_client = std::async(std::launch::async, [&] {
    before.client->WriteAll("still");
    return before.client->Read(4);
  });
  EXPECT_EQ(ReadBytes(*before.server->session, 5), "still");
  EXPECT_TRUE(WriteBytes(*before.server->session, "here"));
  EXPECT_EQ(old_client.get(), "here");
  EXPECT_EQ(before.client->PeerCommonName(), "tensord");
}

}  // namespace
}  // namespace tensorop::server
