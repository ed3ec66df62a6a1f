// The request log: one JSON object per line on stderr, one line per call (per
// request inside RunBidi), written when the call's outcome is known.
#ifndef TENSOROP_SERVER_REQUEST_LOG_H_
#define TENSOROP_SERVER_REQUEST_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// What one log line says about a call, gathered as the call proceeds.
struct CallRecord {
  absl::string_view method;  // "Run", "RunStream", "RunBidi", "RunChunked"
  std::string id;
  std::string op;     // "slice", ...; empty when the request names none
  std::string dtype;  // of the input named "input"; empty when unknown
  std::vector<std::pair<std::string, std::vector<int64_t>>> sizes;  // by input name
  std::string backend;  // where it ran, or was to run
  int64_t bytes_in = 0;   // input data bytes
  int64_t bytes_out = 0;  // output data bytes sent
  // Who called: "token:NAME" and/or "cert:SUBJECT" (server/auth.h); empty
  // for an anonymous call, and then left out of the line.
  std::string identity;
  absl::Time start = absl::Now();
};

// A record for `request` arriving through `method`, started now.
CallRecord DescribeRequest(absl::string_view method, const v1::RunRequest& request);

// The line for `record` ending with `status` at `end`, without the newline:
// {"time":"2024-05-01T12:00:00.123456Z","method":"Run","id":"a","op":"slice",
//  "dtype":"float32","sizes":{"input":[4,4]},"backend":"cpu","bytes_in":64,
//  "bytes_out":16,"latency_us":210,"status":"OK"}
// plus "message" when the status is not OK, and "identity" for an
// authenticated caller. `time` is `end` in RFC 3339, UTC.
std::string FormatLogLine(const CallRecord& record, const absl::Status& status,
                          absl::Time end);

// Writes the line for `record` ending at `end` with `status` to stderr, whole
// (lines from concurrent calls never interleave).
void LogCall(const CallRecord& record, const absl::Status& status, absl::Time end = absl::Now());

// A line of its own for a device failure: which device, and what it said.
// {"time":...,"event":"device_failure","device":"opencl:<name>","status":...}
void LogDeviceFailure(absl::string_view device, const absl::Status& status);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_REQUEST_LOG_H_
