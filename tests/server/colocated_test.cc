// Co-located clients against a real tensord: its Unix domain socket
// (--address=unix:PATH next to TCP), from tensorctl (the public conformance cases).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A private directory for sockets, removed afterwards.
class SocketDir {
 public:
  SocketDir() {
    char dir[] = "/tmp/tensorop-uds-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    dir_ = dir;
  }
  ~SocketDir() { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Address(const std::string& name) const { return "unix://" + Path(name); }

 private:
  std::string dir_;
};

TEST(UnixSocketTest, PublicConformanceCasesPassOverTheSocket) {
  SocketDir dir;
  TensordProcess server({"--address=" + dir.Address("tensord.sock")});
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{}, {"--stream"}, {"--chunked"}}) {
    std::vector<std::string> argv = {TensorctlPath(), "conformance", "--target",
                                     dir.Address("tensord.sock")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(ConformanceCasesDir());
    const CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_THAT(result.out, HasSubstr(" passed, 0 failed"));
    EXPECT_THAT(result.out, Not(HasSubstr(": 0 passed")));
  }
  // TCP still answers beside it.
  const CommandResult tcp = RunCommand({TensorctlPath(), "health", "--target", server.target()});
  EXPECT_EQ(tcp.exit_code, 0) << tcp.out << tcp.err;
  EXPECT_EQ(tcp.out, "SERVING\n");
}

TEST(UnixSocketTest, EveryAddressIsAnnouncedTcpFirst) {
  SocketDir dir;
  const std::string address = dir.Address("a.sock");
  // tensord serves until killed; run it through a shell that reads its first lines.
  const CommandResult result = RunCommand(
      {"/bin/bash", "-c",
       "\"$0\" --address=\"$1\" --address=127.0.0.1:0 --metrics_address= --backends=cpu & "
       "pid=$!; "
       "for i in $(seq 300); do [ -S \"$2\" ] && break; sleep 0.05; done; sleep 0.2; "
       "kill $pid; wait $pid",
       TensordPath(), address, dir.Path("a.sock")});
  EXPECT_THAT(result.out, ::testing::MatchesRegex("tensord listening on 127\\.0\\.0\\.1:[0-9]+\n"
                                                  "tensord listening on " + address + "\n"));
}

TEST(UnixSocketTest, AStaleSocketIsReplaced) {
  SocketDir dir;
  const std::string path = dir.Path("stale.sock");
  // A socket file left behind by a process that died without unlinking it.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  ASSERT_TRUE(std::filesystem::is_socket(path));
  TensordProcess server({"--address=unix:" + path});
  const CommandResult health =
      RunCommand({TensorctlPath(), "health", "--target", "unix:" + path});
  EXPECT_EQ(health.exit_code, 0) << health.out << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

TEST(UnixSocketTest, ABadPathIsAClearStartupError) {
  SocketDir dir;
  const CommandResult missing =
      RunCommand({TensordPath(), "--address=unix:///nonexistent-tensorop-dir/x.sock"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--address=unix:///nonexistent-tensorop-dir/x.sock: the "
                                     "directory /nonexistent-tensorop-dir does not exist"));
  const std::string file = dir.Path("file");
  std::ofstream(file) << "not a socket";
  const CommandResult not_socket = RunCommand({TensordPath(), "--address=unix:" + file});
  EXPECT_EQ(not_socket.exit_code, 2);
  EXPECT_THAT(not_socket.err, HasSubstr("--address=unix:" + file + ": " + file +
                                        " exists and is not a socket"));
  EXPECT_THAT(not_socket.out, Not(HasSubstr("listening")));
  const std::string long_path = "unix:///tmp/" + std::string(120, 'x');
  const CommandResult too_long = RunCommand({TensordPath(), "--address=" + long_path});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("a Unix socket path may have at most 107"));
}

TEST(UnixSocketTest, TlsWorksOverTheSocket) {
  TestPki pki;
  pki.MakeCa("ca", "test ca");
  pki.MakeServerCert("server", "ca");
  SocketDir dir;
  TensordProcess server({"--address=" + dir.Address("tls.sock"),
                         "--tls_cert_file=" + pki.Path("server.crt"),
                         "--tls_key_file=" + pki.Path("server.key")});
  const CommandResult tls = RunCommand({TensorctlPath(), "health", "--target",
                                        dir.Address("tls.sock"), "--ca_file",
                                        pki.Path("ca.crt")});
  EXPECT_EQ(tls.exit_code, 0) << tls.out << tls.err;
  EXPECT_EQ(tls.out, "SERVING\n");
  const CommandResult plain =
      RunCommand({TensorctlPath(), "health", "--target", dir.Address("tls.sock")});
  EXPECT_EQ(plain.exit_code, 1);
}

}  // namespace
}  // namespace tensorop::testing
