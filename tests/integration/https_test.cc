// The v2 HTTP/REST API over TLS: with --tls_cert_file, --http_address serves
// HTTPS with gRPC's certificate, key and client CA (server/transport/tls_stream.h's
// TlsConnections in server/transport/bounded_http.h's waiting room), against a real
// tensord on loopback and httplib's HTTPS client, with certificates made by
// openssl at test time.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/support/eventually.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHttpsToken[] = "s3cret-token-for-https-0123456789";
constexpr char kSliceJson[] = R"({"id":"t","parameters":{"backend":"cpu"},"inputs":[
  {"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]},
  {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
  {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
  {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";
constexpr char kSliceOutput[] =
    R"("outputs":[{"data":[2.0,3.0,5.0,6.0],"datatype":"FP32","name":"output","shape":[2,2]}])";

class InferenceHttpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki();
    pki_->MakeCa("ca", "tensorop test CA");
    pki_->MakeServerCert("server", "ca");
    pki_->MakeCert("client", "ca", "client-a", "");
    pki_->MakeCa("other", "another CA");
    pki_->MakeCert("stranger", "other", "client-stranger", "");
    pki_->MakeServerCert("server_other", "other");
    pki_->Replace("tokens", std::string("ci:") + kHttpsToken + "\n");
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static std::string P(const std::string& file) { return pki_->Path(file); }

  // TLS on both ports, HTTP on an ephemeral loopback port.
  static std::vector<std::string> Flags(const std::string& cert = "server") {
    return {"--tls_cert_file=" + P(cert + ".crt"), "--tls_key_file=" + P(cert + ".key"),
            "--http_address=127.0.0.1:0", "--backends=cpu"};
  }

  // An HTTPS client that verifies the server against `ca` (its name is
  // "localhost", in the server certificate), presenting `cert` when given.
  static std::unique_ptr<httplib::SSLClient> Https(const TensordProcess& server,
                                                   const std::string& ca = "ca",
                                                   const std::string& cert = "") {
    auto client = cert.empty()
                      ? std::make_unique<httplib::SSLClient>("localhost", server.http_port())
                      : std::make_unique<httplib::SSLClient>("localhost", server.http_port(),
                                                             P(cert + ".crt"), P(cert + ".key"));
    client->set_ca_cert_path(P(ca + ".crt").c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(10, 0);
    client->set_read_timeout(30, 0);
    return client;
  }

  static TestPki* pki_;
};

TestPki* InferenceHttpTlsTest::pki_ = nullptr;

// A TCP connection to 127.0.0.1:port that gives up reading after 20 s.
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  timeval timeout{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

// Sends `text` and reads until the server closes; "timeout" if it does not.
std::string SendAndReadToClose(int port, const std::string& text) {
  const int fd = Connect(port);
  EXPECT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
  std::string got;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) got = "timeout";
      break;  // a reset is a close too
    }
    got.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

TEST_F(InferenceHttpTlsTest, ServesHealthAndInferOverHttps) {
  TensordProcess server(Flags());
  ASSERT_GT(server.http_port(), 0);
  auto https = Https(server);
  auto ready = https->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);

  auto answer = Https(server)->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(answer->get_header_value("Content-Type"), "application/json");
  EXPECT_THAT(answer->body, HasSubstr(R"("model_name":"slice")"));
  EXPECT_THAT(answer->body, HasSubstr(kSliceOutput));

  // An error answer comes back over TLS as well.
  auto unknown = Https(server)->Get("/v2/models/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_THAT(unknown->body, HasSubstr("model \\\"nope\\\" is not served here"));
}

TEST_F(InferenceHttpTlsTest, APlaintextRequestGetsNoAnswer) {
  TensordProcess server(Flags());
  const std::string got = SendAndReadToClose(
      server.http_port(), "GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_NE(got, "timeout");  // closed, not left waiting
  EXPECT_THAT(got, Not(HasSubstr("HTTP/1.1")));
  // httplib's plaintext client fails the same way.
  httplib::Client plain("127.0.0.1", server.http_port());
  plain.set_read_timeout(20, 0);
  auto answer = plain.Get("/v2/health/ready");
  EXPECT_FALSE(answer);
  // A client that does not trust the server's CA refuses it.
  auto untrusted = Https(server, "other")->Get("/v2/health/ready");
  EXPECT_FALSE(untrusted);
  // And the server still answers HTTPS afterwards.
  auto ready = Https(server)->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
}

TEST_F(InferenceHttpTlsTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--tls_client_ca_file=" + P("ca.crt"));
  TensordProcess server(flags);

  auto anonymous = Https(server)->Get("/v2/health/ready");
  EXPECT_FALSE(anonymous);
  auto stranger = Https(server, "ca", "stranger")
                      ->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  EXPECT_FALSE(stranger);

  auto ready = Https(server, "ca", "client")->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  auto answer =
      Https(server, "ca", "client")->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_THAT(answer->body, HasSubstr(kSliceOutput));
}

TEST_F(InferenceHttpTlsTest, AStalledHandshakeDoesNotBlockOthers) {
  TensordProcess server(Flags());
  // TCP connections that never send a ClientHello, then one that stops
  // half-way through a request.
  std::vector<int> stalled;
  for (int i = 0; i < 4; ++i) stalled.push_back(Connect(server.http_port()));
  auto https = Https(server);
  auto ready = https->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  auto answer = Https(server)->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_THAT(answer->body, HasSubstr(kSliceOutput));
  for (int fd : stalled) ::close(fd);
}

TEST_F(InferenceHttpTlsTest, BearerTokensApplyOverHttps) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);

  // Health needs no token.
  auto ready = Https(server)->Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);

  auto missing = Https(server)->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(missing) << httplib::to_string(missing.error());
  EXPECT_EQ(missing->status, 401);
  EXPECT_THAT(missing->body, HasSubstr("this server needs a bearer token"));

  auto https = Https(server);
  https->set_bearer_token_auth(kHttpsToken);
  auto answer = https->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_THAT(answer->body, HasSubstr(kSliceOutput));

  // The system shared memory routes too.
  auto regions = Https(server)->Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(regions) << httplib::to_string(regions.error());
  EXPECT_EQ(regions->status, 401);
  EXPECT_THAT(regions->body, HasSubstr("this server needs a bearer token"));
  regions = https->Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(regions) << httplib::to_string(regions.error());
  EXPECT_EQ(regions->status, 200) << regions->body;
  EXPECT_EQ(regions->body, "[]");
}

TEST_F(InferenceHttpTlsTest, FollowsCertificateReloads) {
  pki_->Copy("server.crt", "live.crt");
  pki_->Copy("server.key", "live.key");
  TensordProcess server(Flags("live"));
  auto before = Https(server, "ca")->Get("/v2/health/ready");
  ASSERT_TRUE(before) << httplib::to_string(before.error());
  EXPECT_EQ(before->status, 200);

  // A certificate from another CA: new HTTPS handshakes present it.
  pki_->Copy("server_other.key", "live.key");
  pki_->Copy("server_other.crt", "live.crt");
  ::kill(server.pid(), SIGHUP);
  EXPECT_TRUE(Eventually([&] {
    auto after = Https(server, "other")->Get("/v2/health/ready");
    return after && after->status == 200;
  })) << server.Log();
  EXPECT_FALSE(Https(server, "ca")->Get("/v2/health/ready"));
}

}  // namespace
}  // namespace tensorop::testing
