// --opencl_staging_bytes against the memory budget of a real tensord: each
// OpenCL device's staging bound is reserved at startup (visible as
// tensorop_memory_reserved_bytes while idle), and startup stops, naming both
// flags, when it does not fit --max_memory_bytes.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;

// The devices tensord listed at startup ({"event":"device",...} lines).
int DeviceCount(const TensordProcess& server) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(server.Log(), '\n')) {
    count += absl::StrContains(line, "\"event\":\"device\"");
  }
  return count;
}

// tensorop_memory_reserved_bytes from /metrics, or -1.
int64_t ReservedBytes(const TensordProcess& server) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  if (!result) return -1;
  for (absl::string_view line : absl::StrSplit(result->body, '\n')) {
    if (!absl::StartsWith(line, "tensorop_memory_reserved_bytes ")) continue;
    int64_t value = -1;
    if (absl::SimpleAtoi(line.substr(line.find(' ') + 1), &value)) return value;
  }
  return -1;
}

TEST(StagingBudgetTest, EachDevicesStagingIsReservedFromStartup) {
  TensordProcess server({"--opencl_staging_bytes=1048576", "--max_memory_bytes=1073741824"});
  const int devices = DeviceCount(server);
  EXPECT_EQ(ReservedBytes(server), int64_t{devices} * 1048576);
  if (devices > 0) {
    EXPECT_THAT(server.Log(),
                HasSubstr(absl::StrCat(int64_t{devices} * 1048576,
                                       " bytes reserved (--opencl_staging_bytes=1048576 for ",
                                       devices, " device(s))")));
  }
}

TEST(StagingBudgetTest, ZeroStagingOrNoOpenClReservesNothing) {
  TensordProcess none({"--opencl_staging_bytes=0"});
  EXPECT_EQ(ReservedBytes(none), 0);
  EXPECT_THAT(none.Log(), ::testing::Not(HasSubstr("opencl_staging")));
  TensordProcess cpu({"--backends=cpu", "--opencl_staging_bytes=1048576"});
  EXPECT_EQ(ReservedBytes(cpu), 0);
}

TEST(StagingBudgetTest, StagingThatDoesNotFitTheBudgetStopsStartup) {
  int devices = 0;
  {
    TensordProcess probe({"--opencl_staging_bytes=0"});
    devices = DeviceCount(probe);
  }
  if (devices == 0) GTEST_SKIP() << "no OpenCL device: nothing to stage";
  const CommandResult result =
      RunCommand({TensordPath(), "--address=127.0.0.1:0", "--metrics_address=", "--http_address=",
                  "--max_memory_bytes=1000000", "--opencl_staging_bytes=1048576"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err,
              HasSubstr(absl::StrCat("tensord: --opencl_staging_bytes=1048576 for ", devices,
                                     " OpenCL device(s) does not fit "
                                     "--max_memory_bytes=1000000")));
  EXPECT_THAT(result.out, ::testing::Not(HasSubstr("listening")));
}

}  // namespace
}  // namespace tensorop::testing
