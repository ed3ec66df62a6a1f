// The request log: one JSON object per line on stderr, one line per call (per
// request inside RunBidi), written when the call's outcome is known.
#ifndef TENSOROP_SERVER_TELEMETRY_REQUEST_LOG_H_
#define TENSOROP_SERVER_TELEMETRY_REQUEST_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/sanitizers.h"
#include "server/telemetry/trace_context.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// What one log line says about a call, gathered as the call proceeds.
struct CallRecord {
  absl::string_view method;  // "Run", "RunStream", "RunBidi", "RunChunked"
  std::string id;
  std::string op;     // "slice", ...; empty when the request names none
  std::string dtype;  // of the input named "input"; empty when unknown
  // By input name, at most kMaxLoggedInputs of them (the first names in
  // order), each list at most kMaxLoggedEntries long: a request with 60 M
  // sizes or 100 k inputs must not cost a 120 MB line.
  std::vector<std::pair<std::string, std::vector<int64_t>>> sizes;
  // The real length of each list in `sizes` where it was cut (same index;
  // missing or shorter: the list is whole), and the number of inputs.
  std::vector<int64_t> sizes_lengths;
  int64_t input_count = -1;  // -1: sizes.size()
  std::string backend;       // where it ran, or was to run
  int64_t bytes_in = 0;      // input data bytes
  int64_t bytes_out = 0;     // output data bytes sent
  // Who called: "token:NAME" and/or "cert:SUBJECT" (server/security/auth.h); empty
  // for an anonymous call, and then left out of the line.
  std::string identity;
  // The trace the call joined (its traceparent); empty: none.
  TraceContext trace;
  // Where the call came from, as gRPC names peers ("ipv4:127.0.0.1:41234",
  // "unix:/run/tensord.sock"); empty when unknown, and then left out.
  std::string peer;
  absl::Time start = absl::Now();
};

// Lists and ids are cut beyond these in log lines.
inline constexpr size_t kMaxLoggedEntries = 16;
inline constexpr size_t kMaxLoggedInputs = 16;
inline constexpr size_t kMaxLoggedIdBytes = 64;
inline constexpr size_t kMaxLoggedMessageBytes = 1024;

// A record for `request` arriving through `method`, started now. Its cost is
// bounded by the cuts above and the number of inputs (which it only counts
// past kMaxLoggedInputs), so it may run inside a gRPC reaction.
CallRecord DescribeRequest(absl::string_view method, const v1::RunRequest& request);
// A RunChain request's record: its id and the data bytes its steps carry.
CallRecord DescribeChain(absl::string_view method, const v1::RunChainRequest& chain);

// `described` (a parsed request's record) in place of `record`, keeping what
// was known before the request was parsed: when the call started, who made
// it, from where, and the trace it joined.
void Redescribe(CallRecord& record, CallRecord described);

// The line for `record` ending with `status` at `end`, without the newline:
// {"time":"2024-05-01T12:00:00.123456Z","level":"info","method":"Run","id":"a",
//  "op":"slice","dtype":"float32","sizes":{"input":[4,4]},"backend":"cpu",
//  "bytes_in":64,"bytes_out":16,"latency_us":210,"status":"OK",
//  "peer":"ipv4:127.0.0.1:41234"}
// plus "message" when the status is not OK, "identity" for an
// authenticated caller, and "trace_id", "span_id" (tensord's) and
// "parent_span_id" (the caller's) for a call that carried a traceparent. `time` is `end` in RFC
// 3339, UTC; `level` is LevelOf(status).
std::string FormatLogLine(const CallRecord& record, const absl::Status& status, absl::Time end);

// A line's level: "info" for OK, "warning" for what the caller did or asked
// (a bad request, a limit, a missing handle, a cancellation), "error" for what
// the server failed at (INTERNAL, UNAVAILABLE, ...).
absl::string_view LevelOf(absl::StatusCode code);

// Which calls get a line (--request_log): every call, those that failed,
// every failure and one OK call in `sample_every`, or none.
struct RequestLogPolicy {
  enum class Mode { kAll, kErrors, kSample, kOff };
  Mode mode = Mode::kAll;
  int64_t sample_every = 1;
};
// "all", "errors", "sample:N" (N in [1, 10^9]) or "off"; INVALID_ARGUMENT
// naming the flag otherwise.
absl::StatusOr<RequestLogPolicy> ParseRequestLogPolicy(absl::string_view text);
// The policy LogCall follows from now on (all until set).
void SetRequestLogPolicy(const RequestLogPolicy& policy);

// Queues the line for `record` ending at `end` with `status` (when the
// policy keeps it); a logger thread
// formats it and writes it to stderr whole (lines from concurrent calls never
// interleave), so no formatting runs in the caller (a gRPC reaction). When
// kLogQueueLength lines wait already the line is dropped and counted; the
// count is written as {"event":"log_dropped","lines":N} once there is room.
inline constexpr size_t kLogQueueLength = 4096;
// Lines are written in batches: those queued within kLogBatchDelay of the
// first, at most kLogBatchLines, so a line reaches stderr at most that late.
inline constexpr absl::Duration kLogBatchDelay = absl::Milliseconds(5);
inline constexpr size_t kLogBatchLines = 256;
void LogCall(const CallRecord& record, const absl::Status& status, absl::Time end = absl::Now());

// Writes every queued line and stops the logger thread (later LogCall lines
// are written at once). Called at exit.
void FlushRequestLog();

// Lines dropped so far because the queue was full.
int64_t DroppedLogLines();

// A line of its own for a device failure: which device, and what it said.
// {"time":...,"event":"device_failure","device":"opencl:<name>","status":...}
void LogDeviceFailure(absl::string_view device, const absl::Status& status);

// A line of its own for a server event, written whole like the others:
// {"time":...,"level":"<level>","event":"<event>","detail":"<detail>"}
void LogEvent(absl::string_view event, absl::string_view detail, absl::string_view level = "info");

// A line for a message of a library tensord runs (gRPC core, PoCL), so that
// every line on stderr is JSON: {"time":...,"level":...,"source":"grpc",
// "message":...} (the message cut at kMaxLoggedMessageBytes).
void LogForeign(absl::string_view source, absl::string_view level, absl::string_view message);

// Writes `text` as it is to stderr (the original one when captured): a
// message a person reads as tensord exits, such as a usage error.
void WriteToStderr(absl::string_view text);

// Whether CaptureForeignStderr captures: not in sanitizer builds, whose
// reports must reach stderr as the process dies (a process test built with
// the same flags reads this to know what tensord's stderr holds).
#if defined(TENSOROP_ASAN_ENABLED) || defined(TENSOROP_TSAN_ENABLED)
inline constexpr bool kCapturesForeignStderr = false;
#else
inline constexpr bool kCapturesForeignStderr = true;
#endif

// From here on, whatever writes to file descriptor 2 other than this log
// (PoCL prints its warnings there) is read back a line at a time and written
// as LogForeign("stderr", ...) lines; this log writes to the original stderr.
// Call once, early (before OpenCL starts). A no-op unless
// kCapturesForeignStderr.
void CaptureForeignStderr();

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TELEMETRY_REQUEST_LOG_H_
