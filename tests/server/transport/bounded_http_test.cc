// The waiting room's reading of a request head (server/transport/bounded_http.h): one
// reading of framing, so that what it admits is what httplib then parses
// (issue 36, item 4); and what an admitted request's body holds.
#include "server/transport/bounded_http.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HttpRequestHeadTest, AWellFormedHeadIsRead) {
  ASSERT_OK_AND_ASSIGN(
      HttpRequestHead head,
      ParseHttpRequestHead(
          "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\n"
          "Content-Length:  42 \r\nX-Empty:\r\nAuthorization: Bearer a b\r\n\r\n"));
  EXPECT_EQ(head.method, "POST");
  EXPECT_EQ(head.target, "/v2/models/slice/infer");
  EXPECT_EQ(head.content_length, 42);
  EXPECT_EQ(head.headers["content-length"], "42");
  EXPECT_EQ(head.headers["x-empty"], "");
  EXPECT_EQ(head.headers["authorization"], "Bearer a b");
  ASSERT_OK_AND_ASSIGN(head, ParseHttpRequestHead("GET /v2 HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(head.content_length, 0);
}

TEST(HttpRequestHeadTest, HeadsFramingCouldBeReadTwoWaysFromAreRefused) {
  const std::pair<const char*, const char*> refused[] = {
      // The two: a second Content-Length, and Transfer-Encoding
      // after a bare line feed.
      {"POST / HTTP/1.1\r\nContent-Length: 1000000\r\nContent-Length: 2\r\n\r\n",
       "more than one Content-Length header"},
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\nX: y\nTransfer-Encoding: chunked\r\n\r\n",
       "a bare line feed at byte 40 (lines end in CRLF)"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n",
       "more than one Transfer-Encoding header"},
      {"POST / HTTP/1.1\r\nX: a\rb\r\n\r\n", "a bare carriage return at byte 21"},
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\n Transfer-Encoding: chunked\r\n\r\n",
       "header line 2 is not NAME: VALUE"},
      {"POST / HTTP/1.1\r\nContent-Length : 2\r\n\r\n", "header line 1 is not NAME: VALUE"},
      {"POST / HTTP/1.1\r\nno colon\r\n\r\n", "header line 1 is not NAME: VALUE"},
      {"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n", "Content-Length \"+2\" is not a size"},
      {"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n", "Content-Length \"2, 2\" is not a size"},
      {"POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", "is not a size"},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", "is not a size"},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "Content-Length \"-1\" is not a size"},
      {"POST  / HTTP/1.1\r\n\r\n", "the request line is not METHOD SP TARGET SP HTTP/1.x"},
      {"POST / HTTP/2\r\n\r\n", "the request line is not"},
      {"PO(ST / HTTP/1.1\r\n\r\n", "the request line is not"},
      {"POST / HTTP/1.1\r\nX: \0\r\n\r\n", "a NUL byte"},
      {"POST / HTTP/1.1\r\n", "it does not end in a blank line"},
  };
  for (const auto& [head, why] : refused) {
    const std::string text = std::string(head) == "POST / HTTP/1.1\r\nX: \0\r\n\r\n"
                                 ? std::string("POST / HTTP/1.1\r\nX: \0\r\n\r\n", 25)
                                 : std::string(head);
    const absl::Status status = ParseHttpRequestHead(text).status();
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 ::testing::StartsWith("the request's head is refused: ")))
        << head;
    EXPECT_THAT(status.message(), HasSubstr(why)) << head;
  }
}

// The body is held as the waiting room reads it, with the handler's copies
// once it is whole; by the time the handler runs, httplib has read the
// waiting room's buffer, and the body holds the handler's copies alone.
TEST(BoundedHttpServerTest, ABodyHoldsTheHandlersCopiesAloneOnceHttplibHasReadIt) {
  constexpr int64_t kBody = 100000;
  std::mutex mutex;
  std::vector<int64_t> held;  // each hold_bytes, in order
  BoundedHttpOptions options;
  options.max_body_bytes = 1 << 20;
  options.admit = [&](const HttpRequestHead&) {
    return HttpAdmission{{}, nullptr, [&](int64_t bytes) {
                           std::lock_guard<std::mutex> lock(mutex);
                           held.push_back(bytes);
                           return HttpRefusal{};
                         }};
  };
  std::vector<int64_t> held_when_handled;
  absl::StatusOr<std::unique_ptr<BoundedHttpServer>> server =
      BoundedHttpServer::Start("127.0.0.1:0", "--test", options, [&](httplib::Server& routes) {
        routes.Post("/body", [&](const httplib::Request& request, httplib::Response& response) {
          std::lock_guard<std::mutex> lock(mutex);
          held_when_handled = held;
          response.set_content(std::to_string(request.body.size()), "text/plain");
        });
      });
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  const httplib::Result answer =
      client.Post("/body", std::string(kBody, 'x'), "application/octet-stream");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  EXPECT_EQ(answer->body, std::to_string(kBody));
  ASSERT_GE(held_when_handled.size(), 2u);
  // Whole: the waiting room's buffer and the handler's copies.
  EXPECT_GE(held_when_handled[held_when_handled.size() - 2], (1 + kHandlerBodyCopies) * kBody);
  EXPECT_EQ(held_when_handled.back(), kHandlerBodyCopies * kBody);
}

}  // namespace
}  // namespace tensorop::server
