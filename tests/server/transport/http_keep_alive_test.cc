// HTTP/1.1 keep-alive in the bounded HTTP server (server/transport/bounded_http.h),
// in-process over loopback: an answered connection serves the next request,
// closes when asked, when idle, when pipelined or when the waiting room needs
// its place, and the slow-client deadline still holds for a kept connection's
// next request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "server/transport/bounded_http.h"

namespace tensorop::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kHello[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";

// A server answering GET /hello with "hi", keeping connections `idle` long.
std::unique_ptr<BoundedHttpServer> KeepAliveServer(std::chrono::milliseconds idle,
                                                   size_t max_waiting = 16) {
  BoundedHttpOptions options;
  options.max_waiting = max_waiting;
  options.request_deadline = std::chrono::milliseconds(300);
  options.max_body_bytes = 1 << 20;
  options.keep_alive_idle = idle;
  options.admit = [](const HttpRequestHead&) { return HttpAdmission{}; };
  auto server = BoundedHttpServer::Start("127.0.0.1:0", "--test", options, [](httplib::Server& s) {
    s.Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hi", "text/plain");
    });
  });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// A loopback connection whose reads give up after 30 s (a hang guard only).
int KeepAliveConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  timeval timeout{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

void SendText(int fd, const std::string& text) {
  EXPECT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// One answer: its head and body by Content-Length; "" when the connection
// closed (or failed) first.
std::string ReadOneAnswer(int fd) {
  std::string answer;
  char byte;
  while (answer.find("\r\n\r\n") == std::string::npos) {
    if (::recv(fd, &byte, 1, 0) != 1) return "";
    answer.push_back(byte);
  }
  const std::string head = absl::AsciiStrToLower(answer);
  const size_t at = head.find("content-length:");
  size_t length = 0;
  if (at != std::string::npos) {
    EXPECT_TRUE(absl::SimpleAtoi(head.substr(at + 15, head.find("\r\n", at) - at - 15), &length));
  }
  while (length-- > 0) {
    if (::recv(fd, &byte, 1, 0) != 1) return "";
    answer.push_back(byte);
  }
  return answer;
}

// True once the server closed the connection (a read of 0 or a reset);
// false when a read timed out or bytes came.
bool ClosedByServer(int fd) {
  char byte;
  const ssize_t got = ::recv(fd, &byte, 1, 0);
  return got == 0 || (got < 0 && errno == ECONNRESET);
}

TEST(HttpKeepAliveTest, OneConnectionServesRequestsUntilTheClientAsksToClose) {
  auto server = KeepAliveServer(std::chrono::seconds(30));
  ASSERT_NE(server, nullptr);
  const int fd = KeepAliveConnect(server->port());
  for (int i = 0; i < 3; ++i) {
    SendText(fd, kHello);
    const std::string answer = ReadOneAnswer(fd);
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n")) << i;
    EXPECT_THAT(answer, HasSubstr("Keep-Alive: timeout=30, max=1000\r\n")) << i;
    EXPECT_THAT(answer, Not(HasSubstr("Connection: close"))) << i;
    EXPECT_THAT(answer, ::testing::EndsWith("\r\n\r\nhi")) << i;
  }
  SendText(fd, "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string last = ReadOneAnswer(fd);
  EXPECT_THAT(last, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(last, HasSubstr("Connection: close\r\n"));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

TEST(HttpKeepAliveTest, AnIdleKeptConnectionIsClosed) {
  auto server = KeepAliveServer(std::chrono::milliseconds(200));
  ASSERT_NE(server, nullptr);
  const int fd = KeepAliveConnect(server->port());
  SendText(fd, kHello);
  EXPECT_THAT(ReadOneAnswer(fd), StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

// The slow-client deadline holds for a kept connection's next request: one
// that begins and then trickles is closed, unanswered.
TEST(HttpKeepAliveTest, AKeptConnectionsNextRequestHasTheRequestDeadline) {
  auto server = KeepAliveServer(std::chrono::seconds(30));
  ASSERT_NE(server, nullptr);
  const int fd = KeepAliveConnect(server->port());
  SendText(fd, kHello);
  EXPECT_THAT(ReadOneAnswer(fd), StartsWith("HTTP/1.1 200 OK\r\n"));
  SendText(fd, "GET /hel");
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

// A request sent before the previous one's answer (pipelining) is not
// served: the first is answered and the connection closes.
TEST(HttpKeepAliveTest, PipelinedRequestsGetOneAnswerThenTheConnectionCloses) {
  auto server = KeepAliveServer(std::chrono::seconds(30));
  ASSERT_NE(server, nullptr);
  const int fd = KeepAliveConnect(server->port());
  SendText(fd, std::string(kHello) + kHello);
  const std::string answer = ReadOneAnswer(fd);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(answer, HasSubstr("Connection: close\r\n"));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

TEST(HttpKeepAliveTest, WithoutKeepAliveEachAnswerClosesItsConnection) {
  auto server = KeepAliveServer(std::chrono::milliseconds(0));
  ASSERT_NE(server, nullptr);
  const int fd = KeepAliveConnect(server->port());
  SendText(fd, kHello);
  EXPECT_THAT(ReadOneAnswer(fd), HasSubstr("Connection: close\r\n"));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

// A full waiting room closes an idle kept connection before an older client
// that is still sending its request (otherwise the oldest goes first).
TEST(HttpKeepAliveTest, IdleKeptConnectionsAreTheFirstEvicted) {
  auto server = KeepAliveServer(std::chrono::seconds(30), /*max_waiting=*/2);
  ASSERT_NE(server, nullptr);
  const int sending = KeepAliveConnect(server->port());
  SendText(sending, "GET /hello HTTP/1.1\r\n");
  const int kept = KeepAliveConnect(server->port());
  SendText(kept, kHello);
  EXPECT_THAT(ReadOneAnswer(kept), StartsWith("HTTP/1.1 200 OK\r\n"));
  // A third connection for two places: the idle one gives way.
  const int newest = KeepAliveConnect(server->port());
  SendText(newest, kHello);
  EXPECT_THAT(ReadOneAnswer(newest), StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(ClosedByServer(kept));
  SendText(sending, "Host: x\r\n\r\n");
  EXPECT_THAT(ReadOneAnswer(sending), StartsWith("HTTP/1.1 200 OK\r\n"));
  for (int fd : {sending, kept, newest}) ::close(fd);
}

}  // namespace
}  // namespace tensorop::server
