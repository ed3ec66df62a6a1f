#include "server/telemetry/trace_context.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tensorop::server {
namespace {

// Lowercase hex only: the recommendation refuses uppercase.
bool IsHex(absl::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsAllZero(absl::string_view text) { return text.find_first_not_of('0') == text.npos; }

std::string RandomSpanId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = random();  // all zeros is not a span id
  return absl::StrFormat("%016x", id);
}

}  // namespace

TraceContext JoinTrace(absl::string_view traceparent) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  constexpr size_t kLength = 55;
  if (traceparent.size() < kLength) return {};
  const absl::string_view version = traceparent.substr(0, 2);
  const absl::string_view trace_id = traceparent.substr(3, 32);
  const absl::string_view parent_id = traceparent.substr(36, 16);
  const absl::string_view flags = traceparent.substr(53, 2);
  if (traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-') return {};
  if (!IsHex(version) || version == "ff" || !IsHex(trace_id) || !IsHex(parent_id) ||
      !IsHex(flags) || IsAllZero(trace_id) || IsAllZero(parent_id)) {
    return {};
  }
  // Version 00 is exactly 55 characters; a later version may append fields
  // after a dash, which are not read.
  if (traceparent.size() > kLength && (version == "00" || traceparent[kLength] != '-')) return {};
  return TraceContext{.trace_id = std::string(trace_id),
                      .parent_span_id = std::string(parent_id),
                      .span_id = RandomSpanId(),
                      .flags = std::string(flags)};
}

std::string TraceparentOf(const TraceContext& trace) {
  return absl::StrCat("00-", trace.trace_id, "-", trace.span_id, "-", trace.flags);
}

}  // namespace tensorop::server
