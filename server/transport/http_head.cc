#include "server/transport/http_head.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tensorop::server {
namespace {

// RFC 9110's token characters: a header name and a method.
bool IsTokenByte(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

absl::Status BadHead(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("the request's head is refused: ", why));
}

}  // namespace

absl::StatusOr<HttpRequestHead> ParseHttpRequestHead(absl::string_view text) {
  // Every line ends in CRLF: a bare CR or LF is where two parsers disagree.
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r')) {
      return BadHead(absl::StrCat("a bare line feed at byte ", i, " (lines end in CRLF)"));
    }
    if (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n')) {
      return BadHead(absl::StrCat("a bare carriage return at byte ", i));
    }
    if (text[i] == '\0') return BadHead(absl::StrCat("a NUL byte at byte ", i));
  }
  absl::string_view block = text;
  if (!absl::ConsumeSuffix(&block, "\r\n\r\n")) return BadHead("it does not end in a blank line");
  std::vector<absl::string_view> lines = absl::StrSplit(block, "\r\n");
  HttpRequestHead head;
  std::vector<absl::string_view> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || first[0].empty() ||
      !std::all_of(first[0].begin(), first[0].end(), IsTokenByte) || first[1].empty() ||
      !absl::StartsWith(first[2], "HTTP/1.")) {
    return BadHead("the request line is not METHOD SP TARGET SP HTTP/1.x");
  }
  head.method = std::string(first[0]);
  head.target = std::string(first[1]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    const size_t colon = line.find(':');
    // No folded lines (RFC 9112 5.2), no space before the colon (5.1).
    if (colon == absl::string_view::npos || colon == 0 ||
        !std::all_of(line.begin(), line.begin() + colon, IsTokenByte)) {
      return BadHead(absl::StrCat("header line ", i, " is not NAME: VALUE"));
    }
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    // Framing is decided once (RFC 9112 6.3): a repeated Content-Length, or
    // Transfer-Encoding (refused by the caller with 411) seen twice, is refused
    // here rather than read one way by us and another by httplib.
    if ((name == "content-length" || name == "transfer-encoding") && head.headers.contains(name)) {
      return BadHead(absl::StrCat("more than one ", line.substr(0, colon), " header"));
    }
    if (name == "content-length") {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(value, &head.content_length)) {
        return BadHead(absl::StrCat("Content-Length \"", value.substr(0, 32), "\" is not a size"));
      }
    }
    head.headers[std::move(name)] = std::move(value);
  }
  return head;
}

absl::StatusOr<HttpHostPort> SplitHttpHostPort(const std::string& address,
                                               const std::string& what) {
  const size_t colon = address.rfind(':');
  HttpHostPort split;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &split.port) ||
      split.port < 0 || split.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", address, "\": expected HOST:PORT"));
  }
  split.host = address.substr(0, colon);
  // [::1] -> ::1, as getaddrinfo wants it.
  if (split.host.size() >= 2 && split.host.front() == '[' && split.host.back() == ']') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  return split;
}

}  // namespace tensorop::server
