// tensorctl's usage as a person meets it: one-line usage errors with a hint
// and "did you mean", each command's help, the default target, a server that
// cannot be reached, a case file tensorctl cannot read; and tensord's own
// usage errors where they share a rule.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::CommandResult;
using ::tensorop::testing::ConformanceCasesDir;
using ::tensorop::testing::RunCommand;
using ::tensorop::testing::TempFiles;
using ::tensorop::testing::TensorctlPath;
using ::tensorop::testing::TensordPath;
using ::tensorop::testing::TensordProcess;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(TensorctlUsageTest, HandleFlagsAreCheckedBeforeAnyCall) {
  const std::string target = "127.0.0.1:1";
  const std::string cases = ConformanceCasesDir();
  for (const auto& [command, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"run", "--handles", "--stream", cases},
            "--stream, --chunked, --shared_memory, --handles and --chain exclude each other"},
           {{"run", "--keep", "--handles", cases},
            "--keep excludes --shared_memory, --handles and --chain"},
           {{"put", "--chain", cases}, "--chain is for run and conformance"},
           {{"conformance", "--keep", cases}, "--keep is for run"},
           {{"put", "--handles", cases}, "--handles is for run and conformance"},
           {{"fetch", "--ttl_seconds", "5", "abc"}, "--ttl_seconds is for put"},
           {{"put", "--ttl_seconds", "-1", cases}, "--ttl_seconds is a number of seconds >= 0"},
           {{"fetch", "--strides", "1,x", "abc"}, "--strides is a comma-separated list"},
           {{"fetch", "a", "b"}, "fetch takes one handle ID"},
           {{"release"}, "release takes one or more handle IDs"},
           {{"handles", "abc"}, "handles takes no arguments"},
           {{"put"}, "no case files given"}}) {
    std::vector<std::string> argv = {TensorctlPath(), command[0], "--target", target};
    argv.insert(argv.end(), command.begin() + 1, command.end());
    const CommandResult result = RunCommand(argv);
    SCOPED_TRACE(absl::StrJoin(argv, " "));
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_THAT(result.err, HasSubstr("tensorctl: " + message));
    EXPECT_EQ(result.out, "");
  }
}

TEST(TensorctlUsageTest, HealthNotServingOrUnreachableExitsOne) {
  TensordProcess cpu_only({"--backends=cpu"});
  const CommandResult opencl = RunCommand(
      {TensorctlPath(), "health", "--target", cpu_only.target(), "--service", "tensorop.opencl"});
  EXPECT_EQ(opencl.exit_code, 1);
  EXPECT_EQ(opencl.out, "NOT_SERVING\n");
  const std::string target = cpu_only.target();
  ASSERT_EQ(cpu_only.Stop(), 0);
  const CommandResult gone = RunCommand({TensorctlPath(), "health", "--target", target});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.out, ::testing::StartsWith("UNAVAILABLE: "));
}

TEST(TensorctlUsageTest, HealthSaysNotServingWhileTheServerDrains) {
  TensordProcess server({"--drain_seconds=3", "--backends=cpu"});
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  CommandResult result;
  for (int i = 0; i < 100; ++i) {
    result = RunCommand({TensorctlPath(), "health", "--target", server.target()});
    if (result.out != "SERVING\n") break;
  }
  // Not UNAVAILABLE: tensorctl health reaches a replica its health excludes.
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "NOT_SERVING\n");
}

TEST(TensorctlUsageTest, MalformedTargetListIsAUsageError) {
  const CommandResult result = RunCommand({TensorctlPath(), "conformance", "--target",
                                           "127.0.0.1:1,replica-b:2", ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensorctl: target entry 1 \"replica-b:2\" is not an IP "
                                    "address with a port"));
  const CommandResult health =
      RunCommand({TensorctlPath(), "health", "--target", "h:1", ConformanceCasesDir()});
  EXPECT_EQ(health.exit_code, 2);
  EXPECT_THAT(health.err, HasSubstr("tensorctl: health takes no case files"));
}

// Without --target, tensorctl asks localhost:50051 (tensord's default port).
TEST(TensorctlUsageTest, TargetDefaultsToLocalhost50051) {
  // Only where the port is free: a tensord listening there too (besides the
  // port TensordProcess picks).
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(probe, 0);
  const int on = 1;
  setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(50051);
  const bool port_free = bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(probe);
  if (!port_free) GTEST_SKIP() << "127.0.0.1:50051 is in use here";
  TensordProcess server({"--address=127.0.0.1:50051", "--backends=cpu"});
  const CommandResult health = RunCommand({TensorctlPath(), "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
  const std::string file = ConformanceCasesDir() + "/split.json";
  const CommandResult run = RunCommand({TensorctlPath(), "run", file});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, RunCommand({TensorctlPath(), "run", "--target", server.target(), file}).out);
}

// A usage error is one line on stderr: what is wrong, the flag or command a
// slip most likely meant, and the --help to read; exit 2, nothing on stdout.
TEST(TensorctlUsageTest, AUsageErrorIsOneLineWithAHint) {
  const std::string cases = ConformanceCasesDir();
  for (const auto& [argv, line] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"run", "--tagret", "127.0.0.1:1", cases},
            "unknown flag --tagret; did you mean --target? (tensorctl run --help)"},
           {{"conformance", "--stram", cases},
            "unknown flag --stram; did you mean --stream? (tensorctl conformance --help)"},
           {{"put", "--shared-memory", cases},
            "unknown flag --shared-memory; did you mean --shared_memory? (tensorctl put --help)"},
           {{"fetch", "-target", "h:1", "abc"},
            "unknown flag -target; did you mean --target? (tensorctl fetch --help)"},
           {{"health", "--servce", "tensorop.cpu"},
            "unknown flag --servce; did you mean --service? (tensorctl health --help)"},
           {{"run", "--frobnicate", cases}, "unknown flag --frobnicate (tensorctl run --help)"},
           {{"conformace", cases},
            "unknown command \"conformace\"; did you mean conformance? (tensorctl --help)"},
           {{"frobnicate"},
            "unknown command \"frobnicate\"; the commands are run, conformance, encode, health, "
            "put, fetch, release, handles, shm-register, shm-unregister or shm-status "
            "(tensorctl --help)"},
           {{},
            "the first word is a command: run, conformance, encode, health, put, fetch, release, "
            "handles, shm-register, shm-unregister or shm-status (tensorctl --help)"},
           {{"run", "--keep", "--chain", cases},
            "--keep excludes --shared_memory, --handles and --chain (tensorctl run --help)"},
           {{"encode", cases + "/slice.json"},
            "encode needs --case NAME (tensorctl encode --help)"}}) {
    std::vector<std::string> command = {TensorctlPath()};
    command.insert(command.end(), argv.begin(), argv.end());
    const CommandResult result = RunCommand(command);
    SCOPED_TRACE(absl::StrJoin(command, " "));
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "tensorctl: " + line + "\n");
    EXPECT_EQ(result.out, "");
  }
}

// tensorctl COMMAND --help (or tensorctl help COMMAND): that command's usage
// on stdout, exit 0: its synopsis, what it does, each of its flags, an example.
TEST(TensorctlUsageTest, EachCommandHasItsOwnHelp) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"run",
       {"--target ADDR", "--backend B", "--stream", "--chunked", "--shared_memory", "--handles",
        "--chain", "--keep", "--tls", "--token_file FILE"}},
      {"conformance", {"--target ADDR", "--backend B", "--stream", "--chain", "--ca_file PEM"}},
      {"encode", {"--case NAME", "--backend B"}},
      {"health", {"--target ADDR", "--service NAME", "--cert_file PEM", "--key_file PEM"}},
      {"put", {"--target ADDR", "--backend B", "--ttl_seconds N"}},
      {"fetch", {"--target ADDR", "--strides S,S,..."}},
      {"release", {"--target ADDR"}},
      {"handles", {"--target ADDR"}},
      {"shm-register", {"--target ADDR", "--region NAME", "--key KEY", "--byte_size N"}},
      {"shm-unregister", {"--target ADDR", "--region NAME"}},
      {"shm-status", {"--target ADDR", "--region NAME"}}};
  for (const auto& [command, flags] : commands) {
    SCOPED_TRACE(command);
    const CommandResult result = RunCommand({TensorctlPath(), command, "--help"});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_EQ(result.err, "");
    EXPECT_THAT(result.out, ::testing::StartsWith("usage: tensorctl " + command + " "));
    EXPECT_THAT(result.out, HasSubstr("\nflags:\n"));
    EXPECT_THAT(result.out, HasSubstr("\nexample:\n  tensorctl " + command + " "));
    for (const std::string& flag : flags) EXPECT_THAT(result.out, HasSubstr("\n  " + flag + " "));
    // Not the global usage, and the same text however asked for.
    EXPECT_THAT(result.out, Not(HasSubstr("tensorctl --version")));
    EXPECT_EQ(RunCommand({TensorctlPath(), "help", command}).out, result.out);
    EXPECT_EQ(RunCommand({TensorctlPath(), command, "-h", "x.json"}).out, result.out);
  }
  const CommandResult run = RunCommand({TensorctlPath(), "run", "--help"});
  EXPECT_THAT(run.out, HasSubstr("\n  --target ADDR        the server (default localhost:50051)"));
  EXPECT_THAT(run.out, HasSubstr("\nexample:\n  tensorctl run --target localhost:50051 "));
  // Encode does not connect: no target, no security flags.
  const CommandResult encode = RunCommand({TensorctlPath(), "encode", "--help"});
  EXPECT_THAT(encode.out, Not(HasSubstr("--target")));
  EXPECT_THAT(encode.out, Not(HasSubstr("--tls")));
}

// The same names as tensord's --backend (proto/backend_name.h).
TEST(TensorctlUsageTest, UnknownBackendIsAUsageError) {
  for (const std::string backend : {"gpu", "CPU", "opencl:0", ""}) {
    const CommandResult result = RunCommand({TensorctlPath(), "run", "--target", "127.0.0.1:1",
                                             "--backend", backend, ConformanceCasesDir()});
    EXPECT_EQ(result.exit_code, 2) << backend;
    EXPECT_THAT(result.err,
                HasSubstr("tensorctl: --backend is auto, cpu or opencl, not \"" + backend + "\""));
  }
  const CommandResult tensord = RunCommand({::tensorop::testing::TensordPath(), "--backend=gpu"});
  EXPECT_EQ(tensord.exit_code, 2);
  EXPECT_THAT(tensord.err, HasSubstr("tensord: --backend=gpu: expected auto, cpu or opencl"));
}

// A loopback port bound but never listening: connections to it are refused.
class RefusedPort {
 public:
  RefusedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot bind a loopback port";
    }
    target_ = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  }
  ~RefusedPort() { close(fd_); }
  const std::string& target() const { return target_; }

 private:
  int fd_ = -1;
  std::string target_;
};

// A server that cannot be reached is one line on stderr, "tensorctl: cannot
// connect to ADDR: " and gRPC's reason, and exit 1, for every command that
// connects (health keeps its own answer, above): no line per case, no
// failures counted.
TEST(TensorctlUsageTest, AnUnreachableServerIsOneLineAndExitOne) {
  RefusedPort refused;
  const std::string cases = ConformanceCasesDir();
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"run", cases + "/split.json"},
                                             {"run", "--stream", cases},
                                             {"conformance", cases},
                                             {"conformance", "--handles", cases},
                                             {"put", cases + "/slice.json"},
                                             {"fetch", "0123456789abcdef0123456789abcdef"},
                                             {"release", "0123456789abcdef0123456789abcdef"},
                                             {"handles"},
                                             {"shm-status"},
                                             {"shm-unregister", "--region", "r"}}) {
    std::vector<std::string> command = {TensorctlPath(), argv[0], "--target", refused.target()};
    command.insert(command.end(), argv.begin() + 1, argv.end());
    const CommandResult result = RunCommand(command);
    SCOPED_TRACE(absl::StrJoin(command, " "));
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_THAT(result.err,
                ::testing::StartsWith("tensorctl: cannot connect to " + refused.target() + ": "));
    EXPECT_THAT(result.err, HasSubstr("Connection refused"));
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  // A Unix socket that is not there, likewise.
  const CommandResult unix_socket = RunCommand(
      {TensorctlPath(), "conformance", "--target", "unix:///nonexistent/tensord.sock", cases});
  EXPECT_EQ(unix_socket.exit_code, 1);
  EXPECT_EQ(unix_socket.out, "");
  EXPECT_THAT(
      unix_socket.err,
      ::testing::StartsWith("tensorctl: cannot connect to unix:///nonexistent/tensord.sock: "));
}

// A server that accepts connections and never answers: the first contact
// gives up at the connect deadline, in one line, not at each call's.
TEST(TensorctlUsageTest, AServerThatNeverAnswersIsOneLineAtTheConnectDeadline) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 16), 0);  // the kernel completes handshakes; nobody speaks HTTP/2
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string target = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  const CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target", target, ConformanceCasesDir()});
  close(fd);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "tensorctl: cannot connect to " + target + ": no answer within 5s\n");
}

// What tensorctl itself cannot read is told on stderr as its own error, not
// printed as a server's answer: a case without a name (run, put, encode), a
// case file that is not JSON or not there. No server is asked.
TEST(TensorctlUsageTest, ACaseTensorctlCannotReadIsItsOwnErrorOnStderr) {
  TempFiles files;
  const std::string nameless = files.Write(
      R"({"op": "split", "attrs": {"axis": 0},
    "inputs": {"input": {"dtype": "int32", "sizes": [2], "data": [1, 2]}},
    "outputs": [{"sizes": [2]}], "expect": {"error": "INVALID_ARGUMENT"}})",
      "tensorctl-nameless", ".json");
  RefusedPort refused;  // never asked: every case is unreadable
  for (const char* command : {"run", "put"}) {
    const CommandResult result =
        RunCommand({TensorctlPath(), command, "--target", refused.target(), nameless});
    SCOPED_TRACE(command);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "tensorctl: " + nameless + ": case #0: missing field \"name\"\n");
  }
  const CommandResult encode = RunCommand({TensorctlPath(), "encode", nameless, "--case", "#0"});
  EXPECT_EQ(encode.exit_code, 1);
  EXPECT_EQ(encode.out, "");
  EXPECT_EQ(encode.err, "tensorctl: " + nameless + ": case #0: missing field \"name\"\n");

  const std::string broken = files.Write("[{\"name\": \"x\"", "tensorctl-broken", ".json");
  const CommandResult not_json = RunCommand({TensorctlPath(), "run", broken});
  EXPECT_EQ(not_json.exit_code, 2);
  EXPECT_EQ(not_json.out, "");
  EXPECT_THAT(not_json.err, ::testing::StartsWith("tensorctl: " + broken + ": "));
  EXPECT_THAT(not_json.err, HasSubstr("parse error"));
  const CommandResult missing = RunCommand({TensorctlPath(), "run", "/nonexistent/cases.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "tensorctl: /nonexistent/cases.json: No such file or directory\n");
}

}  // namespace
}  // namespace tensorop::client
