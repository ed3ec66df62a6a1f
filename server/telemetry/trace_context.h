// W3C Trace Context (https://www.w3.org/TR/trace-context/): the trace a call
// joins from its `traceparent` (gRPC metadata or an HTTP header), written in
// its request log line, and the traceparent of tensord's own span for the
// answer. A malformed traceparent is ignored, never an error, as the
// recommendation asks; a call without one starts no trace (nothing is added
// to its answer, so untraced calls cost nothing).
#ifndef TENSOROP_SERVER_TELEMETRY_TRACE_CONTEXT_H_
#define TENSOROP_SERVER_TELEMETRY_TRACE_CONTEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tensorop::server {

// The header (and gRPC metadata key) carrying the context.
inline constexpr absl::string_view kTraceparentHeader = "traceparent";

struct TraceContext {
  std::string trace_id;        // 32 lowercase hex digits; empty: no trace
  std::string parent_span_id;  // 16 hex digits: the caller's span
  std::string span_id;         // 16 hex digits: tensord's span for this call
  std::string flags;           // 2 hex digits, the caller's (sampled or not)
  bool empty() const { return trace_id.empty(); }
};

// tensord's span in the trace `traceparent` names, with a fresh random span
// id; empty when `traceparent` is absent or malformed (any version but ff is
// read by version 00's rules, as the recommendation asks).
TraceContext JoinTrace(absl::string_view traceparent);

// "00-<trace_id>-<span_id>-<flags>": tensord's span, for the answer.
std::string TraceparentOf(const TraceContext& trace);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TELEMETRY_TRACE_CONTEXT_H_
