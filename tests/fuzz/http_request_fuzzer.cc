// The v2 HTTP request path on arbitrary bytes (issue 36): the waiting room's
// reading of the head (ParseHttpRequestHead, server/transport/bounded_http.h), then for
// an infer or a shared memory register, the body as the route reads it
// (ParseHttpInferRequest with its reservations, ToRunRequest; or
// ParseSystemSharedMemoryRegister). It never crashes; what the head reader
// accepts has CRLF lines only and one framing; a parse reserves in proportion
// to its body, and at least the raw bytes it made; no error message grows
// with what the client sent (names are quoted cut: server/wire/quoted.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "server/transport/bounded_http.h"
#include "server/v2/inference_http_json.h"
#include "server/v2/inference_models.h"
#include "server/wire/quoted.h"

namespace {

using tensorop::server::HttpRequestHead;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// The most the parse may reserve per byte of body (server/v2/inference_http_json.cc's
// cost model: 32 bytes per byte for the worst shapes, plus the raw bytes and
// one reservation step).
constexpr int64_t kReservedPerByte = 40;
constexpr int64_t kReserveStep = int64_t{1} << 20;

void Infer(absl::string_view model, const HttpRequestHead& head, absl::string_view body) {
  std::optional<int64_t> header_length;
  if (auto found = head.headers.find("inference-header-content-length");
      found != head.headers.end()) {
    int64_t value = -1;
    if (!absl::SimpleAtoi(found->second, &value) || value < 0) return;  // the route's 400
    header_length = value;
  }
  int64_t reserved = 0;
  absl::StatusOr<tensorop::server::HttpInferRequest> parsed =
      tensorop::server::ParseHttpInferRequest(model, "", body, header_length, [&](int64_t bytes) {
        Check(bytes > 0, "reserves a positive count");
        reserved += bytes;
        return absl::OkStatus();
      });
  Check(reserved <= kReservedPerByte * static_cast<int64_t>(body.size()) + 2 * kReserveStep,
        "the parse reserves in proportion to its body");
  if (!parsed.ok()) {
    Check(parsed.status().code() == absl::StatusCode::kInvalidArgument, "a parse error's code");
    Check(absl::StartsWith(parsed.status().message(), tensorop::server::CutForMessage(model)),
          "a parse error names the model (cut)");
    Check(parsed.status().message().size() < 4096, "a parse error's message is bounded");
    return;
  }
  int64_t raw = 0;
  for (const std::string& bytes : parsed->request.raw_input_contents()) {
    raw += static_cast<int64_t>(bytes.size());
  }
  Check(raw <= reserved, "the raw bytes made were reserved");
  absl::StatusOr<tensorop::v1::RunRequest> run = tensorop::server::ToRunRequest(parsed->request);
  if (!run.ok()) Check(run.status().message().size() < 4096, "a conversion error is bounded");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t end = bytes.find("\r\n\r\n");
  if (end == absl::string_view::npos) return 0;  // the waiting room waits for more
  const absl::string_view text = bytes.substr(0, end + 4);
  absl::StatusOr<HttpRequestHead> head = tensorop::server::ParseHttpRequestHead(text);
  if (!head.ok()) {
    Check(head.status().code() == absl::StatusCode::kInvalidArgument, "a head error's code");
    Check(absl::StartsWith(head.status().message(), "the request's head is refused: "),
          "a head error says why");
    return 0;
  }
  // One reading of framing: every line ends in CRLF, no bare CR or LF.
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') Check(i > 0 && text[i - 1] == '\r', "LF only after CR");
    if (text[i] == '\r') Check(i + 1 < text.size() && text[i + 1] == '\n', "CR only before LF");
  }
  Check(head->content_length >= 0, "a size");
  Check(head->headers.contains("content-length") || head->content_length == 0,
        "no Content-Length: no body");
  // The body is what Content-Length says, as the waiting room hands it over.
  absl::string_view body = bytes.substr(end + 4);
  if (static_cast<uint64_t>(head->content_length) > body.size()) return 0;  // still arriving
  body = body.substr(0, static_cast<size_t>(head->content_length));

  const std::vector<absl::string_view> path = absl::StrSplit(head->target, '/');
  if (path.size() == 5 && path[0].empty() && path[1] == "v2" && path[2] == "models" &&
      path[4] == "infer" && !path[3].empty()) {
    Infer(path[3], *head, body);
  } else if (path.size() == 6 && path[1] == "v2" && path[2] == "systemsharedmemory" &&
             path[3] == "region" && path[5] == "register") {
    absl::Status status = tensorop::server::ParseSystemSharedMemoryRegister(path[4], body).status();
    if (!status.ok()) Check(status.message().size() < 4096, "a register error is bounded");
  }
  return 0;
}
