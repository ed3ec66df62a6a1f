// What every hostile-client test against a real tensord checks when an attack
// is over: the server still runs, and its peak resident memory stayed within
// its baseline plus its budget and a margin.
#ifndef TENSOROP_TESTS_SERVER_HOSTILE_CHECKS_H_
#define TENSOROP_TESTS_SERVER_HOSTILE_CHECKS_H_

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>

#include <gtest/gtest.h>

#include "tests/support/proc_status.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {

inline constexpr int64_t kMiB = int64_t{1} << 20;
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

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SERVER_HOSTILE_CHECKS_H_
