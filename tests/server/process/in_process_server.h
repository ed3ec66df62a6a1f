// tensord's Server (server/process/server.h) in the test's own process, made
// from the flags a TensordProcess would take: the reactors tested without
// spawning tensord, and the engine's state (its open calls, the memory
// budget's reserved bytes) read directly rather than through /metrics.
#ifndef TENSOROP_TESTS_SERVER_PROCESS_IN_PROCESS_SERVER_H_
#define TENSOROP_TESTS_SERVER_PROCESS_IN_PROCESS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/engine.h"
#include "server/process/config.h"
#include "server/process/server.h"

namespace tensorop::testing {

class InProcessServer {
 public:
  // `flags` as tensord takes them, after these: gRPC on a free loopback port,
  // no /metrics or HTTP listener, no calibration, no drain. Flags are the
  // process's, so one InProcessServer at a time.
  explicit InProcessServer(std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--address=127.0.0.1:0", "--metrics_address=", "--http_address=",
                                 "--calibrate=off", "--drain_seconds=0"});
    absl::StatusOr<server::ServerConfig> config = server::ConfigFromFlags(flags);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return;
    absl::StatusOr<std::unique_ptr<server::Server>> made = server::Server::Create(*config);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return;
    server_ = *std::move(made);
    const absl::Status started = server_->Start();
    EXPECT_TRUE(started.ok()) << started;
  }
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;
  ~InProcessServer() {
    if (server_ == nullptr) return;
    server_->Shutdown();
    server_->Wait();
  }

  std::string target() const { return absl::StrCat("127.0.0.1:", server_->ports().at(0)); }
  const server::Engine& engine() const { return server_->engine(); }

 private:
  std::unique_ptr<server::Server> server_;
};

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SERVER_PROCESS_IN_PROCESS_SERVER_H_
