// A client's text quoted into a message (a status, a log line): at most
// kMaxQuotedBytes of it, escaped, so that no name, key or token a client sent
// makes a message unbounded or unprintable.
#ifndef TENSOROP_SERVER_WIRE_QUOTED_H_
#define TENSOROP_SERVER_WIRE_QUOTED_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tensorop::server {

inline constexpr size_t kMaxQuotedBytes = 80;

// `text` in double quotes: its first kMaxQuotedBytes bytes, '"' and '\' escaped,
// bytes outside printable ASCII as '?', and "..." where it was cut.
std::string Quoted(absl::string_view text);

// `text` as it stands in a message without quotes: cut (at `max_bytes`) and
// escaped as Quoted.
std::string CutForMessage(absl::string_view text, size_t max_bytes = kMaxQuotedBytes);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_QUOTED_H_
