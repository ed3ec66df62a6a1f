// A real Prometheus (Debian's package) scrapes a real tensord, and its query API
// then returns tensorop_requests_total with the counts of the calls made: the
// exposition is what Prometheus itself accepts.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/set_ints.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::_;
using ::testing::UnorderedElementsAre;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

// A loopback port free right now. Prometheus has no "port 0": it is told this
// one, which nothing else on the machine asks for in the meantime.
int FreeLoopbackPort() {
  int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (sock < 0 || bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::abort();
  }
  close(sock);
  return ntohs(address.sin_port);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Prometheus on 127.0.0.1:port with its config and data in a temporary
// directory, scraping `target` every second; stopped and cleaned up on exit.
class PrometheusProcess {
 public:
  PrometheusProcess(const std::string& target) : port_(FreeLoopbackPort()) {
    char dir_template[] = "/tmp/tensord-prometheus-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) std::abort();
    dir_ = dir_template;
    std::ofstream(dir_ / "prometheus.yml") << "global:\n"
                                              "  scrape_interval: 1s\n"
                                              "scrape_configs:\n"
                                              "  - job_name: tensord\n"
                                              "    static_configs:\n"
                                              "      - targets: ['"
                                           << target << "']\n";
    std::vector<std::string> args = {
        kPrometheus,
        "--config.file=" + (dir_ / "prometheus.yml").string(),
        "--storage.tsdb.path=" + (dir_ / "data").string(),
        "--web.listen-address=127.0.0.1:" + std::to_string(port_),
    };
    const std::string log = (dir_ / "log").string();
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~PrometheusProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  int port() const { return port_; }
  std::string Log() const { return ReadFile(dir_ / "log"); }
  // True while the process runs.
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  int port_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

TEST(PrometheusTest, ScrapesTensordAndAnswersTheRequestCounts) {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: scripts/setup.sh installs Debian's prometheus";
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, DocSliceRequest("ok"), &response), GrpcOk());
  }
  {
    v1::RunRequest invalid = DocSliceRequest("invalid");
    SetInts(invalid.mutable_slice()->mutable_window_strides(), {1, 1, 0, 2});
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, invalid, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, _));
  }

  PrometheusProcess prometheus(server.metrics_target());
  httplib::Client client("127.0.0.1", prometheus.port());
  // Each scrape is stored whole, so the first answer with any series has them
  // all. Bounded so that a broken setup fails with Prometheus's log instead of
  // hanging: startup plus the first scrape take a few seconds.
  nlohmann::json result;
  for (int attempt = 0; attempt < 600 && prometheus.Running(); ++attempt) {
    httplib::Result answer = client.Get("/api/v1/query?query=tensorop_requests_total");
    if (answer && answer->status == 200) {
      nlohmann::json json = nlohmann::json::parse(answer->body, nullptr, false);
      if (!json.is_discarded() && json["status"] == "success" && !json["data"]["result"].empty()) {
        result = json["data"]["result"];
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(result.is_null()) << "no tensorop_requests_total in Prometheus; its log:\n"
                                 << prometheus.Log();

  // Each series as "labels -> value", labels sorted by name (Prometheus adds
  // job and instance).
  std::vector<std::string> series;
  for (const nlohmann::json& sample : result) {
    std::map<std::string, std::string> labels = sample["metric"];
    std::string text;
    for (const auto& [name, value] : labels) text += name + "=" + value + " ";
    series.push_back(text + "-> " + sample["value"][1].get<std::string>());
  }
  const std::string common = "__name__=tensorop_requests_total backend=cpu ";
  const std::string where =
      "instance=" + server.metrics_target() + " job=tensord method=Run op=slice -> ";
  EXPECT_THAT(series, UnorderedElementsAre(common + "code=OK " + where + "2",
                                           common + "code=INVALID_ARGUMENT " + where + "1"));
}

}  // namespace
}  // namespace tensorop::testing
