// tensord's Prometheus metrics: counters and a latency histogram of finished
// calls, recorded where the request log line is written, and series sampled at
// every scrape from the scheduler and the device pool (queue depths, device
// failures). Rendered in the Prometheus text exposition format 0.0.4;
// server/transport/metrics_http.h serves the text over HTTP.
//
// Series (label values in quotes are examples):
//   tensorop_requests_total{method="Run",op="slice",backend="cpu",code="OK"}
//   tensorop_request_latency_seconds_{bucket,sum,count}{method="Run",op="slice"}
//   tensorop_bytes_in_total, tensorop_bytes_out_total
//   tensorop_queue_depth{backend="cpu"}
//   tensorop_queue_depth{backend="opencl",device="<name>",index="0"}
//   tensorop_device_failures_total{device="<name>",index="0"}
//   tensorop_opencl_waiting{device="<name>",index="0"}
//   tensorop_opencl_wait_seconds_{bucket,sum,count}{device="<name>",index="0"}
//   tensorop_calibration_bytes_per_second{backend="cpu",kernel="copy"}
//   tensorop_calibration_bytes_per_second{backend="opencl",device="<name>",index="0",
//                                         direction="upload"}
//   tensorop_calibration_fixed_seconds{backend="cpu"}
//   process_cpu_seconds_total, process_resident_memory_bytes, ... (process_series.h)
#ifndef TENSOROP_SERVER_TELEMETRY_METRICS_H_
#define TENSOROP_SERVER_TELEMETRY_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {

// Label name/value pairs of one series, in the order they are printed.
using Labels = std::vector<std::pair<std::string, std::string>>;

// The content type of Exposition()'s text.
inline constexpr absl::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Upper bounds of the latency histogram's buckets, in microseconds (integers,
// so a latency falls into a bucket exactly; printed as seconds). From a small
// unary call on loopback to a multi-GiB stream.
inline constexpr int64_t kLatencyBucketsUs[] = {
    50,     100,     250,     500,     1'000,     2'500,     5'000,     10'000,     25'000,
    50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000, 10'000'000, 30'000'000};

class Metrics {
 public:
  // The label values of the call series are all known up front: the methods of
  // tensorop.v1.TensorOp, the operators of RunRequest.op, the backends and the
  // status codes. So every call series is a fixed slot of atomics, and
  // RecordCall takes no lock and allocates nothing.
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Counts one finished call (one request inside RunBidi) that ended with
  // `code` after `latency`: its method, op, backend ("cpu" or "opencl:<device>"
  // count as "cpu" and "opencl"; no backend as "none"; no op as "none") and its
  // bytes in and out. Thread-safe.
  void RecordCall(const CallRecord& record, absl::StatusCode code, absl::Duration latency);

  // Calls of operator `op` ("slice", ...) counted so far, through any method
  // and backend: those that ended OK and the others, and the time they took
  // from arrival to answer, in nanoseconds (ModelStatistics).
  struct OpCounts {
    uint64_t success = 0;
    uint64_t fail = 0;
    uint64_t success_ns = 0;
    uint64_t fail_ns = 0;
  };
  OpCounts CallCounts(absl::string_view op) const;

  // Adds a series whose value `sample` returns at each scrape (a gauge, or a
  // counter kept elsewhere). Series of one `name` are printed together, under
  // the HELP and TYPE of the first added; `type` is "gauge" or "counter". Call
  // before scrapes start: adding is not synchronised with Exposition().
  void AddSampled(const std::string& name, const std::string& help, const std::string& type,
                  Labels labels, std::function<int64_t()> sample);
  // The same for a value that need not be whole (seconds).
  void AddSampledReal(const std::string& name, const std::string& help, const std::string& type,
                      Labels labels, std::function<double()> sample);

  // Adds a histogram whose buckets `sample` returns at each scrape: counts per
  // bucket of `bounds_us` (upper bounds in microseconds, printed as seconds)
  // plus +Inf, not cumulative, and their sum in microseconds. Histograms of one
  // `name` are printed together, after the sampled series. Call before scrapes
  // start, as AddSampled.
  struct HistogramSample {
    std::vector<uint64_t> buckets;
    uint64_t sum_us = 0;
  };
  void AddSampledHistogram(const std::string& name, const std::string& help, Labels labels,
                           std::vector<int64_t> bounds_us, std::function<HistogramSample()> sample);

  // Every series in the text exposition format, each family with its HELP and
  // TYPE lines. Call series appear once counted (a zero count is not printed);
  // sampled ones always. Thread-safe with RecordCall.
  std::string Exposition() const;

 private:
  struct Histogram {
    // Per bucket, not cumulative; the last is +Inf.
    std::unique_ptr<std::atomic<uint64_t>[]> buckets;
    std::atomic<uint64_t> sum_us{0};
  };
  struct SampledSeries {
    Labels labels;
    std::function<int64_t()> sample;
    std::function<double()> real;  // instead of `sample` when set
  };
  struct SampledFamily {
    std::string name;
    std::string help;
    std::string type;
    std::vector<SampledSeries> series;
  };

  struct SampledHistogram {
    Labels labels;
    std::vector<int64_t> bounds_us;
    std::function<HistogramSample()> sample;
  };
  struct SampledHistogramFamily {
    std::string name;
    std::string help;
    std::vector<SampledHistogram> series;
  };

  size_t RequestSlot(size_t method, size_t op, size_t backend, size_t code) const;

  // Label values by index; index 0 of each is "none" (a record naming none,
  // or one this build does not know).
  const std::vector<std::string> methods_;
  const std::vector<std::string> ops_;
  const std::vector<std::string> backends_;
  const std::vector<std::string> codes_;

  std::unique_ptr<std::atomic<uint64_t>[]> requests_;  // [method][op][backend][code]
  std::unique_ptr<Histogram[]> latency_;               // [method][op]
  // Nanoseconds of the calls of each op: [op][0] those that ended OK, [op][1]
  // the others.
  std::unique_ptr<std::atomic<uint64_t>[]> op_ns_;
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::vector<SampledFamily> sampled_;
  std::vector<SampledHistogramFamily> sampled_histograms_;
};

// `value` escaped for a label value: backslash, double quote and newline.
std::string EscapeLabelValue(absl::string_view value);

// Whole microseconds as decimal seconds without trailing zeros: 250 -> "0.00025",
// 2500000 -> "2.5", 1000000 -> "1".
std::string MicrosAsSeconds(int64_t micros);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TELEMETRY_METRICS_H_
