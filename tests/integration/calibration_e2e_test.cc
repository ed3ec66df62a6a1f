// AUTO's calibration in a real tensord on PoCL: the startup log line, the
// /metrics series, and small AUTO requests kept on the CPU.
#include <string>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(const TensordProcess& server) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  return result ? result->body : "";
}

// The value of the series whose line starts with `series` ("name{labels}"),
// or -1 when there is none.
double Sample(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

TEST(CalibrationEndToEndTest, LogsTheFiguresExportsThemAndKeepsSmallAutoOnTheCpu) {
  TensordProcess server({"--calibrate=on", "--worker_threads=2"});
  const std::string line = AwaitLogLine(server, {"\"event\":\"calibration\""});
  ASSERT_THAT(line, HasSubstr("calibration: cpu (2 workers): fixed ")) << server.Log();
  EXPECT_THAT(line, HasSubstr("0 opencl:"));
  EXPECT_THAT(line, HasSubstr(", upload "));
  EXPECT_THAT(line, HasSubstr(" GB/s"));
  EXPECT_THAT(line, Not(HasSubstr("not measured")));

  const std::string metrics = Scrape(server);
  EXPECT_THAT(metrics, HasSubstr("# TYPE tensorop_calibration_bytes_per_second gauge"));
  EXPECT_THAT(metrics, HasSubstr("# TYPE tensorop_calibration_fixed_seconds gauge"));
  EXPECT_GT(
      Sample(metrics, "tensorop_calibration_bytes_per_second{backend=\"cpu\",kernel=\"copy\"}"), 0);
  EXPECT_GT(
      Sample(metrics, "tensorop_calibration_bytes_per_second{backend=\"cpu\",kernel=\"scatter\"}"),
      0);
  EXPECT_GT(Sample(metrics, "tensorop_calibration_fixed_seconds{backend=\"cpu\"}"), 0);
  // Device series carry the device's name, which this test does not assume:
  // every line of the family must hold a positive value.
  int device_series = 0;
  for (absl::string_view text : absl::StrSplit(metrics, '\n')) {
    const bool rate = absl::StartsWith(text, "tensorop_calibration_bytes_per_second{");
    const bool fixed = absl::StartsWith(text, "tensorop_calibration_fixed_seconds{");
    if (!(rate || fixed) || !absl::StrContains(text, "backend=\"opencl\"")) continue;
    ++device_series;
    double value = 0;
    ASSERT_TRUE(absl::SimpleAtod(text.substr(text.rfind(' ') + 1), &value)) << text;
    EXPECT_GT(value, 0) << text;
    if (rate) {
      EXPECT_TRUE(absl::StrContains(text, "direction=\"upload\"") ||
                  absl::StrContains(text, "direction=\"download\"") ||
                  absl::StrContains(text, "kernel=\"copy\"") ||
                  absl::StrContains(text, "kernel=\"scatter\""))
          << text;
    }
  }
  EXPECT_GE(device_series, 5);  // four rates and a fixed cost per device

  // Small AUTO requests (the default backend) run on the CPU.
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, DocSliceRequest("small"), &response), GrpcOk());
    EXPECT_EQ(response.backend(), "cpu");
  }
}

TEST(CalibrationEndToEndTest, OffMeasuresNothingAndAutoRunsOnTheCpu) {
  TensordProcess server({"--calibrate=off"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  v1::RunResponse response;
  ASSERT_THAT(stub->Run(&context, DocSliceRequest("off"), &response), GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
  // The series are there, at 0: nothing was measured.
  const std::string metrics = Scrape(server);
  EXPECT_EQ(
      Sample(metrics, "tensorop_calibration_bytes_per_second{backend=\"cpu\",kernel=\"copy\"}"), 0);
  EXPECT_EQ(Sample(metrics, "tensorop_calibration_fixed_seconds{backend=\"cpu\"}"), 0);
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_THAT(server.Log(), Not(HasSubstr("\"event\":\"calibration\"")));
}

TEST(CalibrationEndToEndTest, TheThresholdReplacesTheModelAndSaysSo) {
  TensordProcess server({"--calibrate=on", "--auto_opencl_min_bytes=0"});
  const std::string line = AwaitLogLine(server, {"\"event\":\"calibration\""});
  EXPECT_THAT(line, HasSubstr("AUTO follows --auto_opencl_min_bytes=0 instead")) << server.Log();
  // Every AUTO request, however small, goes to a device.
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  v1::RunResponse response;
  ASSERT_THAT(stub->Run(&context, DocSliceRequest("threshold"), &response), GrpcOk());
  EXPECT_THAT(response.backend(), ::testing::StartsWith("opencl:"));
}

TEST(CalibrationEndToEndTest, ABadValueExitsTwo) {
  const CommandResult result = RunCommand({TensordPath(), "--backends=cpu", "--calibrate=yes"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensord: --calibrate=yes: expected on or off"));
}

}  // namespace
}  // namespace tensorop::testing
