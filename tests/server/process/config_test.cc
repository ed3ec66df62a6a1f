// ConfigFromFlags in-process: defaults, every range and format error (naming
// the flag and the value), flag files, later flags winning, unknown flags, and
// --help's order. tests/integration/flag_bounds_test.cc and lifecycle_test.cc check
// the same through the binary's exit status.
#include "server/process/config.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/backend_name.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_files.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TempFiles;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ConfigTest, DefaultsWithoutFlags) {
  ASSERT_OK_AND_ASSIGN(const ServerConfig config, ConfigFromFlags({}));
  EXPECT_FALSE(config.help);
  EXPECT_THAT(config.addresses, ElementsAre("0.0.0.0:50051"));
  EXPECT_EQ(config.address, "0.0.0.0:50051");
  EXPECT_EQ(config.metrics_address, "127.0.0.1:9464");
  EXPECT_EQ(config.health_address, "");
  EXPECT_FALSE(config.echo);
  EXPECT_TRUE(config.opencl);
  EXPECT_TRUE(config.calibrate);
  EXPECT_EQ(config.opencl_filter, "");
  EXPECT_EQ(config.scheduler.worker_threads,
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(config.scheduler.max_queued_requests, 256);
  EXPECT_EQ(config.scheduler.default_backend, v1::AUTO);
  EXPECT_FALSE(config.scheduler.auto_opencl_min_bytes.has_value());
  EXPECT_EQ(config.max_message_bytes, 64 << 20);
  EXPECT_EQ(config.service.max_message_bytes, int64_t{64} << 20);
  EXPECT_EQ(config.service.chunk_bytes, int64_t{1} << 20);
  EXPECT_EQ(config.service.limits.max_request_bytes, int64_t{4} << 30);
  EXPECT_EQ(config.service.limits.max_tensor_elements, int64_t{4294967295});
  EXPECT_EQ(config.service.idle_timeout, absl::Seconds(60));
  EXPECT_EQ(config.devices.queue_depth, 8);
  EXPECT_EQ(config.devices.max_wait, std::chrono::seconds(30));
  EXPECT_EQ(config.devices.unhealthy_for, std::chrono::seconds(30));
  EXPECT_EQ(config.devices.inject_failures, 0);
  EXPECT_EQ(config.device.staging_bytes, int64_t{64} << 20);
  EXPECT_EQ(config.grace, std::chrono::seconds(30));
  EXPECT_EQ(config.drain, std::chrono::seconds(0));
  EXPECT_EQ(config.max_connection_age_seconds, 0);
  EXPECT_EQ(config.max_concurrent_streams, 128);
  EXPECT_EQ(config.max_connection_idle_seconds, 600);
  EXPECT_EQ(config.shared_memory_idle_seconds, 300);
  EXPECT_EQ(config.handles.default_ttl, absl::Seconds(600));
  EXPECT_EQ(config.handles.max_ttl, absl::Seconds(86400));
  EXPECT_EQ(config.handles.max_bytes_per_client, config.max_memory_bytes / 2);
  EXPECT_EQ(config.handles.replica, "");  // the Server sets where it listens
  EXPECT_EQ(config.security.reflection, ReflectionAccess::kAuth);
  EXPECT_EQ(config.security.auth_token_file, "");
  // 0: half of what the process may use, and where that figure came from.
  EXPECT_GT(config.max_memory_bytes, 0);
  EXPECT_THAT(config.max_memory_source, StartsWith("half of the "));
  // -1: a quarter of the budget.
  EXPECT_EQ(config.buffer_pool_bytes, config.max_memory_bytes / 4);
}

TEST(ConfigTest, FlagsSetTheirFields) {
  ASSERT_OK_AND_ASSIGN(
      const ServerConfig config,
      ConfigFromFlags(
          {"--address=127.0.0.1:0", "--worker_threads", "3", "--backend=opencl", "--backends=cpu",
           "--echo", "--calibrate=off", "--drain_seconds=2", "--max_memory_bytes=1000000",
           "--metrics_address=", "--opencl_devices=pthread", "--auto_opencl_min_bytes=4096"}));
  EXPECT_THAT(config.addresses, ElementsAre("127.0.0.1:0"));
  EXPECT_EQ(config.scheduler.worker_threads, 3);
  EXPECT_EQ(config.scheduler.default_backend, v1::OPENCL);
  EXPECT_FALSE(config.opencl);
  EXPECT_TRUE(config.echo);
  EXPECT_FALSE(config.calibrate);
  EXPECT_EQ(config.drain, std::chrono::seconds(2));
  EXPECT_EQ(config.max_memory_bytes, 1000000);
  EXPECT_EQ(config.max_memory_source, "");
  EXPECT_EQ(config.buffer_pool_bytes, 250000);  // a quarter of the budget given
  EXPECT_EQ(config.metrics_address, "");
  EXPECT_EQ(config.opencl_filter, "pthread");
  EXPECT_EQ(config.scheduler.auto_opencl_min_bytes, 4096);
}

TEST(ConfigTest, EachCallStartsFromTheDefaults) {
  ASSERT_OK(ConfigFromFlags({"--worker_threads=3", "--echo"}).status());
  ASSERT_OK_AND_ASSIGN(const ServerConfig config, ConfigFromFlags({}));
  EXPECT_EQ(config.scheduler.worker_threads,
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_FALSE(config.echo);
}

TEST(ConfigTest, AutoOpenClMinBytesGivenAtItsDefaultStillReplacesTheModel) {
  ASSERT_OK_AND_ASSIGN(const ServerConfig config,
                       ConfigFromFlags({"--auto_opencl_min_bytes=9223372036854775807"}));
  EXPECT_EQ(config.scheduler.auto_opencl_min_bytes, int64_t{9223372036854775807});
}

TEST(ConfigTest, RepeatedAddressesListenOnEachTcpFirst) {
  ASSERT_OK_AND_ASSIGN(
      const ServerConfig config,
      ConfigFromFlags({"--address=unix:/tmp/tensord-config-test.sock", "--address=127.0.0.1:0",
                       "--address=[::1]:0", "--address=127.0.0.1:0"}));
  EXPECT_THAT(config.addresses,
              ElementsAre("127.0.0.1:0", "[::1]:0", "unix:/tmp/tensord-config-test.sock"));
  EXPECT_EQ(config.address, "127.0.0.1:0");
}

TEST(ConfigTest, LaterFlagsWin) {
  ASSERT_OK_AND_ASSIGN(const ServerConfig config,
                       ConfigFromFlags({"--worker_threads=3", "--worker_threads=5", "--backend=cpu",
                                        "--backend=auto"}));
  EXPECT_EQ(config.scheduler.worker_threads, 5);
  EXPECT_EQ(config.scheduler.default_backend, v1::AUTO);
}

TEST(ConfigTest, AFlagFileIsReadInPlace) {
  TempFiles files;
  const std::string path = files.Write(
      "# tensord flags\n--worker_threads=4\n\n--max_queued_requests=9\n--backends=cpu\n",
      "tensord-flags");
  // The file's --worker_threads replaces the one before it; the one after wins.
  ASSERT_OK_AND_ASSIGN(const ServerConfig config,
                       ConfigFromFlags({"--worker_threads=2", "--max_queued_requests=7",
                                        "--flagfile=" + path, "--max_queued_requests=11"}));
  EXPECT_EQ(config.scheduler.worker_threads, 4);
  EXPECT_EQ(config.scheduler.max_queued_requests, 11);
  EXPECT_FALSE(config.opencl);
  ASSERT_OK_AND_ASSIGN(const ServerConfig spaced, ConfigFromFlags({"--flagfile", path}));
  EXPECT_EQ(spaced.scheduler.max_queued_requests, 9);
}

TEST(ConfigTest, AFlagFileErrorNamesTheFileAndLine) {
  TempFiles files;
  const std::string path = files.Write("--echo\n--no_such_flag=1\n", "tensord-flags");
  EXPECT_THAT(ConfigFromFlags({"--flagfile=" + path}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(path, ":2: unknown flag --no_such_flag")));
  const std::string bad_value = files.Write("--worker_threads=many\n", "tensord-flags");
  EXPECT_THAT(ConfigFromFlags({"--flagfile=" + bad_value}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith(absl::StrCat(bad_value, ":1: --worker_threads=many: "))));
  const std::string not_a_flag = files.Write("worker_threads=2\n", "tensord-flags");
  EXPECT_THAT(ConfigFromFlags({"--flagfile=" + not_a_flag}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat(not_a_flag,
                                    ":1: expected one --name=value per line (no "
                                    "--flagfile), not \"worker_threads=2\"")));
  EXPECT_THAT(ConfigFromFlags({"--flagfile=/nonexistent/tensord.flags"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--flagfile=/nonexistent/tensord.flags: cannot read the file"));
}

TEST(ConfigTest, UnknownFlagsAndStrayWordsAreRefused) {
  EXPECT_THAT(ConfigFromFlags({"--no_such_flag=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag --no_such_flag"));
  EXPECT_THAT(ConfigFromFlags({"stray"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unexpected argument \"stray\""));
  EXPECT_THAT(ConfigFromFlags({"--address"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "--address needs a value"));
  EXPECT_THAT(ConfigFromFlags({"--echo=maybe"}),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--echo=maybe: ")));
  EXPECT_THAT(ConfigFromFlags({"--worker_threads=many"}),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("--worker_threads=many: ")));
}

struct FlagErrorCase {
  std::string flag;
  std::string message;
};

// Every numeric flag has a range (TENSORD_RANGED_FLAG), and that one range is
// what validation and --help use: one below and one above are refused naming
// the flag, the value and the range; both ends are accepted.
TEST(ConfigTest, EveryNumericFlagHasOneRangeThatValidationAndHelpUse) {
  std::set<std::string> ranged;
  for (const FlagRange& range : TensordFlagRanges()) ranged.insert(range.name);
  for (const std::string& name : TensordFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag->IsOfType<int>() || flag->IsOfType<int64_t>()) {
      EXPECT_EQ(ranged.count(name), 1) << "--" << name << " has no range";
    }
  }
  EXPECT_GE(ranged.size(), 27);
  const std::string help = FlagsHelp();
  for (const FlagRange& range : TensordFlagRanges()) {
    const std::string flag = absl::StrCat("--", range.name, "=");
    // --chunk_bytes=1 first, so that no end of --max_message_bytes's range is
    // refused for the default chunk (a later --chunk_bytes wins).
    auto config_with = [&](int64_t value) {
      return ConfigFromFlags({"--chunk_bytes=1", absl::StrCat(flag, value)});
    };
    const std::string in_range = absl::StrCat(" must be in [", range.lo, ", ", range.hi, "]");
    EXPECT_THAT(config_with(range.lo - 1), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    absl::StrCat(flag, range.lo - 1, in_range)));
    if (range.hi < std::numeric_limits<int64_t>::max()) {
      EXPECT_THAT(config_with(range.hi + 1), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      absl::StrCat(flag, range.hi + 1, in_range)));
    }
    for (const int64_t end : {range.lo, range.hi}) {
      const absl::StatusOr<ServerConfig> config = config_with(end);
      EXPECT_TRUE(config.ok()) << flag << end << ": " << config.status();
    }
    const size_t at = help.find(absl::StrCat("  --", range.name, " "));
    ASSERT_NE(at, std::string::npos) << range.name;
    const std::string own_help = help.substr(at, help.find("\n  --", at + 1) - at);
    EXPECT_THAT(absl::StrReplaceAll(own_help, {{"\n      ", " "}}),
                HasSubstr(absl::StrCat("; in [", range.lo, ", ")))
        << own_help;
  }
}

// The other flags' errors name the flag and the value too.
TEST(ConfigTest, EveryOtherFlagErrorNamesTheFlagAndValue) {
  const std::vector<FlagErrorCase> cases = {
      {"--address=127.0.0.1:65536", "--address=127.0.0.1:65536: the port must be in [0, 65535]"},
      {"--address=localhost", "--address=localhost: expected HOST:PORT, or unix:PATH"},
      {"--address=unix:", "--address=unix:: expected unix:PATH or unix:///ABSOLUTE_PATH"},
      {"--address=unix:/nonexistent-dir/s.sock",
       "--address=unix:/nonexistent-dir/s.sock: the directory /nonexistent-dir does not exist"},
      {"--metrics_address=127.0.0.1:http",
       "--metrics_address=127.0.0.1:http: the port must be in [0, 65535]"},
      {"--metrics_address=no-port",
       "--metrics_address=no-port: expected HOST:PORT, or empty for no metrics"},
      {"--health_address=no-port", "--health_address=no-port: expected HOST:PORT"},
      {"--backend=gpu", "--backend=gpu: expected auto, cpu or opencl"},
      {"--backends=opencl", "--backends=opencl: expected cpu or cpu,opencl"},
      {"--calibrate=maybe", "--calibrate=maybe: expected on or off"},
      {"--reflection=maybe", "--reflection=maybe: expected on, off or auth"},
  };
  for (const FlagErrorCase& c : cases) {
    EXPECT_THAT(ConfigFromFlags({c.flag}), StatusIs(absl::StatusCode::kInvalidArgument, c.message))
        << c.flag;
  }
}

TEST(ConfigTest, TheEdgesOfEachRangeAreAccepted) {
  ASSERT_OK_AND_ASSIGN(
      const ServerConfig config,
      ConfigFromFlags({"--worker_threads=1024", "--max_message_bytes=4096", "--chunk_bytes=4032",
                       "--opencl_staging_bytes=0", "--shutdown_grace_seconds=0",
                       "--idle_timeout_seconds=86400", "--address=127.0.0.1:65535"}));
  EXPECT_EQ(config.scheduler.worker_threads, 1024);
  EXPECT_EQ(config.service.chunk_bytes, 4032);
  EXPECT_EQ(config.service.idle_timeout, absl::Seconds(86400));
}

TEST(ConfigTest, HelpStopsParsing) {
  ASSERT_OK_AND_ASSIGN(const ServerConfig config, ConfigFromFlags({"--help", "--no_such_flag"}));
  EXPECT_TRUE(config.help);
  EXPECT_THAT(ConfigFromFlags({"--no_such_flag", "--help"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag --no_such_flag"));
}

// The names come from the flag definitions, in the order --help has always
// printed them.
TEST(ConfigTest, FlagNamesAreTheDefinitionsInHelpOrder) {
  EXPECT_THAT(
      TensordFlagNames(),
      ElementsAre("address", "worker_threads", "max_message_bytes", "max_request_bytes",
                  "max_tensor_elements", "chunk_bytes", "backend", "max_queued_requests",
                  "shutdown_grace_seconds", "drain_seconds", "request_log", "backends",
                  "opencl_devices", "opencl_queue_depth", "opencl_staging_bytes",
                  "opencl_max_resident_bytes", "auto_opencl_min_bytes", "calibrate",
                  "opencl_unhealthy_seconds", "inject_opencl_failures", "metrics_address",
                  "http_address", "http_keep_alive_seconds", "max_connection_age_seconds",
                  "max_concurrent_streams", "max_connection_idle_seconds", "echo", "tls_cert_file",
                  "tls_key_file", "tls_client_ca_file", "auth_token_file", "reflection",
                  "health_address", "max_memory_bytes", "buffer_pool_bytes", "idle_timeout_seconds",
                  "opencl_max_wait_seconds", "shared_memory_idle_seconds", "shared_memory_remote",
                  "handle_ttl_seconds", "handle_max_ttl_seconds", "max_resident_bytes_per_client",
                  "max_handles_per_client", "max_chain_steps", "advertise_address"));
  const std::string help = FlagsHelp();
  EXPECT_THAT(help, StartsWith("usage: tensord [--flag=value ...]\n\n  --address (default "
                               "0.0.0.0:50051)\n      where to listen (`:0` picks a port;"));
  EXPECT_THAT(help, HasSubstr("  --metrics_address (default 127.0.0.1:9464)\n"));
  // Defaults as a reader says them: whole MiB spelled out, computed ones in words.
  EXPECT_THAT(help, HasSubstr("  --max_message_bytes (default 67108864 (64 MiB))\n"));
  EXPECT_THAT(help, HasSubstr("  --worker_threads (default the number of cores)\n"));
  // Each flag's own entry (a help text may name another flag).
  EXPECT_LT(help.find("\n  --echo (default false)"), help.find("\n  --tls_cert_file (default"));
  EXPECT_THAT(help, HasSubstr("\n  --tls_cert_file\n"));  // no default
  EXPECT_THAT(help, ::testing::EndsWith("  --flagfile=PATH\n      read flags from a file, one "
                                        "`--name=value` per line, `#` comments; may\n      "
                                        "repeat, later flags win (Kubernetes mounts them from a "
                                        "ConfigMap)\n"));
  // No line past 80 columns but a word longer than a line.
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (line.find(' ', 6) != absl::string_view::npos) {
      EXPECT_LE(line.size(), 80u) << line;
    }
  }
}

// docs/flags.md's table, from the same texts: a row a flag, guides as links.
TEST(ConfigTest, MarkdownHelpIsTheFlagsTable) {
  const std::string table = FlagsMarkdown();
  EXPECT_THAT(table, StartsWith("| flag | default | meaning |\n| --- | --- | --- |\n| "
                                "`--address` | `0.0.0.0:50051` | where to listen"));
  EXPECT_THAT(table, HasSubstr("| `--max_message_bytes` | `67108864` (64 MiB) | "));
  EXPECT_THAT(table, HasSubstr("| `--worker_threads` | the number of cores | "));
  EXPECT_THAT(table, HasSubstr("Unix domain socket ([colocated.md](colocated.md))"));
  EXPECT_THAT(table, ::testing::EndsWith("(Kubernetes mounts them from a ConfigMap) |\n"));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), TensordFlagNames().size() + 3);
}

// Handles name no replica for these (server.cc): no client can dial them.
TEST(ConfigTest, WildcardAddressesAreTheUnspecifiedHosts) {
  for (const char* wildcard : {"0.0.0.0:50051", "[::]:50051", "[0:0::0]:1", ":50051"}) {
    EXPECT_TRUE(IsWildcardAddress(wildcard)) << wildcard;
  }
  for (const char* dialable : {"127.0.0.1:50051", "[::1]:50051", "10.0.0.5:50051",
                               "tensord-0.tensord:50051", "unix:/run/tensord.sock"}) {
    EXPECT_FALSE(IsWildcardAddress(dialable)) << dialable;
  }
}

TEST(BackendNameTest, AcceptsTheThreeNamesExactly) {
  EXPECT_EQ(ParseBackendName("auto"), v1::AUTO);
  EXPECT_EQ(ParseBackendName("cpu"), v1::CPU);
  EXPECT_EQ(ParseBackendName("opencl"), v1::OPENCL);
  EXPECT_EQ(ParseBackendName("CPU"), std::nullopt);
  EXPECT_EQ(ParseBackendName("opencl:0"), std::nullopt);
  EXPECT_EQ(ParseBackendName(""), std::nullopt);
  EXPECT_EQ(kBackendNames, "auto, cpu or opencl");
}

// The v2 HTTP API's address.
TEST(InferenceHttpConfig, HttpAddressFlag) {
  absl::StatusOr<ServerConfig> config = ConfigFromFlags({});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->http_address, "0.0.0.0:8000");
  config = ConfigFromFlags({"--http_address="});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->http_address, "");
  EXPECT_THAT(ConfigFromFlags({"--http_address=localhost:99999"}).status().message(),
              ::testing::HasSubstr("--http_address=localhost:99999: the port must be in"));
  EXPECT_THAT(ConfigFromFlags({"--http_address=nohost"}).status().message(),
              ::testing::HasSubstr("--http_address=nohost: expected HOST:PORT"));
  // With TLS the v2 HTTP API serves HTTPS on its address (no longer refused).
  config = ConfigFromFlags({"--tls_cert_file=/x/c.pem", "--tls_key_file=/x/k.pem"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_address, "0.0.0.0:8000");
  EXPECT_EQ(config->security.tls.cert_file, "/x/c.pem");
}

}  // namespace
}  // namespace tensorop::server
