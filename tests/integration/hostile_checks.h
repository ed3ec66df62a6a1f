// What every hostile-client test against a real tensord checks when an attack
// is over: the server still runs, its peak resident memory stayed within its
// baseline plus its budget and a margin, and (for the HTTP ones) an infer is
// answered.
#ifndef TENSOROP_TESTS_INTEGRATION_HOSTILE_CHECKS_H_
#define TENSOROP_TESTS_INTEGRATION_HOSTILE_CHECKS_H_

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "tests/support/byte_units.h"
#include "tests/support/proc_status.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {

// Resident memory the server may take beyond its budget: what is outside it
// (gRPC's transport buffers, a few MiB per connection; a message received
// before it can be reserved; a chunk's parsed copy while it is appended) and
// what malloc keeps of freed blocks. The attacks would take GiBs without it.
inline constexpr int64_t kRssMargin = 64 * kMiB;

inline bool Alive(const TensordProcess& server) {
  return waitpid(server.pid(), nullptr, WNOHANG) == 0 && kill(server.pid(), 0) == 0;
}

// The server's peak resident memory (VmHWM) within `baseline` + `budget` +
// kRssMargin, where sanitizers let the bound hold (kResidentBoundsHold); the
// figures are recorded as the test's properties either way (RELIABILITY.md
// quotes them).
inline void ExpectPeakWithin(const TensordProcess& server, int64_t baseline, int64_t budget) {
  const int64_t peak = PeakResidentBytes(server.pid());
  ASSERT_GT(peak, 0);
  ::testing::Test::RecordProperty("peak_rss_mib", static_cast<int>(peak / kMiB));
  ::testing::Test::RecordProperty("baseline_rss_mib", static_cast<int>(baseline / kMiB));
  if (!kResidentBoundsHold) return;
  EXPECT_LE(peak, baseline + budget + kRssMargin)
      << "peak " << peak / kMiB << " MiB, baseline " << baseline / kMiB << " MiB, budget "
      << budget / kMiB << " MiB";
}

// A v2 HTTP Slice infer of a 2 x 3 float32 matrix, as JSON.
inline constexpr char kSliceJson[] = R"({"id":"t","parameters":{"backend":"cpu"},"inputs":[
  {"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]},
  {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
  {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
  {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";

// An HTTP/1.1 POST of `body` to `path`, as raw bytes.
inline std::string Post(const std::string& path, const std::string& body,
                        const std::string& extra_headers = "") {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\n", extra_headers,
                      "Content-Length: ", body.size(), "\r\n\r\n", body);
}

// A v2 HTTP infer answered 200 within 2 s, on a connection of its own.
inline void ExpectHttpInferAnswers(const TensordProcess& server) {
  httplib::Client client("127.0.0.1", server.http_port());
  client.set_read_timeout(2, 0);
  httplib::Result answer = client.Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer) << httplib::to_string(answer.error());
  EXPECT_EQ(answer->status, 200) << answer->body;
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_INTEGRATION_HOSTILE_CHECKS_H_
