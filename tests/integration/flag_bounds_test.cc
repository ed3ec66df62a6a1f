// A flag outside its range makes tensord exit 2 naming the flag and the range,
// before anything listens. Every numeric flag's range is walked in-process by
// ConfigTest.EveryNumericFlagHasOneRangeThatValidationAndHelpUse; here a few
// of each kind go through the real process.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string flag;     // as given
  std::string message;  // what stderr must say
};

TEST(FlagBoundsTest, OutOfRangeValuesExitTwoNamingFlagAndRange) {
  const std::vector<Case> cases = {
      {"--worker_threads=2147483647", "--worker_threads=2147483647 must be in [1, 1024]"},
      {"--worker_threads=0", "--worker_threads=0 must be in [1, 1024]"},
      {"--max_message_bytes=4294967296",
       "--max_message_bytes=4294967296 must be in [4096, 2147483647]"},
      {"--chunk_bytes=67108801", "--chunk_bytes=67108801 must be in [1, 67108800]"},
      {"--address=127.0.0.1:99999", "--address=127.0.0.1:99999: the port must be in [0, 65535]"},
      {"--address=127.0.0.1:-1", "--address=127.0.0.1:-1: the port must be in [0, 65535]"},
      {"--address=localhost", "--address=localhost: expected HOST:PORT"},
      {"--metrics_address=127.0.0.1:65536",
       "--metrics_address=127.0.0.1:65536: the port must be in [0, 65535]"},
      {"--metrics_address=127.0.0.1:http",
       "--metrics_address=127.0.0.1:http: the port must be in [0, 65535]"},
  };
  for (const Case& c : cases) {
    const CommandResult result = RunCommand({TensordPath(), "--backends=cpu", c.flag});
    EXPECT_EQ(result.exit_code, 2) << c.flag;
    EXPECT_THAT(result.err, HasSubstr("tensord: " + c.message)) << c.flag;
    EXPECT_THAT(result.out, ::testing::Not(HasSubstr("listening"))) << c.flag;
  }
}

// Every listener refuses an address another process listens on: tensord
// exits 1 naming the flag, the address and the OS's reason, before it says it
// listens (gRPC's SO_REUSEPORT would otherwise share the port and split the
// calls between the two servers).
TEST(FlagBoundsTest, EveryListenerRefusesATakenAddress) {
  TensordProcess first(
      {"--backends=cpu", "--http_address=127.0.0.1:0", "--health_address=127.0.0.1:0"});
  const std::string health_port =
      first.health_target().substr(first.health_target().rfind(':') + 1);
  const std::vector<std::string> taken = {
      "--address=" + first.target(),
      "--health_address=" + first.target(),
      "--health_address=127.0.0.1:" + health_port,
      "--http_address=127.0.0.1:" + std::to_string(first.http_port()),
      "--metrics_address=127.0.0.1:" + std::to_string(first.metrics_port()),
  };
  for (const std::string& flag : taken) {
    // Every other listener on a free port (or off), so that only `flag`
    // collides (--address may repeat: given once).
    std::vector<std::string> argv = {"/usr/bin/timeout", "30", TensordPath(), "--backends=cpu"};
    for (const std::string free :
         {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--http_address="}) {
      if (free.substr(0, free.find('=')) != flag.substr(0, flag.find('='))) argv.push_back(free);
    }
    argv.push_back(flag);
    const CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 1) << flag << "\n" << result.err;
    EXPECT_THAT(result.err,
                HasSubstr("tensord: " + flag + ": cannot listen there: Address already in use"))
        << flag;
    EXPECT_THAT(result.out, ::testing::Not(HasSubstr("listening"))) << flag;
  }
}

TEST(FlagBoundsTest, TheEdgesOfEachRangeAreAccepted) {
  TensordProcess server({"--backends=cpu", "--worker_threads=1", "--max_queued_requests=1",
                         "--max_message_bytes=4096", "--chunk_bytes=4032",
                         "--shutdown_grace_seconds=0", "--drain_seconds=0",
                         "--max_concurrent_streams=1", "--max_connection_idle_seconds=0",
                         "--opencl_unhealthy_seconds=86400", "--auto_opencl_min_bytes=0"});
  EXPECT_THAT(server.target(), HasSubstr("127.0.0.1:"));
}

TEST(FlagBoundsTest, MetricsListenOnLoopbackByDefault) {
  // No --metrics_address: the default 127.0.0.1:9464 (taken or free, it is
  // what the server tries), never every interface.
  const CommandResult help = RunCommand({TensordPath(), "--help"});
  EXPECT_THAT(help.out, HasSubstr("--metrics_address (default 127.0.0.1:9464)"));
}

}  // namespace
}  // namespace tensorop::testing
