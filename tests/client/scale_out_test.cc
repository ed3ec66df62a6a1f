// Scale-out through one client: three real tensord replicas on loopback behind
// one target list. Requests go round-robin to every replica, and when replicas
// go away mid-run (one killed, one drained by SIGTERM as Kubernetes does on a
// rolling update) the client's retry policy resends what they dropped: no
// request is lost and every answer is the right one.
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::TensordProcess;
using ::testing::IsEmpty;

constexpr int kReplicas = 3;
constexpr int kClientThreads = 4;
constexpr int kInputBytes = 64;
constexpr int kWindowBytes = 4;

// Slice of 4 bytes at `offset` out of the bytes 0..63: the answer is
// {offset, offset+1, offset+2, offset+3}, so each answer shows which request
// it belongs to.
v1::RunRequest SliceAt(int offset) {
  v1::RunRequest request;
  request.set_id(absl::StrCat("slice-at-", offset));
  request.set_backend(v1::CPU);
  v1::SliceAttrs* slice = request.mutable_slice();
  slice->add_offsets(offset);
  slice->add_window_sizes(kWindowBytes);
  slice->add_window_strides(1);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(kInputBytes);
  std::string data(kInputBytes, '\0');
  for (int i = 0; i < kInputBytes; ++i) data[i] = static_cast<char>(i);
  input.set_data(data);
  request.add_outputs()->add_sizes(kWindowBytes);
  return request;
}

std::string ExpectedWindow(int offset) {
  std::string bytes;
  for (int i = 0; i < kWindowBytes; ++i) bytes.push_back(static_cast<char>(offset + i));
  return bytes;
}

// Run calls a replica answered OK, from its /metrics (tensorop_requests_total).
// The counter moves just after the answer is sent, so wait (bounded) until it
// reaches `at_least`; the value is returned either way.
int64_t RunsServed(const TensordProcess& replica, int64_t at_least = 0) {
  int64_t served = 0;
  for (int attempt = 0; attempt < 500; ++attempt) {
    httplib::Client http("127.0.0.1", replica.metrics_port());
    httplib::Result scrape = http.Get("/metrics");
    served = 0;
    if (scrape && scrape->status == 200) {
      for (absl::string_view line : absl::StrSplit(scrape->body, '\n')) {
        if (!absl::StartsWith(line, "tensorop_requests_total{method=\"Run\"") ||
            !absl::StrContains(line, "code=\"OK\"")) {
          continue;
        }
        int64_t count = 0;
        if (absl::SimpleAtoi(line.substr(line.rfind(' ') + 1), &count)) served += count;
      }
    }
    if (served >= at_least) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return served;
}

// Requests from kClientThreads threads through one client, sent back to back
// until Finish(); every answer is checked against its request.
class BackgroundLoad {
 public:
  explicit BackgroundLoad(Client& client) : client_(client) {
    for (int t = 0; t < kClientThreads; ++t) workers_.emplace_back([this] { Work(); });
  }
  ~BackgroundLoad() { Finish(); }

  int answered() const { return answered_; }

  // Blocks until `count` requests have been answered (or 60 s have passed).
  void WaitUntilAnswered(int count) const {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (answered_ < count && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Stops sending, waits for the answers in flight, and returns what failed or
  // came back wrong, one line per request.
  std::vector<std::string> Finish() {
    stop_ = true;
    for (std::thread& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_;
  }

 private:
  void Work() {
    while (!stop_) {
      const int i = next_++;
      const int offset = i % (kInputBytes - kWindowBytes);
      absl::StatusOr<Result> result = client_.Run(SliceAt(offset));
      if (!result.ok()) {
        Fail(absl::StrCat("request ", i, ": ", result.status().ToString()));
      } else if (result->outputs.size() != 1 || result->outputs[0].data != ExpectedWindow(offset)) {
        Fail(absl::StrCat("request ", i, ": wrong answer"));
      }
      ++answered_;
    }
  }
  void Fail(std::string failure) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.push_back(std::move(failure));
  }

  Client& client_;
  std::atomic<bool> stop_{false};
  std::atomic<int> next_{0};
  std::atomic<int> answered_{0};
  std::mutex mutex_;
  std::vector<std::string> failures_;
  std::vector<std::thread> workers_;
};

class ScaleOutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> addresses;
    for (int i = 0; i < kReplicas; ++i) {
      replicas_.push_back(std::make_unique<TensordProcess>(std::vector<std::string>{
          "--backends=cpu", "--shutdown_grace_seconds=10", "--drain_seconds=1"}));
      addresses.push_back(replicas_.back()->target());
    }
    target_ = absl::StrJoin(addresses, ",");
  }

  // One client for all replicas, as a user would make it.
  Client MakeClient() const {
    ClientOptions options;
    options.deadline = absl::Seconds(30);
    return Client(target_, options);
  }

  std::vector<std::unique_ptr<TensordProcess>> replicas_;
  std::string target_;  // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
};

TEST_F(ScaleOutTest, EveryReplicaServesRequestsOfOneClient) {
  Client client = MakeClient();
  BackgroundLoad load(client);
  load.WaitUntilAnswered(300);
  EXPECT_THAT(load.Finish(), IsEmpty());

  int64_t total = 0;
  for (int i = 0; i < kReplicas; ++i) {
    const int64_t served = RunsServed(*replicas_[i], 1);
    EXPECT_GT(served, 0) << "replica " << i << " (" << replicas_[i]->target()
                         << ") served no request";
    total += served;
  }
  // Nothing failed, so nothing was retried: each request was served exactly once.
  EXPECT_EQ(total, load.answered());
}

TEST_F(ScaleOutTest, NoRequestIsLostWhenReplicasDieMidRun) {
  Client client = MakeClient();
  BackgroundLoad load(client);
  // Until every replica has answered, so each one leaving below takes a share
  // of the load with it.
  load.WaitUntilAnswered(100);
  for (int i = 0; i < kReplicas; ++i) ASSERT_GT(RunsServed(*replicas_[i], 1), 0) << i;

  // Replica 1 dies at once (SIGKILL: calls in flight on it break).
  const int64_t killed_had_served = RunsServed(*replicas_[1]);
  replicas_[1]->Kill();
  load.WaitUntilAnswered(load.answered() + 500);
  // Replica 2 is stopped the way Kubernetes stops a pod (SIGTERM: it reports
  // NOT_SERVING, drains, then finishes the calls in flight), under load.
  const int answered_before_drain = load.answered();
  const int drained_exit = replicas_[2]->Stop();
  const int answered_during_drain = load.answered() - answered_before_drain;
  const int64_t survivor_before_tail = RunsServed(*replicas_[0]);
  load.WaitUntilAnswered(load.answered() + 500);
  const std::vector<std::string> failures = load.Finish();

  EXPECT_THAT(failures, IsEmpty())
      << failures.size() << " of " << load.answered() << " requests lost";
  EXPECT_GT(killed_had_served, 0);
  EXPECT_GT(answered_during_drain, 0) << "the load stopped while replica 2 drained";
  EXPECT_TRUE(WIFEXITED(drained_exit) && WEXITSTATUS(drained_exit) == 0)
      << "replica 2 exited with status " << drained_exit << " on SIGTERM";
  // Alone, the survivor answered everything after both had gone.
  EXPECT_GE(RunsServed(*replicas_[0], survivor_before_tail + 500), survivor_before_tail + 500);
}

}  // namespace
}  // namespace tensorop::client
