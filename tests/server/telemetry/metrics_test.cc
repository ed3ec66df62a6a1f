// The metrics registry and its text exposition, line for line.
#include "server/telemetry/metrics.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "core/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/telemetry/process_series.h"
#include "tests/support/text_lines.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::LinesStartingWith;

using ::testing::ElementsAre;
using ::testing::IsEmpty;

CallRecord Record(absl::string_view method, const std::string& op, const std::string& backend,
                  int64_t bytes_in = 0, int64_t bytes_out = 0) {
  CallRecord record;
  record.method = method;
  record.op = op;
  record.backend = backend;
  record.bytes_in = bytes_in;
  record.bytes_out = bytes_out;
  return record;
}

// Every exposition's first family: the version as a label of a constant 1.
std::string BuildInfo() {
  return absl::StrCat(
      "# HELP tensorop_build_info tensord's version (tensord --version), as a label; always 1.\n"
      "# TYPE tensorop_build_info gauge\n"
      "tensorop_build_info{version=\"",
      Version(), "\"} 1\n");
}

TEST(MetricsTest, FreshRegistryHasEveryFamilyAndZeroByteTotals) {
  Metrics metrics;
  EXPECT_EQ(metrics.Exposition(),
            BuildInfo() +
                "# HELP tensorop_requests_total Calls finished (requests, inside RunBidi), by "
                "method, operator, backend and status code.\n"
                "# TYPE tensorop_requests_total counter\n"
                "# HELP tensorop_request_latency_seconds Time from a call's arrival (a request's, "
                "inside RunBidi) to its outcome, by method and operator.\n"
                "# TYPE tensorop_request_latency_seconds histogram\n"
                "# HELP tensorop_bytes_in_total Input data bytes received in requests.\n"
                "# TYPE tensorop_bytes_in_total counter\n"
                "tensorop_bytes_in_total 0\n"
                "# HELP tensorop_bytes_out_total Output data bytes sent in answers.\n"
                "# TYPE tensorop_bytes_out_total counter\n"
                "tensorop_bytes_out_total 0\n");
}

TEST(MetricsTest, OneCallGivesItsCounterHistogramAndBytes) {
  Metrics metrics;
  metrics.RecordCall(Record("Run", "slice", "cpu", 64, 16), absl::StatusCode::kOk,
                     absl::Microseconds(180));
  EXPECT_EQ(
      metrics.Exposition(),
      BuildInfo() +
          "# HELP tensorop_requests_total Calls finished (requests, inside RunBidi), by "
          "method, operator, backend and status code.\n"
          "# TYPE tensorop_requests_total counter\n"
          "tensorop_requests_total{method=\"Run\",op=\"slice\",backend=\"cpu\",code=\"OK\"} 1\n"
          "# HELP tensorop_request_latency_seconds Time from a call's arrival (a request's, "
          "inside RunBidi) to its outcome, by method and operator.\n"
          "# TYPE tensorop_request_latency_seconds histogram\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.00005\"} 0\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.0001\"} 0\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.00025\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.0005\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.001\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.0025\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.005\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.01\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.025\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.05\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.1\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.25\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"0.5\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"1\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"2.5\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"5\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"10\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"30\"} 1\n"
          "tensorop_request_latency_seconds_bucket{method=\"Run\",op=\"slice\",le=\"+Inf\"} 1\n"
          "tensorop_request_latency_seconds_sum{method=\"Run\",op=\"slice\"} 0.00018\n"
          "tensorop_request_latency_seconds_count{method=\"Run\",op=\"slice\"} 1\n"
          "# HELP tensorop_bytes_in_total Input data bytes received in requests.\n"
          "# TYPE tensorop_bytes_in_total counter\n"
          "tensorop_bytes_in_total 64\n"
          "# HELP tensorop_bytes_out_total Output data bytes sent in answers.\n"
          "# TYPE tensorop_bytes_out_total counter\n"
          "tensorop_bytes_out_total 16\n");
}

TEST(MetricsTest, CallsAreCountedByMethodOpBackendAndCodeInDescriptorOrder) {
  Metrics metrics;
  const absl::Duration latency = absl::Microseconds(10);
  for (int i = 0; i < 3; ++i) {
    metrics.RecordCall(Record("Run", "slice", "cpu"), absl::StatusCode::kOk, latency);
  }
  metrics.RecordCall(Record("Run", "slice", "cpu"), absl::StatusCode::kInvalidArgument, latency);
  // The device's name is not a label here; the device series carry it.
  metrics.RecordCall(Record("Run", "slice", "opencl:pthread-cpu"), absl::StatusCode::kOk, latency);
  metrics.RecordCall(Record("RunStream", "strided_slice", "cpu"),
                     absl::StatusCode::kDeadlineExceeded, latency);
  metrics.RecordCall(Record("RunChunked", "scatter_elements", "opencl"),
                     absl::StatusCode::kResourceExhausted, latency);
  // RunBidi's unparsable message: no op, no backend.
  metrics.RecordCall(Record("RunBidi", "", ""), absl::StatusCode::kInvalidArgument, latency);
  metrics.RecordCall(Record("RunBidi", "split", "cpu"), absl::StatusCode::kOk, latency);
  EXPECT_THAT(
      LinesStartingWith(metrics.Exposition(), "tensorop_requests_total{"),
      ElementsAre(
          R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="OK"} 3)",
          R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="INVALID_ARGUMENT"} 1)",
          R"(tensorop_requests_total{method="Run",op="slice",backend="opencl",code="OK"} 1)",
          R"(tensorop_requests_total{method="RunStream",op="strided_slice",backend="cpu",code="DEADLINE_EXCEEDED"} 1)",
          R"(tensorop_requests_total{method="RunBidi",op="none",backend="none",code="INVALID_ARGUMENT"} 1)",
          R"(tensorop_requests_total{method="RunBidi",op="split",backend="cpu",code="OK"} 1)",
          R"(tensorop_requests_total{method="RunChunked",op="scatter_elements",backend="opencl",code="RESOURCE_EXHAUSTED"} 1)"));
  EXPECT_THAT(
      LinesStartingWith(metrics.Exposition(), "tensorop_request_latency_seconds_count{"),
      ElementsAre(
          R"(tensorop_request_latency_seconds_count{method="Run",op="slice"} 5)",
          R"(tensorop_request_latency_seconds_count{method="RunStream",op="strided_slice"} 1)",
          R"(tensorop_request_latency_seconds_count{method="RunBidi",op="none"} 1)",
          R"(tensorop_request_latency_seconds_count{method="RunBidi",op="split"} 1)",
          R"(tensorop_request_latency_seconds_count{method="RunChunked",op="scatter_elements"} 1)"));
}

TEST(MetricsTest, LatencyOnABoundIsInThatBucketAndSumsStayExact) {
  Metrics metrics;
  for (int64_t micros : {50, 51, 2'500'000, 40'000'000}) {
    metrics.RecordCall(Record("Run", "split", "cpu"), absl::StatusCode::kOk,
                       absl::Microseconds(micros));
  }
  const std::string text = metrics.Exposition();
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_request_latency_seconds_bucket"),
      ElementsAre(
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.00005"} 1)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.0001"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.00025"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.0005"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.001"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.0025"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.005"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.01"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.025"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.05"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.1"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.25"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="0.5"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="1"} 2)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="2.5"} 3)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="5"} 3)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="10"} 3)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="30"} 3)",
          R"(tensorop_request_latency_seconds_bucket{method="Run",op="split",le="+Inf"} 4)"));
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_request_latency_seconds_sum"),
      ElementsAre(R"(tensorop_request_latency_seconds_sum{method="Run",op="split"} 42.500101)"));
}

TEST(MetricsTest, OperatorCountsKeepTheTimeOfEachOutcome) {
  Metrics metrics;
  metrics.RecordCall(Record("ModelInfer", "slice", "cpu"), absl::StatusCode::kOk,
                     absl::Nanoseconds(1500));
  metrics.RecordCall(Record("Run", "slice", "opencl"), absl::StatusCode::kOk,
                     absl::Microseconds(2));
  metrics.RecordCall(Record("Run", "slice", "cpu"), absl::StatusCode::kInvalidArgument,
                     absl::Nanoseconds(700));
  metrics.RecordCall(Record("Run", "split", "cpu"), absl::StatusCode::kOk, absl::Seconds(1));
  const Metrics::OpCounts slice = metrics.CallCounts("slice");
  EXPECT_EQ(slice.success, 2u);
  EXPECT_EQ(slice.fail, 1u);
  EXPECT_EQ(slice.success_ns, 3500u);
  EXPECT_EQ(slice.fail_ns, 700u);
  EXPECT_EQ(metrics.CallCounts("split").success_ns, 1'000'000'000u);
  EXPECT_EQ(metrics.CallCounts("scatter_elements").success_ns, 0u);
}

TEST(MetricsTest, SampledSeriesAreGroupedByNameWithEscapedLabels) {
  Metrics metrics;
  int64_t depth = 3;
  metrics.AddSampled("test_depth", "A depth.", "gauge", {{"backend", "cpu"}},
                     [&depth] { return depth; });
  metrics.AddSampled("test_failures_total", "Failures.", "counter",
                     {{"device", "quote\" back\\slash\nnewline"}}, [] { return int64_t{7}; });
  metrics.AddSampled("test_depth", "ignored: the first HELP stands", "gauge",
                     {{"backend", "opencl"}, {"device", "d0"}}, [] { return int64_t{0}; });
  depth = 5;  // read at scrape time, not when added
  const std::string text = metrics.Exposition();
  const std::string expected_tail =
      "# HELP test_depth A depth.\n"
      "# TYPE test_depth gauge\n"
      "test_depth{backend=\"cpu\"} 5\n"
      "test_depth{backend=\"opencl\",device=\"d0\"} 0\n"
      "# HELP test_failures_total Failures.\n"
      "# TYPE test_failures_total counter\n"
      "test_failures_total{device=\"quote\\\" back\\\\slash\\nnewline\"} 7\n";
  ASSERT_GE(text.size(), expected_tail.size());
  EXPECT_EQ(text.substr(text.size() - expected_tail.size()), expected_tail);
}

TEST(MetricsTest, ConcurrentCallsAreAllCounted) {
  Metrics metrics;
  constexpr int kThreads = 4;
  constexpr int kCallsEach = 25'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics] {
      for (int i = 0; i < kCallsEach; ++i) {
        metrics.RecordCall(Record("Run", "slice", "cpu", 3, 2), absl::StatusCode::kOk,
                           absl::Microseconds(1));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = metrics.Exposition();
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_requests_total{"),
      ElementsAre(
          R"(tensorop_requests_total{method="Run",op="slice",backend="cpu",code="OK"} 100000)"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_request_latency_seconds_sum"),
              ElementsAre(R"(tensorop_request_latency_seconds_sum{method="Run",op="slice"} 0.1)"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_in_total "),
              ElementsAre("tensorop_bytes_in_total 300000"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_bytes_out_total "),
              ElementsAre("tensorop_bytes_out_total 200000"));
}

TEST(MetricsTest, MicrosAsSecondsDropsTrailingZeros) {
  EXPECT_EQ(MicrosAsSeconds(0), "0");
  EXPECT_EQ(MicrosAsSeconds(50), "0.00005");
  EXPECT_EQ(MicrosAsSeconds(250), "0.00025");
  EXPECT_EQ(MicrosAsSeconds(1'000'000), "1");
  EXPECT_EQ(MicrosAsSeconds(2'500'000), "2.5");
  EXPECT_EQ(MicrosAsSeconds(12'000'001), "12.000001");
}

TEST(MetricsTest, EscapeLabelValueEscapesBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain-name_0"), "plain-name_0");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

// This process's figures, read as the process collectors of the Prometheus
// client libraries read them.
TEST(ProcessSeriesTest, SampleIsPlausible) {
  const ProcessSample sample = SampleProcess();
  EXPECT_GT(sample.resident_bytes, 0);
  EXPECT_GE(sample.virtual_bytes, sample.resident_bytes);
  EXPECT_GT(sample.open_fds, 0);  // stdin, stdout, stderr at least
  EXPECT_GT(sample.max_fds, 0);
  EXPECT_LE(sample.open_fds, sample.max_fds);
  EXPECT_GE(sample.cpu_seconds, 0);
}

TEST(ProcessSeriesTest, StartTimeIsInThePastHourAndNotAfterNow) {
  absl::StatusOr<int64_t> start = ProcessStartTimeSeconds();
  ASSERT_TRUE(start.ok()) << start.status();
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  EXPECT_LE(*start, now);
  EXPECT_GT(*start, now - 3600) << "the test binary started over an hour ago?";
}

TEST(ProcessSeriesTest, CpuSecondsGrowByAtLeastTheBusyWorkDone) {
  const double before = SampleProcess().cpu_seconds;
  ASSERT_GE(before, 0);
  // Spin until this thread alone has used 50 ms of CPU: the process's user and
  // system time grows by at least as much, however fast the machine is.
  timespec start{};
  ASSERT_EQ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start), 0);
  volatile uint64_t sink = 0;
  for (;;) {
    for (int i = 0; i < 100'000; ++i) sink = sink + static_cast<uint64_t>(i);
    timespec now{};
    ASSERT_EQ(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now), 0);
    const double spent = static_cast<double>(now.tv_sec - start.tv_sec) +
                         static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9;
    if (spent >= 0.05) break;
  }
  const double after = SampleProcess().cpu_seconds;
  // getrusage counts in microseconds; a little slack for its rounding.
  EXPECT_GE(after, before + 0.049) << "before " << before << ", after " << after;
}

TEST(ProcessSeriesTest, OpenFdsCountsDescriptorsOpenedAndClosed) {
  const int64_t before = SampleProcess().open_fds;
  ASSERT_GT(before, 0);
  int fds[3];
  for (int& fd : fds) {
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
  }
  EXPECT_EQ(SampleProcess().open_fds, before + 3);
  for (int fd : fds) close(fd);
  EXPECT_EQ(SampleProcess().open_fds, before);
}

TEST(ProcessSeriesTest, ExpositionHasTheSixSeriesWithHelpAndType) {
  Metrics metrics;
  AddProcessSeries(metrics);
  const std::string text = metrics.Exposition();
  const struct {
    const char* name;
    const char* type;
  } families[] = {{"process_cpu_seconds_total", "counter"},
                  {"process_resident_memory_bytes", "gauge"},
                  {"process_virtual_memory_bytes", "gauge"},
                  {"process_open_fds", "gauge"},
                  {"process_max_fds", "gauge"},
                  {"process_start_time_seconds", "gauge"}};
  for (const auto& family : families) {
    SCOPED_TRACE(family.name);
    EXPECT_THAT(LinesStartingWith(text, absl::StrCat("# HELP ", family.name, " ")),
                ElementsAre(::testing::Not(IsEmpty())));
    EXPECT_THAT(LinesStartingWith(text, absl::StrCat("# TYPE ", family.name, " ")),
                ElementsAre(absl::StrCat("# TYPE ", family.name, " ", family.type)));
    const std::vector<std::string> values = LinesStartingWith(text, absl::StrCat(family.name, " "));
    ASSERT_EQ(values.size(), 1u) << text;
    double value = -1;
    ASSERT_TRUE(absl::SimpleAtod(values[0].substr(values[0].find(' ') + 1), &value)) << values[0];
    EXPECT_GE(value, 0) << values[0];
  }
  // Sampled at each scrape: a descriptor opened between two scrapes shows.
  const auto open_fds = [&metrics] {
    const std::vector<std::string> line =
        LinesStartingWith(metrics.Exposition(), "process_open_fds ");
    int64_t value = -1;
    if (line.size() != 1 || !absl::SimpleAtoi(line[0].substr(17), &value)) return int64_t{-1};
    return value;
  };
  const int64_t before = open_fds();
  ASSERT_GT(before, 0);
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(open_fds(), before + 1);
  close(fd);
}

}  // namespace
}  // namespace tensorop::server
