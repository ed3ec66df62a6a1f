#include "server/placement/placement_series.h"

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/placement/cost_model.h"
#include "server/placement/device_queue.h"

namespace tensorop::server {

void AddServerSeries(Metrics& metrics, const Scheduler& scheduler, const DevicePool& devices) {
  constexpr absl::string_view kQueueHelp =
      "Requests queued or running: on the CPU workers, which plan every request "
      "(--max_queued_requests bounds it), and on each OpenCL device "
      "(--opencl_queue_depth bounds it).";
  metrics.AddSampled("tensorop_queue_depth", std::string(kQueueHelp), "gauge", {{"backend", "cpu"}},
                     [&scheduler] { return scheduler.in_flight(); });
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampled(
        "tensorop_queue_depth", std::string(kQueueHelp), "gauge",
        {{"backend", "opencl"}, {"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
        [&devices, index] { return devices.in_flight(index); });
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampled("tensorop_device_failures_total",
                       "OpenCL device executions that failed (the request was retried on the "
                       "CPU and the device marked unhealthy), by device.",
                       "counter", {{"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
                       [&devices, index] { return devices.failures(index); });
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampled("tensorop_opencl_uploaded_bytes_total",
                       "Input bytes copied to an OpenCL device for executions (inputs resident "
                       "there are not), by device.",
                       "counter", {{"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
                       [&devices, index] { return devices.uploaded_bytes(index); });
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampled("tensorop_opencl_host_memory",
                       "1 when the OpenCL device keeps its buffers in host memory (a CPU device, "
                       "or one with unified memory): its handles count in --max_memory_bytes.",
                       "gauge", {{"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
                       [&devices, index] { return devices.HostMemory(index) ? 1 : 0; });
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampled("tensorop_opencl_waiting",
                       "OPENCL requests waiting for a slot of a busy device, by device "
                       "(--opencl_max_wait_seconds bounds each wait).",
                       "gauge", {{"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
                       [&devices, index] { return devices.waiting(index); });
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampledHistogram(
        "tensorop_opencl_wait_seconds",
        "How long OPENCL requests that found their device busy waited for a slot, by device "
        "(waits that ended without one too).",
        {{"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
        std::vector<int64_t>(std::begin(kWaitBucketsUs), std::end(kWaitBucketsUs)),
        [&devices, index] {
          WaitHistogram waits = devices.wait_histogram(index);
          return Metrics::HistogramSample{.buckets = std::move(waits.buckets),
                                          .sum_us = waits.sum_us};
        });
  }
}

void AddCalibrationSeries(Metrics& metrics, const Scheduler& scheduler, const DevicePool& devices) {
  constexpr absl::string_view kRateHelp =
      "Rates AUTO's cost model measured at startup (--calibrate): the CPU's copy and scatter "
      "kernels at --worker_threads, and each OpenCL device's upload, download, copy and "
      "scatter; 0 until measured.";
  constexpr absl::string_view kFixedHelp =
      "The fixed cost of one request AUTO's cost model measured at startup (--calibrate), "
      "per backend; 0 until measured.";
  // Each sample reads the model the scheduler holds now.
  const auto cpu = [&scheduler](double CpuRates::*field) {
    return [&scheduler, field] {
      std::shared_ptr<const CostModel> model = scheduler.cost_model();
      return model == nullptr ? 0.0 : model->cpu.*field;
    };
  };
  const auto device = [&scheduler](int index, double DeviceRates::*field) {
    return [&scheduler, index, field] {
      std::shared_ptr<const CostModel> model = scheduler.cost_model();
      if (model == nullptr || static_cast<size_t>(index) >= model->devices.size()) return 0.0;
      return model->devices[index].*field;
    };
  };
  const auto whole = [](std::function<double()> sample) {
    return [sample = std::move(sample)] { return static_cast<int64_t>(sample()); };
  };
  const std::string rates = "tensorop_calibration_bytes_per_second";
  const std::string fixed = "tensorop_calibration_fixed_seconds";
  metrics.AddSampled(rates, std::string(kRateHelp), "gauge",
                     {{"backend", "cpu"}, {"kernel", "copy"}},
                     whole(cpu(&CpuRates::copy_bytes_per_second)));
  metrics.AddSampled(rates, std::string(kRateHelp), "gauge",
                     {{"backend", "cpu"}, {"kernel", "scatter"}},
                     whole(cpu(&CpuRates::scatter_bytes_per_second)));
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    const Labels labels = {
        {"backend", "opencl"}, {"device", devices.Name(index)}, {"index", absl::StrCat(index)}};
    for (const auto& [label, value, field] :
         {std::tuple{"direction", "upload", &DeviceRates::upload_bytes_per_second},
          std::tuple{"direction", "download", &DeviceRates::download_bytes_per_second},
          std::tuple{"kernel", "copy", &DeviceRates::copy_bytes_per_second},
          std::tuple{"kernel", "scatter", &DeviceRates::scatter_bytes_per_second}}) {
      Labels series = labels;
      series.emplace_back(label, value);
      metrics.AddSampled(rates, std::string(kRateHelp), "gauge", std::move(series),
                         whole(device(index, field)));
    }
  }
  metrics.AddSampledReal(fixed, std::string(kFixedHelp), "gauge", {{"backend", "cpu"}},
                         cpu(&CpuRates::fixed_seconds));
  for (size_t i = 0; i < devices.size(); ++i) {
    const int index = static_cast<int>(i);
    metrics.AddSampledReal(
        fixed, std::string(kFixedHelp), "gauge",
        {{"backend", "opencl"}, {"device", devices.Name(index)}, {"index", absl::StrCat(index)}},
        device(index, &DeviceRates::fixed_seconds));
  }
}

}  // namespace tensorop::server
