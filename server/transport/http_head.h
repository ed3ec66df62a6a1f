// The pure parts of the bounded HTTP server (server/transport/bounded_http.h):
// a request's head read strictly, so that framing has one reading, and a
// listening address split for httplib. No sockets: unit-tested and fuzzed
// (tests/fuzz/http_request_fuzzer.cc) as they are.
#ifndef TENSOROP_SERVER_TRANSPORT_HTTP_HEAD_H_
#define TENSOROP_SERVER_TRANSPORT_HTTP_HEAD_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

// A request's line and headers, as the waiting room read them.
struct HttpRequestHead {
  std::string method;
  std::string target;                          // path and query
  std::map<std::string, std::string> headers;  // names lowercased
  int64_t content_length = 0;                  // 0 when none was given
  // Not read from the text: the waiting room sets it from the connection
  // (Connection::PeerCertificateSubject) before admitting the request.
  std::string peer_certificate_subject;
};

// The request line and headers of `text` (ending in the blank line), read
// strictly so that framing has one reading (RFC 9112): INVALID_ARGUMENT for
// bare CR or LF, NUL, folded or malformed header lines, a request line that is
// not METHOD SP TARGET SP HTTP/1.x, a repeated Content-Length or
// Transfer-Encoding, or a Content-Length that is not 1..18 digits.
absl::StatusOr<HttpRequestHead> ParseHttpRequestHead(absl::string_view text);

// "HOST:PORT" or "[V6HOST]:PORT" split for httplib's bind; INVALID_ARGUMENT
// naming `what` ("metrics address") otherwise.
struct HttpHostPort {
  std::string host;
  int port = 0;
};
absl::StatusOr<HttpHostPort> SplitHttpHostPort(const std::string& address, const std::string& what);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_HTTP_HEAD_H_
