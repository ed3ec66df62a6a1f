// A client's text quoted into a message (a status, a log line): at most
// kMaxQuotedBytes of it, escaped, so that no name, key or token a client sent
// makes a message unbounded or unprintable. And the bound on the ids a client
// names its requests with, which the server echoes.
#ifndef TENSOROP_SERVER_WIRE_QUOTED_H_
#define TENSOROP_SERVER_WIRE_QUOTED_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

inline constexpr size_t kMaxQuotedBytes = 80;

// `text` in double quotes: its first kMaxQuotedBytes bytes, '"' and '\' escaped,
// bytes outside printable ASCII as '?', and "..." where it was cut.
std::string Quoted(absl::string_view text);

// `text` as it stands in a message without quotes: cut (at `max_bytes`) and
// escaped as Quoted.
std::string CutForMessage(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

// The longest request or chain id (RunRequest.id, RunChainRequest.id, v2
// ModelInferRequest.id and the HTTP body's "id") a server takes: ids are
// echoed in answers and logs, so an unbounded one would let one call make
// every answer and message about it as large as its message limit.
inline constexpr size_t kMaxIdBytes = 256;

// OK when `id` has at most kMaxIdBytes bytes; else INVALID_ARGUMENT naming
// `field`, its length and the limit (never the id itself).
absl::Status CheckIdBytes(absl::string_view id, absl::string_view field);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_QUOTED_H_
