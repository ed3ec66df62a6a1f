// Hostile clients against a real tensord on loopback, one test per attack
// (RELIABILITY.md, "Attacks (work, flags, metrics)"): each asserts the status
// the attacker gets and that the server still answers a normal request within
// a second during and after the attack.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;

// A normal request on a fresh connection, with a deadline of one second.
grpc::Status NormalRequest(const TensordProcess& server, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::RunResponse response;
  grpc::Status status = v1::TensorOp::NewStub(Connect(server.target()))
                            ->Run(&context, DocSliceRequest(id), &response);
  if (status.ok() && response.outputs_size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "no output");
  }
  return status;
}

// GET /metrics; the HTTP status, or -1 when there was no answer.
int ScrapeStatus(const TensordProcess& server, std::string* body = nullptr) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  client.set_connection_timeout(2);
  client.set_read_timeout(2);
  httplib::Result result = client.Get("/metrics");
  if (!result) return -1;
  if (body != nullptr) *body = result->body;
  return result->status;
}

int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// How many of `fds` the peer closed within `wait` in all (watched together).
size_t ClosedByPeerWithin(const std::vector<int>& fds, std::chrono::milliseconds wait) {
  std::vector<bool> closed(fds.size(), false);
  size_t count = 0;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (count < fds.size() && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> polled;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (closed[i]) continue;
      polled.push_back(pollfd{fds[i], POLLIN, 0});
      which.push_back(i);
    }
    if (poll(polled.data(), polled.size(), 100) <= 0) continue;
    for (size_t j = 0; j < polled.size(); ++j) {
      if (polled[j].revents == 0) continue;
      char byte;
      const ssize_t got = recv(polled[j].fd, &byte, 1, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        closed[which[j]] = true;
        ++count;
      }
    }
  }
  return count;
}

// The server's peak resident memory (VmHWM), in bytes.
int64_t PeakRssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// The JSON log line containing every needle, parsed.
nlohmann::json LogLine(const TensordProcess& server, const std::vector<std::string>& needles) {
  const std::string line = AwaitLogLine(server, needles);
  if (line.empty()) return nlohmann::json();
  return nlohmann::json::parse(line);
}

// Row: 261 idle connections to /metrics while a gRPC client connects, with the
// descriptors limited (here 256 for the whole process): the metrics server
// keeps at most 64 waiting and closes idle ones after 2 s, so gRPC keeps
// accepting and scrapes keep working.
TEST(HostileWorkTest, IdleMetricsConnectionsLeaveDescriptorsForGrpc) {
  TensordProcess server({"--backends=cpu"}, /*max_open_files=*/256);
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectTcp(server.metrics_port());
    if (fd >= 0) idle.push_back(fd);
  }
  ASSERT_GE(idle.size(), 261u);
  EXPECT_THAT(NormalRequest(server, "during-idle"), GrpcOk());
  EXPECT_EQ(ScrapeStatus(server), 200);
  // The oldest were evicted at once; the rest are closed within the 2 s
  // request deadline.
  EXPECT_EQ(ClosedByPeerWithin(idle, std::chrono::milliseconds(8000)), idle.size());
  for (int fd : idle) close(fd);
  EXPECT_THAT(NormalRequest(server, "after-idle"), GrpcOk());
  EXPECT_EQ(ScrapeStatus(server), 200);
  EXPECT_THAT(server.Log(), ::testing::Not(HasSubstr("Failed accept4")));
}

// Row: connections trickling a byte at a time to /metrics: each is cut 2 s
// after it connected, and scrapes meanwhile are answered.
TEST(HostileWorkTest, TricklingMetricsConnectionsDoNotStarveScrapes) {
  TensordProcess server({"--backends=cpu"});
  std::vector<int> tricklers;
  for (int i = 0; i < 16; ++i) {
    const int fd = ConnectTcp(server.metrics_port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, "G", 1, MSG_NOSIGNAL), 1);
    tricklers.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    std::string body;
    EXPECT_EQ(ScrapeStatus(server, &body), 200) << "round " << round;
    EXPECT_THAT(body, HasSubstr("tensorop_queue_depth"));
    EXPECT_THAT(NormalRequest(server, "during-trickle"), GrpcOk());
    for (int fd : tricklers) send(fd, "E", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_EQ(ClosedByPeerWithin(tricklers, std::chrono::milliseconds(4000)), tricklers.size());
  for (int fd : tricklers) close(fd);
  EXPECT_EQ(ScrapeStatus(server), 200);
  EXPECT_THAT(NormalRequest(server, "after-trickle"), GrpcOk());
}

// Row: a Slice with 100 k input-map entries and an invalid backend, 6 at once:
// INVALID_ARGUMENT naming the backend, no formatting inside the reaction, and
// a log line of bounded length.
TEST(HostileWorkTest, HundredThousandInputsWithAnInvalidBackendAreCheap) {
  TensordProcess server({"--backends=cpu"});
  v1::RunRequest request = DocSliceRequest("many-inputs");
  for (int i = 0; i < 100000; ++i) {
    (*request.mutable_inputs())["x" + std::to_string(i)] = MakeTensor(v1::UINT8, {1}, "a");
  }
  request.set_backend(static_cast<v1::Backend>(99));
  std::vector<std::future<grpc::Status>> attacks;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) {
    attacks.push_back(std::async(std::launch::async, [&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      v1::RunResponse response;
      return v1::TensorOp::NewStub(Connect(server.target()))->Run(&context, request, &response);
    }));
  }
  EXPECT_THAT(NormalRequest(server, "during-inputs"), GrpcOk());
  for (auto& attack : attacks) {
    EXPECT_THAT(attack.get(),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "backend: 99 is not a backend"));
  }
  std::cout << "figure: 6 requests of 100k inputs answered in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms\n";
  EXPECT_THAT(NormalRequest(server, "after-inputs"), GrpcOk());
  const std::string line = AwaitLogLine(server, {"\"id\":\"many-inputs\""});
  ASSERT_FALSE(line.empty());
  EXPECT_LT(line.size(), 4096u) << line.substr(0, 4096);
  std::cout << "figure: log line " << line.size() << " bytes, peak RSS "
            << PeakRssBytes(server.pid()) / (1 << 20) << " MiB\n";
  const nlohmann::json json = nlohmann::json::parse(line);
  EXPECT_EQ(json["status"], "INVALID_ARGUMENT");
  EXPECT_EQ(json["sizes"]["..."], "(100001 inputs)");
  EXPECT_EQ(json["bytes_in"], 100000 + 64);
  EXPECT_LT(PeakRssBytes(server.pid()), int64_t{1} << 30);
}

// ScatterElements over [2^32-1] stride-0 indices and updates (84 bytes on the
// wire), every update colliding on input[0].
v1::RunRequest HugeScatterRequest(const std::string& id) {
  constexpr int64_t kCount = (int64_t{1} << 32) - 1;
  v1::RunRequest request;
  request.set_id(id);
  request.mutable_scatter_elements()->set_axis(0);
  request.set_backend(v1::CPU);
  (*request.mutable_inputs())["input"] = MakeTensor(v1::FLOAT32, {1}, Pack<float>({0.0f}));
  (*request.mutable_inputs())["indices"] = MakeTensor(v1::INT32, {kCount}, Pack<int32_t>({0}), {0});
  (*request.mutable_inputs())["updates"] =
      MakeTensor(v1::FLOAT32, {kCount}, Pack<float>({1.0f}), {0});
  return request;
}

// Row: that scatter with a 2 s deadline: DEADLINE_EXCEEDED, and the work (index
// validation, then the walk) ends within a fraction of a second after it.
TEST(HostileWorkTest, HugeStrideZeroScatterStopsAtItsDeadline) {
  TensordProcess server({"--backends=cpu", "--worker_threads=2"});
  auto attack = [&](const std::string& id) {
    return std::async(std::launch::async, [&server, id] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1::RunResponse response;
      return v1::TensorOp::NewStub(Connect(server.target()))
          ->Run(&context, HugeScatterRequest(id), &response);
    });
  };
  auto first = attack("scatter-1");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_THAT(NormalRequest(server, "during-scatter"), GrpcOk());
  auto second = attack("scatter-2");
  EXPECT_THAT(first.get(), GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED, ::testing::_));
  EXPECT_THAT(second.get(), GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED, ::testing::_));
  for (const std::string id : {"scatter-1", "scatter-2"}) {
    const nlohmann::json json = LogLine(server, {"\"id\":\"" + id + "\""});
    ASSERT_TRUE(json.is_object()) << server.Log();
    EXPECT_EQ(json["status"], "DEADLINE_EXCEEDED");
    EXPECT_THAT(json["message"].get<std::string>(), HasSubstr("deadline exceeded"));
    // 2 s of deadline plus at most a second to notice and answer.
    EXPECT_LT(json["latency_us"].get<int64_t>(), 3'000'000) << json.dump();
    std::cout << "figure: " << id << " latency_us " << json["latency_us"] << "\n";
  }
  // Both workers are free again at once.
  EXPECT_THAT(NormalRequest(server, "after-scatter"), GrpcOk());
  EXPECT_LT(PeakRssBytes(server.pid()), int64_t{1} << 30);
}

// Row (second half): SIGTERM while that scatter runs with a long deadline: the
// grace period (1 s) ends it; the process exits 0 by itself, before the
// forced exit (grace + 5 s, status 1) would.
TEST(HostileWorkTest, ShutdownGraceBoundsAHugeScatter) {
  TensordProcess server({"--backends=cpu", "--worker_threads=2", "--shutdown_grace_seconds=1"});
  auto attack = std::async(std::launch::async, [&server] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    v1::RunResponse response;
    return v1::TensorOp::NewStub(Connect(server.target()))
        ->Run(&context, HugeScatterRequest("scatter-term"), &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_THAT(NormalRequest(server, "before-term"), GrpcOk());
  const auto start = std::chrono::steady_clock::now();
  const int status = server.Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(took, std::chrono::seconds(5));
  std::cout << "figure: exit after SIGTERM with grace 1 s: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  const grpc::Status attacked = attack.get();
  EXPECT_FALSE(attacked.ok());
  EXPECT_THAT(attacked.error_code(),
              ::testing::AnyOf(grpc::StatusCode::CANCELLED, grpc::StatusCode::UNAVAILABLE));
}

// Row: flags that once gave a server that never answers or listens elsewhere.
TEST(HostileWorkTest, AbsurdWorkerThreadsAndPortAreUsageErrors) {
  CommandResult result = RunCommand({TensordPath(), "--worker_threads=2147483647"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--worker_threads=2147483647 must be in [1, 1024]"));
  result = RunCommand({TensordPath(), "--address=127.0.0.1:99999"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--address=127.0.0.1:99999: the port must be in [0, 65535]"));
}

}  // namespace
}  // namespace tensorop::testing
