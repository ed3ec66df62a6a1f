// Co-located clients against a real tensord: its Unix domain socket
// (--address=unix:PATH next to TCP) and shared memory regions in /dev/shm,
// from tensorctl (the public conformance cases) and the C++ client.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/shared_memory.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/status_matchers.h"
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

std::string ProcMaps(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
  // tensord serves until killed: a shell waits (bounded) for its two lines, then stops it.
  const CommandResult result = RunCommand(
      {"/bin/bash", "-c",
       "\"$0\" --address=\"$1\" --address=127.0.0.1:0 --metrics_address= --http_address= "
       "--backends=cpu "
       ">\"$2\" & pid=$!; "
       "for i in $(seq 600); do [ \"$(wc -l <\"$2\")\" -ge 2 ] && break; sleep 0.05; done; "
       "kill $pid; wait $pid; cat \"$2\"",
       TensordPath(), address, dir.Path("out")});
  EXPECT_THAT(result.out, ::testing::MatchesRegex("tensord listening on 127\\.0\\.0\\.1:[0-9]+\n"
                                                  "tensord listening on " +
                                                  address + "\n"));
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
  const CommandResult health = RunCommand({TensorctlPath(), "health", "--target", "unix:" + path});
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
  EXPECT_THAT(not_socket.err,
              HasSubstr("--address=unix:" + file + ": " + file + " exists and is not a socket"));
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
                                        dir.Address("tls.sock"), "--ca_file", pki.Path("ca.crt")});
  EXPECT_EQ(tls.exit_code, 0) << tls.out << tls.err;
  EXPECT_EQ(tls.out, "SERVING\n");
  const CommandResult plain =
      RunCommand({TensorctlPath(), "health", "--target", dir.Address("tls.sock")});
  EXPECT_EQ(plain.exit_code, 1);
}

TEST(SharedMemoryIntegrationTest, PublicConformanceCasesPassThroughRegions) {
  SocketDir dir;
  // No staging reserved at startup: the budget then counts what calls hold.
  TensordProcess server({"--address=" + dir.Address("tensord.sock"), "--opencl_staging_bytes=0"});
  for (const std::string& target : {dir.Address("tensord.sock"), server.target()}) {
    const CommandResult result = RunCommand({TensorctlPath(), "conformance", "--target", target,
                                             "--shared_memory", ConformanceCasesDir()});
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_THAT(result.out, HasSubstr(" passed, 0 failed"));
  }
  // Every region was unregistered after its case.
  EXPECT_EQ(MetricValue(server, "tensorop_shared_memory_regions"), 0);
  EXPECT_EQ(MetricValue(server, "tensorop_shared_memory_mapped_bytes"), 0);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// A region of int32s 0..n-1 at offset 0, then bytes 0xAB.
class SharedMemoryRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = client::SharedMemoryRegion::Create(
        absl::StrCat("tensorop-test-", getpid(), "-", ++counter_), 4096);
    ASSERT_TRUE(created.ok()) << created.status();
    region_ = *std::move(created);
    std::memset(region_->bytes().data(), 0xAB, region_->bytes().size());
    for (int32_t i = 0; i < 16; ++i) {
      std::memcpy(region_->bytes().data() + 4 * i, &i, 4);
    }
  }
  int32_t At(int64_t byte_offset) const {
    int32_t value;
    std::memcpy(&value, region_->bytes().data() + byte_offset, 4);
    return value;
  }
  // A 4x4 int32 input from the region (offset 0), sliced [1:3, 0:4:2] into a
  // 2x2 output.
  v1::RunRequest Slice() const {
    v1::RunRequest request;
    request.set_id("shm");
    auto* slice = request.mutable_slice();
    for (int64_t v : {1, 0}) slice->add_offsets(v);
    for (int64_t v : {2, 4}) slice->add_window_sizes(v);
    for (int64_t v : {1, 2}) slice->add_window_strides(v);
    v1::Tensor& input = (*request.mutable_inputs())["input"];
    input.set_dtype(v1::INT32);
    input.add_sizes(4);
    input.add_sizes(4);
    input.mutable_shared_memory()->set_region("fixture");
    input.mutable_shared_memory()->set_offset(0);
    input.mutable_shared_memory()->set_byte_length(64);
    v1::OutputDesc* output = request.add_outputs();
    output->add_sizes(2);
    output->add_sizes(2);
    return request;
  }

  SocketDir dir_;
  std::unique_ptr<client::SharedMemoryRegion> region_;
  static inline int counter_ = 0;
};

TEST_F(SharedMemoryRegionTest, StridedPaddedOutputIsWrittenIntoTheRegion) {
  TensordProcess server({"--address=" + dir_.Address("s.sock"), "--opencl_staging_bytes=0"});
  client::Client client(dir_.Address("s.sock"));
  ASSERT_OK(client.RegisterSharedMemory("fixture", "/" + region_->key()).status());
  v1::RunRequest request = Slice();
  v1::OutputDesc* output = request.mutable_outputs(0);
  output->add_strides(3);  // padded: one element between rows
  output->add_strides(1);
  output->mutable_shared_memory()->set_region("fixture");
  output->mutable_shared_memory()->set_offset(256);
  output->mutable_shared_memory()->set_byte_length(64);
  ASSERT_OK_AND_ASSIGN(client::Result result, client.Run(request));
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0].sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(result.outputs[0].strides, (std::vector<int64_t>{3, 1}));
  EXPECT_TRUE(result.outputs[0].data.empty());
  // input[1][0], input[1][2], (padding), input[2][0], input[2][2]
  EXPECT_EQ(At(256), 4);
  EXPECT_EQ(At(260), 6);
  EXPECT_EQ(At(264), 0);
  EXPECT_EQ(At(268), 8);
  EXPECT_EQ(At(272), 10);
  // Past the output's extent (5 elements) the region is untouched.
  EXPECT_EQ(static_cast<uint8_t>(region_->bytes()[276]), 0xAB);
  EXPECT_EQ(static_cast<uint8_t>(region_->bytes()[255]), 0xAB);
  // The same through RunBidi.
  request.mutable_outputs(0)->mutable_shared_memory()->set_offset(512);
  std::vector<absl::StatusOr<client::Result>> bidi = client.RunBidi({request});
  ASSERT_TRUE(bidi[0].ok()) << bidi[0].status();
  EXPECT_EQ(At(512 + 12), 8);
  // Streamed results carry their bytes: an output in a region is refused.
  EXPECT_THAT(client.RunStream(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: a streamed call streams its results "
                                 "back")));
  ASSERT_OK(client.UnregisterSharedMemory("fixture"));
}

TEST_F(SharedMemoryRegionTest, BadReferencesNameTheRegion) {
  TensordProcess server({"--address=" + dir_.Address("s.sock"), "--opencl_staging_bytes=0"});
  client::Client client(dir_.Address("s.sock"));
  ASSERT_OK(client.RegisterSharedMemory("fixture", region_->key(), 1024).status());
  v1::RunRequest outside = Slice();
  (*outside.mutable_inputs())["input"].mutable_shared_memory()->set_offset(1000);
  EXPECT_THAT(client.Run(outside).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("inputs[\"input\"].shared_memory: offset 1000 + 64 bytes passes "
                                 "the end of region \"fixture\" (1024 bytes)")));
  v1::RunRequest small = Slice();
  auto* ref = small.mutable_outputs(0)->mutable_shared_memory();
  ref->set_region("fixture");
  ref->set_offset(1012);
  ref->set_byte_length(16);
  EXPECT_THAT(client.Run(small).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("outputs[0].shared_memory: offset 1012 + 16 bytes passes the "
                                 "end of region \"fixture\" (1024 bytes)")));
  v1::RunRequest unknown = Slice();
  (*unknown.mutable_inputs())["input"].mutable_shared_memory()->set_region("ghost");
  EXPECT_THAT(client.Run(unknown).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("inputs[\"input\"].shared_memory: shared memory region \"ghost\" "
                                 "is not registered")));
  EXPECT_THAT(client.RegisterSharedMemory("r2", "../../etc/passwd").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("key: \"../../etc/passwd\" is not a shared memory key")));
  EXPECT_THAT(client.RegisterSharedMemory("bad/name", region_->key()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("region: \"bad/name\" is not a region name")));
  EXPECT_THAT(client.RegisterSharedMemory("r3", "tensorop-no-such-object").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot open shared memory object \"tensorop-no-such-object\"")));
  EXPECT_THAT(client.UnregisterSharedMemory("ghost"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("shared memory region \"ghost\" is not registered")));
  // Mapped bytes count against the memory budget.
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 1024), 1024);
  ASSERT_OK(client.UnregisterSharedMemory("fixture"));
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

TEST_F(SharedMemoryRegionTest, RegionsPastTheMemoryBudgetAreRefused) {
  TensordProcess server({"--max_memory_bytes=2048", "--opencl_staging_bytes=0"});
  client::Client client(server.target());
  EXPECT_THAT(client.RegisterSharedMemory("fixture", region_->key()).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_memory_bytes")));
}

TEST_F(SharedMemoryRegionTest, AClientThatDiedLeavesNoMappingBehind) {
  TensordProcess server({"--shared_memory_idle_seconds=1", "--opencl_staging_bytes=0"});
  // Another process registers the region and is gone without unregistering it.
  const CommandResult registered =
      RunCommand({TensorctlPath(), "shm-register", "--target", server.target(), "--region",
                  "orphan", "--key", region_->key()});
  ASSERT_EQ(registered.exit_code, 0) << registered.out << registered.err;
  EXPECT_EQ(registered.out, "registered orphan: key " + region_->key() + ", 4096 bytes\n");
  EXPECT_THAT(ProcMaps(server.pid()), HasSubstr("/dev/shm/" + region_->key()));
  EXPECT_EQ(MetricValue(server, "tensorop_shared_memory_mapped_bytes"), 4096);
  // Unused, its lease runs out; wait for that (bounded), no timing assertion.
  client::Client client(server.target());
  for (int i = 0; i < 300; ++i) {
    auto status = client.SharedMemoryStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    if (status->regions_size() == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_OK_AND_ASSIGN(v1::SharedMemoryStatusResponse status, client.SharedMemoryStatus());
  EXPECT_EQ(status.regions_size(), 0);
  EXPECT_EQ(status.mapped_bytes(), 0);
  EXPECT_THAT(ProcMaps(server.pid()), Not(HasSubstr("/dev/shm/" + region_->key())));
  EXPECT_EQ(MetricValue(server, "tensorop_shared_memory_expired_total"), 1);
  EXPECT_EQ(MetricValue(server, "tensorop_memory_reserved_bytes"), 0);
}

}  // namespace
}  // namespace tensorop::testing
