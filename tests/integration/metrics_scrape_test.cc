// /metrics of a real tensord, scraped over HTTP after known calls: exact counts
// per method, op, backend and code, bytes, queue depths and device failures;
// the process_* series, and the whole text as promtool checks it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/set_ints.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensord_process.h"
#include "tests/support/text_lines.h"

namespace tensorop::testing {
namespace {

using ::testing::_;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Scrape {
  int status = 0;
  std::string content_type;
  std::string body;
};

Scrape Get(const TensordProcess& server, const std::string& path) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get(path);
  if (!result) return Scrape{};
  return Scrape{result->status, result->get_header_value("Content-Type"), result->body};
}

// The text of /metrics once the CPU queue depth is back to 0. A task counts
// itself out just after finishing its call, so the client can see the answer a
// moment before; bounded so that a leak fails instead of hanging.
std::string ScrapeWhenIdle(const TensordProcess& server) {
  std::string body;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    body = Get(server, "/metrics").body;
    if (absl::StrContains(body, "tensorop_queue_depth{backend=\"cpu\"} 0\n")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return body;
}

v1::RunRequest OnBackend(v1::RunRequest request, v1::Backend backend) {
  request.set_backend(backend);
  return request;
}

TEST(MetricsScrapeTest, CountsEveryCallByMethodOpBackendAndCode) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, OnBackend(DocSliceRequest("cpu"), v1::CPU), &response),
                GrpcOk());
  }
  {
    v1::RunRequest invalid = OnBackend(DocSliceRequest("invalid"), v1::CPU);
    SetInts(invalid.mutable_slice()->mutable_window_strides(), {1, 1, 0, 2});
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, invalid, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, _));
  }
  std::string device;
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, OnBackend(DocSliceRequest("gpu"), v1::OPENCL), &response),
                GrpcOk());
    ASSERT_THAT(response.backend(), StartsWith("opencl:"));
    device = response.backend().substr(7);
  }

  const std::string text = ScrapeWhenIdle(server);
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_requests_total{"),
      ElementsAre(
          R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="OK"} 3)",
          R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="INVALID_ARGUMENT"} 1)",
          R"(tensorop_requests_total{method="Run",op="slice",backend="opencl",code="OK"} 1)"))
      << text;
  EXPECT_THAT(LinesStartingWith(text, "tensorop_request_latency_seconds_count{"),
              ElementsAre(R"(tensorop_request_latency_seconds_count{method="Run",op="slice"} 5)"));
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_request_latency_seconds_bucket{"),
      Contains(R"(tensorop_request_latency_seconds_bucket{method="Run",op="slice",le="+Inf"} 5)"));
  // Five uploads of 16 float32; four answers of 4 float32.
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_in_total "),
              ElementsAre("tensorop_bytes_in_total 320"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_out_total "),
              ElementsAre("tensorop_bytes_out_total 64"));
  std::vector<std::string> depths = LinesStartingWith(text, "tensorop_queue_depth{");
  ASSERT_GE(depths.size(), 2u);
  EXPECT_EQ(depths[0], R"(tensorop_queue_depth{backend="cpu"} 0)");
  EXPECT_EQ(depths[1],
            "tensorop_queue_depth{backend=\"opencl\",device=\"" + device + "\",index=\"0\"} 0");
  std::vector<std::string> failures = LinesStartingWith(text, "tensorop_device_failures_total{");
  ASSERT_GE(failures.size(), 1u);
  EXPECT_EQ(failures[0], "tensorop_device_failures_total{device=\"" + device + "\",index=\"0\"} 0");
}

TEST(MetricsScrapeTest, StreamedAndBidiCallsCountUnderTheirMethods) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  {
    grpc::ClientContext context;
    auto reader = stub->RunStream(&context, BroadcastRowsRequest("stream", 4, 1024));
    v1::ResultPart part;
    while (reader->Read(&part)) {
    }
    ASSERT_THAT(reader->Finish(), GrpcOk());
  }
  {
    grpc::ClientContext context;
    auto stream = stub->RunBidi(&context);
    ASSERT_TRUE(stream->Write(DocSliceRequest("bidi-1")));
    ASSERT_TRUE(stream->Write(DocSliceRequest("bidi-2")));
    ASSERT_TRUE(stream->WritesDone());
    v1::RunResponse response;
    int answers = 0;
    while (stream->Read(&response)) ++answers;
    ASSERT_THAT(stream->Finish(), GrpcOk());
    ASSERT_EQ(answers, 2);
  }
  const std::string text = ScrapeWhenIdle(server);
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_requests_total{"),
      ElementsAre(
          R"(tensorop_requests_total{method="RunStream",op="slice",backend="cpu",code="OK"} 1)",
          R"(tensorop_requests_total{method="RunBidi",op="slice",backend="cpu",code="OK"} 2)"))
      << text;
  // The stream uploads one row of 1024 bytes and sends back 4 rows; each bidi
  // request uploads 64 bytes and gets 16 back.
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_in_total "),
              ElementsAre("tensorop_bytes_in_total 1152"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_out_total "),
              ElementsAre("tensorop_bytes_out_total 4128"));
}

TEST(MetricsScrapeTest, DeviceFailureIsCountedAndTheCpuAnswerToo) {
  TensordProcess server({"--inject_opencl_failures=1"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  v1::RunResponse response;
  ASSERT_THAT(stub->Run(&context, OnBackend(DocSliceRequest("fails"), v1::OPENCL), &response),
              GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
  // The device's name, from the log's failure line: "opencl:<name>".
  const std::string failure = AwaitLogLine(server, {"\"event\":\"device_failure\""});
  const std::string marker = "\"device\":\"opencl:";
  const size_t at = failure.find(marker);
  ASSERT_NE(at, std::string::npos) << server.Log();
  const std::string device = failure.substr(
      at + marker.size(), failure.find('"', at + marker.size()) - at - marker.size());

  const std::string text = ScrapeWhenIdle(server);
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_requests_total{"),
      ElementsAre(R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="OK"} 1)"))
      << text;
  std::vector<std::string> failures = LinesStartingWith(text, "tensorop_device_failures_total{");
  ASSERT_GE(failures.size(), 1u);
  EXPECT_EQ(failures[0], "tensorop_device_failures_total{device=\"" + device + "\",index=\"0\"} 1");
}

constexpr char kPromtool[] = "/usr/bin/promtool";

// The value of the one unlabelled series `name` in `text`, or -1.
double SeriesValue(const std::string& text, const std::string& name) {
  const std::vector<std::string> lines = LinesStartingWith(text, name + " ");
  double value = -1;
  if (lines.size() != 1 || !absl::SimpleAtod(lines[0].substr(name.size() + 1), &value)) return -1;
  return value;
}

// The process series every exporter has (issue 46, item 7), read from the
// tensord this test started, and the whole exposition linted by promtool
// (Debian's prometheus package), the tool Prometheus' users check a target with.
TEST(MetricsScrapeTest, ProcessSeriesAreTensordsOwnAndPromtoolAcceptsTheText) {
  ASSERT_EQ(access(kPromtool, X_OK), 0)
      << kPromtool << " is missing: scripts/setup.sh installs Debian's prometheus";
  const int64_t launched = absl::ToUnixSeconds(absl::Now());
  // Its open-file limit fixed (soft and hard), so process_max_fds is known.
  TensordProcess server({}, /*max_open_files=*/512);
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, DocSliceRequest("process"), &response), GrpcOk());
  }
  const std::string text = ScrapeWhenIdle(server);

  const std::map<std::string, std::string> types = {{"process_cpu_seconds_total", "counter"},
                                                    {"process_resident_memory_bytes", "gauge"},
                                                    {"process_virtual_memory_bytes", "gauge"},
                                                    {"process_open_fds", "gauge"},
                                                    {"process_max_fds", "gauge"},
                                                    {"process_start_time_seconds", "gauge"}};
  for (const auto& [name, type] : types) {
    EXPECT_THAT(LinesStartingWith(text, "# HELP " + name + " "), ElementsAre(_)) << name;
    EXPECT_THAT(LinesStartingWith(text, "# TYPE " + name + " "),
                ElementsAre("# TYPE " + name + " " + type));
  }
  EXPECT_GE(SeriesValue(text, "process_cpu_seconds_total"), 0) << text;
  const double resident = SeriesValue(text, "process_resident_memory_bytes");
  EXPECT_GT(resident, 0) << text;
  EXPECT_GE(SeriesValue(text, "process_virtual_memory_bytes"), resident) << text;
  EXPECT_EQ(SeriesValue(text, "process_max_fds"), 512) << text;
  const double open_fds = SeriesValue(text, "process_open_fds");
  EXPECT_GT(open_fds, 2) << text;  // stdio, the listeners, this scrape's connection
  EXPECT_LE(open_fds, 512) << text;
  // This tensord's start, not the machine's or the test's: between the launch
  // (less a second of rounding in /proc/stat's boot time) and now.
  const double start = SeriesValue(text, "process_start_time_seconds");
  EXPECT_GE(start, static_cast<double>(launched - 1)) << text;
  EXPECT_LE(start, static_cast<double>(absl::ToUnixSeconds(absl::Now()))) << text;

  // promtool check metrics reads the text on stdin; it exits non-zero naming each
  // problem (a counter without _total, a missing HELP, a bad line).
  TempFiles files;
  const std::string scraped = files.Write(text, "tensord-metrics", ".txt");
  const CommandResult check =
      RunCommand({"/bin/sh", "-c", std::string(kPromtool) + " check metrics < " + scraped});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "");
}

TEST(MetricsScrapeTest, ServesThePrometheusContentTypeAndOnlyMetrics) {
  TensordProcess server;
  Scrape metrics = Get(server, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(metrics.body, StartsWith("# HELP tensorop_build_info "));
  EXPECT_EQ(Get(server, "/").status, 404);
  EXPECT_EQ(Get(server, "/metrics/extra").status, 404);
}

TEST(MetricsScrapeTest, EmptyMetricsAddressServesNoMetrics) {
  TensordProcess server({"--metrics_address="});
  EXPECT_EQ(server.metrics_target(), "");
  EXPECT_EQ(server.metrics_port(), -1);
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, DocSliceRequest("no-metrics"), &response), GrpcOk());
}

TEST(MetricsScrapeTest, TakenMetricsPortStopsStartupWithStatusOne) {
  TensordProcess first;
  // A second server on the first one's metrics port must not share it.
  const std::string taken = "--metrics_address=" + first.metrics_target();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    std::vector<std::string> args = {TensordPath(), "--address=127.0.0.1:0",
                                     "--http_address=", taken};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_EQ(Get(first, "/metrics").status, 200);
}

}  // namespace
}  // namespace tensorop::testing
