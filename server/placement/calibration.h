// The calibration behind AUTO's cost model (server/placement/cost_model.h): measures, on
// this host, what a request costs on the oneTBB workers and on each OpenCL
// device. tensord runs it once on a background thread right after startup
// (--calibrate); the benchmark runs the same code. No gRPC here.
//
// Per device: the fixed cost of a tiny request (median of repeats, no phase
// timing), upload and download rates and the copy kernel's rate (one strided
// copy of growing size, phases timed apart), and the scatter kernel's rate.
// On the CPU: the fixed cost and the copy and scatter rates, in an arena of
// the server's worker count. Rates are slopes between the two largest sizes
// measured, so per-request overheads do not count as bytes.
#ifndef TENSOROP_SERVER_PLACEMENT_CALIBRATION_H_
#define TENSOROP_SERVER_PLACEMENT_CALIBRATION_H_

#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "kernels/opencl/device.h"
#include "server/placement/cost_model.h"

namespace tensorop::server {

struct CalibrationOptions {
  // oneTBB's concurrency for the CPU figures: the server's --worker_threads.
  int worker_threads = 1;
  // Seconds of measuring at most. Program builds and warm-up runs (the first
  // run of each kernel) are not measuring and do not count.
  double budget_seconds = 2.0;
  // The largest output measured (the inputs are about as large again).
  int64_t max_bytes = int64_t{8} << 20;
};

struct CalibrationReport {
  CostModel model;
  // Time spent in timed runs, and the longest single one. A run starts only
  // while the budget has room for it as predicted from the run before it, so
  // measuring_seconds <= budget_seconds + longest_step_seconds always.
  double measuring_seconds = 0;
  double longest_step_seconds = 0;
  // Program builds and warm-up runs (not part of the budget).
  double setup_seconds = 0;
  // Every figure of the CPU and of every device was measured.
  bool complete = false;
  // What went wrong: a device's error, a budget too short, a stop request.
  std::vector<std::string> problems;
};

// Measures the CPU and `devices` (may be empty), stopping early when `stop`
// is requested. Device errors are reported in `problems`; that device's
// figures stay 0, which leaves it out of AUTO's choice. Thread-safe with
// requests running on the same devices (which then share them).
CalibrationReport Calibrate(std::span<opencl_backend::Device* const> devices,
                            const CalibrationOptions& options, std::stop_token stop = {});

// One line for the startup log, naming every measured figure:
// "calibration: cpu (2 workers): fixed 2.1 us, copy 3.4 GB/s, scatter 0.8 GB/s;
//  opencl:0 pthread-...: fixed 61 us, upload 5.1 GB/s, ..., 0.42 s measuring".
// `labels` names the devices by index ("opencl:<name>").
std::string DescribeCalibration(const CalibrationReport& report,
                                std::span<const std::string> labels);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_CALIBRATION_H_
