#include "server/placement/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>

#include <oneapi/tbb/task_arena.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/operator.h"
#include "core/status_macros.h"
#include "kernels/tbb/execute.h"

namespace tensorop::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr int64_t kRowElements = 1024;  // float32 rows of 4 KiB
// Columns beside a copy's window, so its rows do not merge into one run: the
// copy is a 2-D strided copy, as most slices are.
constexpr int64_t kPadElements = 32;
constexpr int64_t kTinyElements = 64;  // the fixed-cost request: 256 bytes
constexpr int64_t kLadderStart = int64_t{64} << 10;
constexpr int kLadderGrowth = 4;
// A size whose median run takes this long is measured well enough; larger
// ones would only spend the budget.
constexpr double kEnoughSeconds = 0.02;
constexpr int kRunsPerSize = 3;
constexpr int kCpuFixedRuns = 64;
constexpr int kDeviceFixedRuns = 24;

// One request ready to run: its bytes, plan and output buffers. Held by
// pointer: the plan's views point into `inputs`.
struct Job {
  std::vector<std::vector<std::byte>> inputs;
  ExecutionPlan plan;
  std::vector<std::vector<std::byte>> outputs;
  std::vector<std::span<const std::byte>> input_spans;
  std::vector<const std::byte*> input_pointers;
  std::vector<std::byte*> output_pointers;
  RequestFootprint footprint;
  int64_t input_bytes = 0;
};

absl::StatusOr<std::unique_ptr<Job>> Planned(std::unique_ptr<Job> job, const OpRequest& request) {
  ASSIGN_OR_RETURN(job->plan, PlanOperator(request, Limits{}));
  for (const std::vector<std::byte>& input : job->inputs) {
    job->input_spans.emplace_back(input);
    job->input_pointers.push_back(input.data());
    job->input_bytes += static_cast<int64_t>(input.size());
  }
  for (const Layout& layout : job->plan.outputs) {
    job->outputs.emplace_back(static_cast<size_t>(layout.buffer_bytes()));
    job->output_pointers.push_back(job->outputs.back().data());
  }
  job->footprint =
      FootprintOf(job->plan, std::span<const std::span<const std::byte>>(job->input_spans));
  return job;
}

// A float32 slice [rows, columns] out of [rows, columns + kPadElements].
absl::StatusOr<std::unique_ptr<Job>> CopyJob(int64_t rows, int64_t columns) {
  auto job = std::make_unique<Job>();
  const int64_t width = columns + kPadElements;
  job->inputs.emplace_back(static_cast<size_t>(rows * width * 4), std::byte{1});
  OpRequest request{SliceAttrs{{0, kPadElements / 2}, {rows, columns}, {1, 1}},
                    {{"input", {TensorDesc{DType::kFloat32, {rows, width}, {}}, job->inputs[0]}}},
                    {{{rows, columns}, {}}}};
  return Planned(std::move(job), request);
}

// ScatterElements along axis 0 of float32 [rows, columns]: each row of
// updates to another row (reversed), no collisions.
absl::StatusOr<std::unique_ptr<Job>> ScatterJob(int64_t rows, int64_t columns) {
  auto job = std::make_unique<Job>();
  const size_t bytes = static_cast<size_t>(rows * columns * 4);
  job->inputs.emplace_back(bytes, std::byte{1});
  job->inputs.emplace_back(bytes);
  job->inputs.emplace_back(bytes, std::byte{2});
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t target = static_cast<int32_t>(rows - 1 - r);
    for (int64_t c = 0; c < columns; ++c) {
      std::memcpy(job->inputs[1].data() + (r * columns + c) * 4, &target, 4);
    }
  }
  const TensorDesc data{DType::kFloat32, {rows, columns}, {}};
  OpRequest request{ScatterElementsAttrs{0},
                    {{"input", {data, job->inputs[0]}},
                     {"indices", {TensorDesc{DType::kInt32, {rows, columns}, {}}, job->inputs[1]}},
                     {"updates", {data, job->inputs[2]}}},
                    {}};
  return Planned(std::move(job), request);
}

// Rows of kRowElements for about `bytes` of output.
int64_t RowsFor(int64_t bytes) { return std::max<int64_t>(1, bytes / (kRowElements * 4)); }

// One run's figures, in seconds: start to end, and per phase on a device.
struct Sample {
  double total = 0;
  double upload = 0;
  double kernel = 0;
  double download = 0;
};

// The median of one size's runs, per figure.
struct Point {
  int64_t output_bytes = 0;
  int64_t input_bytes = 0;
  Sample median;
};

Sample Median(std::vector<Sample> samples) {
  Sample median;
  for (double Sample::*field :
       {&Sample::total, &Sample::upload, &Sample::kernel, &Sample::download}) {
    std::vector<double> values;
    for (const Sample& s : samples) values.push_back(s.*field);
    const auto middle = static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), values.begin() + middle, values.end());
    median.*field = values[values.size() / 2];
  }
  return median;
}

// Seconds per byte of `field` between the two largest points (so what every
// run pays whatever its size cancels out), else over the one point; 0 when
// nothing was measured or time went backwards.
double SecondsPerByte(const std::vector<Point>& points, int64_t Point::*bytes,
                      double Sample::*field) {
  if (points.empty()) return 0;
  const Point& b = points.back();
  if (points.size() >= 2) {
    const Point& a = points[points.size() - 2];
    const double dt = b.median.*field - a.median.*field;
    const double db = static_cast<double>(b.*bytes - a.*bytes);
    if (dt > 0 && db > 0) return dt / db;
  }
  const double t = b.median.*field;
  return t > 0 && b.*bytes > 0 ? t / static_cast<double>(b.*bytes) : 0;
}

double RateOf(double seconds_per_byte) { return seconds_per_byte > 0 ? 1 / seconds_per_byte : 0; }

// A scatter request copies its input and then applies its updates: the
// scatter's own rate is what is left of its time per byte once the copy's is
// taken away (at least a twentieth of the whole, so a noisy copy figure cannot
// make scatters free).
double ScatterRate(double total_seconds_per_byte, double copy_rate) {
  if (!(total_seconds_per_byte > 0) || !(copy_rate > 0)) return 0;
  return RateOf(std::max(total_seconds_per_byte - 1 / copy_rate, total_seconds_per_byte / 20));
}

// The budget: phases share what is left, and a run starts only while its
// predicted time fits the phase's share.
class Meter {
 public:
  Meter(double budget_seconds, std::stop_token stop, CalibrationReport& report)
      : budget_(budget_seconds), stop_(std::move(stop)), report_(report) {}

  bool stopped() const { return stop_.stop_requested(); }

  // A phase of `phases_left` (this one included) may use its share of what is left.
  void BeginPhase(int phases_left) {
    const double left = std::max(0.0, budget_ - report_.measuring_seconds);
    phase_end_ = report_.measuring_seconds + left / std::max(1, phases_left);
  }

  // Whether a run predicted to take this long may start: never once the
  // budget is spent, so measuring_seconds <= budget + the longest run.
  bool Fits(double predicted_seconds) const {
    return !stopped() && report_.measuring_seconds < budget_ &&
           report_.measuring_seconds + predicted_seconds <= phase_end_;
  }

  // Runs `run(sample)` timed, counts its time, and fills sample.total.
  template <typename Run>
  absl::StatusOr<Sample> Time(Run run) {
    Sample sample;
    const Clock::time_point start = Clock::now();
    absl::Status status = run(sample);
    sample.total = SecondsSince(start);
    report_.measuring_seconds += sample.total;
    report_.longest_step_seconds = std::max(report_.longest_step_seconds, sample.total);
    if (!status.ok()) return status;
    return sample;
  }

 private:
  const double budget_;
  const std::stop_token stop_;
  CalibrationReport& report_;
  double phase_end_ = 0;
};

// The median time of up to `runs` runs of `run` on one job (0 when none fit).
template <typename Run>
absl::StatusOr<double> FixedSeconds(Meter& meter, int runs, Run run) {
  std::vector<Sample> samples;
  double predicted = 0;
  for (int i = 0; i < runs && meter.Fits(predicted); ++i) {
    ASSIGN_OR_RETURN(Sample sample, meter.Time(run));
    predicted = sample.total;
    samples.push_back(sample);
  }
  return samples.empty() ? 0.0 : Median(std::move(samples)).total;
}

// Runs jobs of growing output size (kLadderStart, x4, ... up to max_bytes)
// kRunsPerSize times each, until a size takes kEnoughSeconds or the next
// would not fit the phase. `make(rows)` builds a job; `run(job, sample)` runs it.
template <typename Make, typename Run>
absl::StatusOr<std::vector<Point>> Ladder(Meter& meter, int64_t max_bytes, Make make, Run run) {
  std::vector<Point> points;
  double predicted = 0;
  int64_t previous_bytes = 0;
  for (int64_t bytes = std::min(kLadderStart, max_bytes);; bytes *= kLadderGrowth) {
    bytes = std::min(bytes, max_bytes);
    if (previous_bytes > 0) {
      predicted *= static_cast<double>(bytes) / static_cast<double>(previous_bytes);
    }
    if (!meter.Fits(predicted)) break;
    ASSIGN_OR_RETURN(std::unique_ptr<Job> job, make(RowsFor(bytes)));
    std::vector<Sample> samples;
    while (static_cast<int>(samples.size()) < kRunsPerSize && meter.Fits(predicted)) {
      ASSIGN_OR_RETURN(Sample sample, meter.Time([&](Sample& s) { return run(*job, s); }));
      predicted = std::max(predicted, sample.total);
      samples.push_back(sample);
    }
    if (samples.empty()) break;
    Point point{job->footprint.output_bytes, job->input_bytes, Median(std::move(samples))};
    points.push_back(point);
    predicted = point.median.total;
    previous_bytes = bytes;
    if (point.median.total >= kEnoughSeconds || bytes >= max_bytes) break;
  }
  return points;
}

absl::Status CalibrateCpu(Meter& meter, const CalibrationOptions& options, int phases,
                          CalibrationReport& report) {
  CpuRates& cpu = report.model.cpu;
  cpu.workers = options.worker_threads;
  tbb::task_arena arena(std::max(1, options.worker_threads));
  const auto run = [&arena](Job& job, Sample&) {
    absl::Status status;
    arena.execute(
        [&] { status = tbb_backend::Execute(job.plan, job.input_pointers, job.output_pointers); });
    return status;
  };
  const Clock::time_point setup = Clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Job> tiny, CopyJob(1, kTinyElements));
  Sample ignored;
  RETURN_IF_ERROR(run(*tiny, ignored));  // wakes the arena's threads
  report.setup_seconds += SecondsSince(setup);

  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(cpu.fixed_seconds,
                   FixedSeconds(meter, kCpuFixedRuns, [&](Sample& s) { return run(*tiny, s); }));
  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(
      std::vector<Point> copies,
      Ladder(
          meter, options.max_bytes, [](int64_t rows) { return CopyJob(rows, kRowElements); }, run));
  cpu.copy_bytes_per_second = RateOf(SecondsPerByte(copies, &Point::output_bytes, &Sample::total));
  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(std::vector<Point> scatters,
                   Ladder(
                       meter, options.max_bytes,
                       [](int64_t rows) { return ScatterJob(rows, kRowElements); }, run));
  cpu.scatter_bytes_per_second = ScatterRate(
      SecondsPerByte(scatters, &Point::output_bytes, &Sample::total), cpu.copy_bytes_per_second);
  return absl::OkStatus();
}

absl::Status CalibrateDevice(Meter& meter, opencl_backend::Device& device,
                             const CalibrationOptions& options, int phases,
                             CalibrationReport& report, DeviceRates& rates) {
  const auto run = [&device](Job& job, Sample&) {
    return device.Execute(job.plan, job.input_spans, job.output_pointers, NeverStop);
  };
  // Phases timed apart (each waited for), as DeviceTimings measures them.
  const auto run_timed = [&device](Job& job, Sample& sample) {
    opencl_backend::DeviceTimings timings;
    RETURN_IF_ERROR(
        device.Execute(job.plan, job.input_spans, job.output_pointers, NeverStop, &timings));
    sample.upload = static_cast<double>(timings.upload_ns) * 1e-9;
    sample.kernel = static_cast<double>(timings.kernel_ns) * 1e-9;
    sample.download = static_cast<double>(timings.download_ns) * 1e-9;
    return absl::OkStatus();
  };
  // Builds the programs measured below; not part of the budget.
  const Clock::time_point setup = Clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<Job> tiny, CopyJob(1, kTinyElements));
  ASSIGN_OR_RETURN(std::unique_ptr<Job> tiny_scatter, ScatterJob(1, kTinyElements));
  Sample ignored;
  RETURN_IF_ERROR(run(*tiny, ignored));
  RETURN_IF_ERROR(run(*tiny_scatter, ignored));
  report.setup_seconds += SecondsSince(setup);

  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(rates.fixed_seconds,
                   FixedSeconds(meter, kDeviceFixedRuns, [&](Sample& s) { return run(*tiny, s); }));
  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(std::vector<Point> copies,
                   Ladder(
                       meter, options.max_bytes,
                       [](int64_t rows) { return CopyJob(rows, kRowElements); }, run_timed));
  rates.upload_bytes_per_second =
      RateOf(SecondsPerByte(copies, &Point::input_bytes, &Sample::upload));
  rates.download_bytes_per_second =
      RateOf(SecondsPerByte(copies, &Point::output_bytes, &Sample::download));
  rates.copy_bytes_per_second =
      RateOf(SecondsPerByte(copies, &Point::output_bytes, &Sample::kernel));
  meter.BeginPhase(phases--);
  ASSIGN_OR_RETURN(std::vector<Point> scatters,
                   Ladder(
                       meter, options.max_bytes,
                       [](int64_t rows) { return ScatterJob(rows, kRowElements); }, run_timed));
  rates.scatter_bytes_per_second = ScatterRate(
      SecondsPerByte(scatters, &Point::output_bytes, &Sample::kernel), rates.copy_bytes_per_second);
  return absl::OkStatus();
}

std::string Rate(double bytes_per_second) {
  if (!(bytes_per_second > 0)) return "not measured";
  return absl::StrFormat("%.3g GB/s", bytes_per_second * 1e-9);
}

std::string Micros(double seconds) {
  if (!(seconds > 0)) return "not measured";
  return absl::StrFormat("%.3g us", seconds * 1e6);
}

}  // namespace

CalibrationReport Calibrate(std::span<opencl_backend::Device* const> devices,
                            const CalibrationOptions& options, std::stop_token stop) {
  CalibrationReport report;
  report.model.devices.resize(devices.size());
  Meter meter(options.budget_seconds, std::move(stop), report);
  constexpr int kPhasesPerBackend = 3;
  int phases = kPhasesPerBackend * static_cast<int>(1 + devices.size());
  if (absl::Status cpu = CalibrateCpu(meter, options, phases, report); !cpu.ok()) {
    report.problems.push_back(absl::StrCat("cpu: ", cpu.message()));
  }
  phases -= kPhasesPerBackend;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (meter.stopped()) break;
    absl::Status status =
        CalibrateDevice(meter, *devices[i], options, phases, report, report.model.devices[i]);
    phases -= kPhasesPerBackend;
    if (!status.ok()) {
      report.model.devices[i] = DeviceRates{};  // a device that failed is not chosen
      report.problems.push_back(absl::StrCat("opencl:", i, ": ", status.message()));
    }
  }
  report.complete = report.model.CpuComplete();
  for (const DeviceRates& rates : report.model.devices) {
    report.complete = report.complete && rates.Complete();
  }
  if (meter.stopped()) {
    report.problems.push_back("stopped before the end (shutdown)");
  } else if (!report.complete && report.problems.empty()) {
    report.problems.push_back(absl::StrFormat(
        "the %.3g s budget ended before every figure was measured", options.budget_seconds));
  }
  return report;
}

std::string DescribeCalibration(const CalibrationReport& report,
                                std::span<const std::string> labels) {
  const CpuRates& cpu = report.model.cpu;
  std::string text = absl::StrCat(
      "calibration: cpu (", cpu.workers, " workers): fixed ", Micros(cpu.fixed_seconds), ", copy ",
      Rate(cpu.copy_bytes_per_second), ", scatter ", Rate(cpu.scatter_bytes_per_second));
  for (size_t i = 0; i < report.model.devices.size(); ++i) {
    const DeviceRates& rates = report.model.devices[i];
    absl::StrAppend(&text, "; ", i, " ", i < labels.size() ? labels[i] : "opencl", ": fixed ",
                    Micros(rates.fixed_seconds), ", upload ", Rate(rates.upload_bytes_per_second),
                    ", download ", Rate(rates.download_bytes_per_second), ", copy ",
                    Rate(rates.copy_bytes_per_second), ", scatter ",
                    Rate(rates.scatter_bytes_per_second));
  }
  absl::StrAppend(&text, absl::StrFormat("; %.3g s measuring, %.3g s building programs",
                                         report.measuring_seconds, report.setup_seconds));
  if (!report.complete) absl::StrAppend(&text, " (incomplete)");
  for (const std::string& problem : report.problems) absl::StrAppend(&text, "; ", problem);
  return text;
}

}  // namespace tensorop::server
