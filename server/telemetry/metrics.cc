#include "server/telemetry/metrics.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/version.h"
#include "google/protobuf/descriptor.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {
namespace {

constexpr size_t kLatencyBuckets = std::size(kLatencyBucketsUs) + 1;  // and +Inf
// absl::StatusCode runs from kOk (0) to kUnauthenticated (16).
constexpr int kStatusCodes = 17;

std::vector<std::string> MethodNames() {
  std::vector<std::string> names = {"none"};
  const google::protobuf::ServiceDescriptor* service =
      v1::RunRequest::descriptor()->file()->FindServiceByName("TensorOp");
  for (int i = 0; i < service->method_count(); ++i) names.push_back(service->method(i)->name());
  // inference.GRPCInferenceService's inferences (server/v2/inference_service.h).
  names.push_back("ModelInfer");
  names.push_back("ModelStreamInfer");
  // POST /v2/models/{name}/infer (server/v2/inference_http.h).
  names.push_back("HttpInfer");
  return names;
}

// The names OpCaseName gives: the fields of RunRequest's `op` oneof.
std::vector<std::string> OpNames() {
  std::vector<std::string> names = {"none"};
  const google::protobuf::OneofDescriptor* op = v1::RunRequest::descriptor()->FindOneofByName("op");
  for (int i = 0; i < op->field_count(); ++i) names.push_back(op->field(i)->name());
  return names;
}

std::vector<std::string> CodeNames() {
  std::vector<std::string> names;
  for (int code = 0; code < kStatusCodes; ++code) {
    names.push_back(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
  }
  return names;
}

// The index of `value` in `values`, or 0 ("none") when absent.
size_t IndexOf(const std::vector<std::string>& values, absl::string_view value) {
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] == value) return i;
  }
  return 0;
}

// The backend label of a record: where the call ran, without the device.
size_t BackendIndex(absl::string_view backend) {
  if (backend == "cpu") return 1;
  if (absl::StartsWith(backend, "opencl")) return 2;
  return 0;
}

size_t LatencyBucket(int64_t micros) {
  const auto bound =
      std::lower_bound(std::begin(kLatencyBucketsUs), std::end(kLatencyBucketsUs), micros);
  return static_cast<size_t>(bound - std::begin(kLatencyBucketsUs));
}

// `{a="1",b="2"}`, or "" without labels.
std::string FormatLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string text = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ",", labels[i].first, "=\"",
                    EscapeLabelValue(labels[i].second), "\"");
  }
  text.push_back('}');
  return text;
}

void AppendFamilyHeader(std::string* text, absl::string_view name, absl::string_view help,
                        absl::string_view type) {
  absl::StrAppend(text, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

std::string EscapeLabelValue(absl::string_view value) {
  std::string escaped;
  escaped.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        escaped += "\\\\";
        break;
      case '"':
        escaped += "\\\"";
        break;
      case '\n':
        escaped += "\\n";
        break;
      default:
        escaped.push_back(c);
    }
  }
  return escaped;
}

std::string MicrosAsSeconds(int64_t micros) {
  std::string text = absl::StrCat(micros / 1'000'000);
  int64_t fraction = micros % 1'000'000;
  if (fraction == 0) return text;
  std::string digits = absl::StrCat(fraction + 1'000'000).substr(1);  // six, zero-padded
  digits.erase(digits.find_last_not_of('0') + 1);
  return absl::StrCat(text, ".", digits);
}

Metrics::Metrics()
    : methods_(MethodNames()),
      ops_(OpNames()),
      backends_({"none", "cpu", "opencl"}),
      codes_(CodeNames()),
      requests_(new std::atomic<uint64_t>[methods_.size() * ops_.size() * backends_.size() *
                                          codes_.size()]()),
      latency_(new Histogram[methods_.size() * ops_.size()]),
      op_ns_(new std::atomic<uint64_t>[ops_.size() * 2]()) {
  for (size_t i = 0; i < methods_.size() * ops_.size(); ++i) {
    latency_[i].buckets.reset(new std::atomic<uint64_t>[kLatencyBuckets]());
  }
}

size_t Metrics::RequestSlot(size_t method, size_t op, size_t backend, size_t code) const {
  return ((method * ops_.size() + op) * backends_.size() + backend) * codes_.size() + code;
}

void Metrics::RecordCall(const CallRecord& record, absl::StatusCode code, absl::Duration latency) {
  const size_t method = IndexOf(methods_, record.method);
  const size_t op = IndexOf(ops_, record.op);
  size_t code_index = static_cast<size_t>(code);
  if (code_index >= codes_.size()) code_index = static_cast<size_t>(absl::StatusCode::kUnknown);
  // Relaxed: each counter is independent, and a scrape may see a call counted
  // in one series and not yet in another.
  requests_[RequestSlot(method, op, BackendIndex(record.backend), code_index)].fetch_add(
      1, std::memory_order_relaxed);
  const int64_t micros = std::max<int64_t>(0, absl::ToInt64Microseconds(latency));
  Histogram& histogram = latency_[method * ops_.size() + op];
  histogram.buckets[LatencyBucket(micros)].fetch_add(1, std::memory_order_relaxed);
  histogram.sum_us.fetch_add(static_cast<uint64_t>(micros), std::memory_order_relaxed);
  op_ns_[op * 2 + (code == absl::StatusCode::kOk ? 0 : 1)].fetch_add(
      static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(latency))),
      std::memory_order_relaxed);
  bytes_in_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, record.bytes_in)),
                      std::memory_order_relaxed);
  bytes_out_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, record.bytes_out)),
                       std::memory_order_relaxed);
}

void Metrics::AddSampled(const std::string& name, const std::string& help, const std::string& type,
                         Labels labels, std::function<int64_t()> sample) {
  auto family = std::find_if(sampled_.begin(), sampled_.end(),
                             [&](const SampledFamily& f) { return f.name == name; });
  if (family == sampled_.end()) {
    sampled_.push_back(SampledFamily{.name = name, .help = help, .type = type, .series = {}});
    family = std::prev(sampled_.end());
  }
  family->series.push_back(SampledSeries{std::move(labels), std::move(sample), nullptr});
}

void Metrics::AddSampledReal(const std::string& name, const std::string& help,
                             const std::string& type, Labels labels,
                             std::function<double()> sample) {
  AddSampled(name, help, type, std::move(labels), nullptr);
  for (SampledFamily& family : sampled_) {
    if (family.name == name) {
      family.series.back().real = std::move(sample);
      break;  // names are unique: AddSampled just added this series
    }
  }
}

void Metrics::AddSampledHistogram(const std::string& name, const std::string& help, Labels labels,
                                  std::vector<int64_t> bounds_us,
                                  std::function<HistogramSample()> sample) {
  auto family = std::find_if(sampled_histograms_.begin(), sampled_histograms_.end(),
                             [&](const SampledHistogramFamily& f) { return f.name == name; });
  if (family == sampled_histograms_.end()) {
    sampled_histograms_.push_back(SampledHistogramFamily{.name = name, .help = help, .series = {}});
    family = std::prev(sampled_histograms_.end());
  }
  family->series.push_back(
      SampledHistogram{std::move(labels), std::move(bounds_us), std::move(sample)});
}

std::string Metrics::Exposition() const {
  std::string text;

  // Prometheus' build_info convention: the version as a label of a constant 1.
  AppendFamilyHeader(&text, "tensorop_build_info",
                     "tensord's version (tensord --version), as a label; always 1.", "gauge");
  absl::StrAppend(&text, "tensorop_build_info", FormatLabels({{"version", std::string(Version())}}),
                  " 1\n");

  AppendFamilyHeader(&text, "tensorop_requests_total",
                     "Calls finished (requests, inside RunBidi), by method, operator, backend "
                     "and status code.",
                     "counter");
  for (size_t method = 0; method < methods_.size(); ++method) {
    for (size_t op = 0; op < ops_.size(); ++op) {
      for (size_t backend = 0; backend < backends_.size(); ++backend) {
        for (size_t code = 0; code < codes_.size(); ++code) {
          const uint64_t count =
              requests_[RequestSlot(method, op, backend, code)].load(std::memory_order_relaxed);
          if (count == 0) continue;
          absl::StrAppend(&text, "tensorop_requests_total",
                          FormatLabels({{"method", methods_[method]},
                                        {"op", ops_[op]},
                                        {"backend", backends_[backend]},
                                        {"code", codes_[code]}}),
                          " ", count, "\n");
        }
      }
    }
  }

  AppendFamilyHeader(&text, "tensorop_request_latency_seconds",
                     "Time from a call's arrival (a request's, inside RunBidi) to its outcome, "
                     "by method and operator.",
                     "histogram");
  for (size_t method = 0; method < methods_.size(); ++method) {
    for (size_t op = 0; op < ops_.size(); ++op) {
      const Histogram& histogram = latency_[method * ops_.size() + op];
      // Read the buckets once: the count is their sum, so it always equals the
      // +Inf bucket even while calls are being recorded.
      std::vector<uint64_t> buckets(kLatencyBuckets);
      uint64_t count = 0;
      for (size_t i = 0; i < kLatencyBuckets; ++i) {
        buckets[i] = histogram.buckets[i].load(std::memory_order_relaxed);
        count += buckets[i];
      }
      if (count == 0) continue;
      const uint64_t sum_us = histogram.sum_us.load(std::memory_order_relaxed);
      const Labels labels = {{"method", methods_[method]}, {"op", ops_[op]}};
      uint64_t cumulative = 0;
      for (size_t i = 0; i < kLatencyBuckets; ++i) {
        cumulative += buckets[i];
        Labels bucket_labels = labels;
        bucket_labels.emplace_back(
            "le", i + 1 < kLatencyBuckets ? MicrosAsSeconds(kLatencyBucketsUs[i]) : "+Inf");
        absl::StrAppend(&text, "tensorop_request_latency_seconds_bucket",
                        FormatLabels(bucket_labels), " ", cumulative, "\n");
      }
      absl::StrAppend(&text, "tensorop_request_latency_seconds_sum", FormatLabels(labels), " ",
                      MicrosAsSeconds(static_cast<int64_t>(sum_us)), "\n");
      absl::StrAppend(&text, "tensorop_request_latency_seconds_count", FormatLabels(labels), " ",
                      count, "\n");
    }
  }

  AppendFamilyHeader(&text, "tensorop_bytes_in_total", "Input data bytes received in requests.",
                     "counter");
  absl::StrAppend(&text, "tensorop_bytes_in_total ", bytes_in_.load(std::memory_order_relaxed),
                  "\n");
  AppendFamilyHeader(&text, "tensorop_bytes_out_total", "Output data bytes sent in answers.",
                     "counter");
  absl::StrAppend(&text, "tensorop_bytes_out_total ", bytes_out_.load(std::memory_order_relaxed),
                  "\n");

  for (const SampledFamily& family : sampled_) {
    AppendFamilyHeader(&text, family.name, family.help, family.type);
    for (const SampledSeries& series : family.series) {
      absl::StrAppend(
          &text, family.name, FormatLabels(series.labels), " ",
          series.real ? absl::StrFormat("%.9g", series.real()) : absl::StrCat(series.sample()),
          "\n");
    }
  }

  // Printed like the latency histogram, every series even when empty.
  for (const SampledHistogramFamily& family : sampled_histograms_) {
    AppendFamilyHeader(&text, family.name, family.help, "histogram");
    for (const SampledHistogram& series : family.series) {
      const HistogramSample sample = series.sample();
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= series.bounds_us.size(); ++i) {
        if (i < sample.buckets.size()) cumulative += sample.buckets[i];
        Labels bucket_labels = series.labels;
        bucket_labels.emplace_back(
            "le", i < series.bounds_us.size() ? MicrosAsSeconds(series.bounds_us[i]) : "+Inf");
        absl::StrAppend(&text, family.name, "_bucket", FormatLabels(bucket_labels), " ", cumulative,
                        "\n");
      }
      absl::StrAppend(&text, family.name, "_sum", FormatLabels(series.labels), " ",
                      MicrosAsSeconds(static_cast<int64_t>(sample.sum_us)), "\n");
      absl::StrAppend(&text, family.name, "_count", FormatLabels(series.labels), " ", cumulative,
                      "\n");
    }
  }
  return text;
}

Metrics::OpCounts Metrics::CallCounts(absl::string_view op) const {
  OpCounts counts;
  const size_t op_index = IndexOf(ops_, op);
  if (op_index == 0) return counts;
  for (size_t method = 0; method < methods_.size(); ++method) {
    for (size_t backend = 0; backend < backends_.size(); ++backend) {
      for (size_t code = 0; code < codes_.size(); ++code) {
        const uint64_t n =
            requests_[RequestSlot(method, op_index, backend, code)].load(std::memory_order_relaxed);
        (code == 0 ? counts.success : counts.fail) += n;
      }
    }
  }
  counts.success_ns = op_ns_[op_index * 2].load(std::memory_order_relaxed);
  counts.fail_ns = op_ns_[op_index * 2 + 1].load(std::memory_order_relaxed);
  return counts;
}

}  // namespace tensorop::server
