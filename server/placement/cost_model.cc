#include "server/placement/cost_model.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "kernels/opencl/device.h"

namespace tensorop::server {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Seconds to move `bytes` at `rate` bytes per second; never without a rate.
double Seconds(int64_t bytes, double rate) {
  if (bytes <= 0) return 0;
  if (!(rate > 0)) return kNever;
  return static_cast<double>(bytes) / rate;
}

}  // namespace

namespace {

// `range` within [0, input_bytes); {0, 0} when empty.
ByteRange Clamped(ByteRange range, int64_t input_bytes) {
  if (range.empty()) return {};
  range.begin = std::clamp<int64_t>(range.begin, 0, input_bytes);
  range.end = std::clamp<int64_t>(range.end, range.begin, input_bytes);
  return range;
}

}  // namespace

ByteRange PlanReadRange(const ExecutionPlan& plan, int slot, int64_t input_bytes) {
  const std::vector<ByteRange> ranges = InputReadRanges(plan);
  if (slot < 0 || static_cast<size_t>(slot) >= ranges.size()) return {};
  return Clamped(ranges[static_cast<size_t>(slot)], input_bytes);
}

RequestFootprint FootprintOf(const ExecutionPlan& plan, std::span<const int64_t> input_bytes) {
  RequestFootprint footprint;
  const std::vector<ByteRange> ranges = InputReadRanges(plan);  // once: plans may have many slots
  for (size_t slot = 0; slot < input_bytes.size(); ++slot) {
    const ByteRange range = slot < ranges.size() ? ranges[slot] : ByteRange();
    footprint.inputs.push_back({Clamped(range, input_bytes[slot]).size(), kOnHost});
  }
  const std::vector<bool> read_as_runs =
      InputsReadAsRuns(plan, opencl_backend::kSeveralRunsMinBytes);
  for (const StridedCopy& copy : plan.copies) {
    const int64_t bytes = copy.element_count * copy.element_size;
    footprint.copy_bytes += bytes;
    if (read_as_runs[static_cast<size_t>(copy.input_slot)]) footprint.run_copy_bytes += bytes;
  }
  for (const StridedCopy& fill : plan.fills) {
    footprint.copy_bytes += fill.element_count * fill.element_size;
  }
  for (const ScatterWalk& walk : plan.scatters) {
    footprint.scatter_bytes += walk.element_count * walk.element_size;
  }
  // A gathered element costs what a scattered one does: an index read, then
  // an element moved where it says (calibrated on scatters).
  for (const GatherWalk& walk : plan.gathers) {
    footprint.scatter_bytes += walk.element_count * walk.element_size;
  }
  for (const Layout& output : plan.outputs) footprint.output_bytes += output.buffer_bytes();
  return footprint;
}

RequestFootprint FootprintOf(const ExecutionPlan& plan,
                             std::span<const std::span<const std::byte>> inputs) {
  std::vector<int64_t> bytes;
  bytes.reserve(inputs.size());
  for (std::span<const std::byte> input : inputs)
    bytes.push_back(static_cast<int64_t>(input.size()));
  return FootprintOf(plan, bytes);
}

RequestFootprint FootprintOf(const ExecutionPlan& plan) {
  const std::vector<int64_t> unbounded(plan.input_names.size(),
                                       std::numeric_limits<int64_t>::max());
  return FootprintOf(plan, unbounded);
}

double PredictSeconds(const CostModel& model, int backend, const RequestFootprint& footprint,
                      int in_flight) {
  // An input kept on device d comes back over d's download first.
  const auto download_from = [&model](int device, int64_t bytes) {
    if (device < 0 || static_cast<size_t>(device) >= model.devices.size()) return kNever;
    return Seconds(bytes, model.devices[device].download_bytes_per_second);
  };
  if (backend == kCpuBackend) {
    if (!model.CpuComplete()) return kNever;
    double seconds = model.cpu.fixed_seconds +
                     Seconds(footprint.copy_bytes, model.cpu.copy_bytes_per_second) +
                     Seconds(footprint.scatter_bytes, model.cpu.scatter_bytes_per_second);
    for (const InputFootprint& input : footprint.inputs) {
      if (input.location != kOnHost) seconds += download_from(input.location, input.bytes);
    }
    return seconds;
  }
  if (backend < 0 || static_cast<size_t>(backend) >= model.devices.size()) return kNever;
  const DeviceRates& rates = model.devices[backend];
  if (!rates.Complete()) return kNever;
  double seconds =
      rates.fixed_seconds * (1.0 + std::max(0, in_flight)) +
      Seconds(footprint.copy_bytes - footprint.run_copy_bytes, rates.copy_bytes_per_second) +
      Seconds(footprint.scatter_bytes, rates.scatter_bytes_per_second) +
      Seconds(footprint.output_bytes, rates.download_bytes_per_second);
  for (const InputFootprint& input : footprint.inputs) {
    if (input.location == backend) continue;
    if (input.location != kOnHost) seconds += download_from(input.location, input.bytes);
    seconds += Seconds(input.bytes, rates.upload_bytes_per_second);
  }
  return seconds;
}

std::vector<int> FasterThanCpu(const CostModel& model, const RequestFootprint& footprint,
                               std::span<const DeviceLoad> loads) {
  // Without the CPU's figures nothing is compared: AUTO stays on the CPU
  // until the model is whole.
  if (!model.CpuComplete()) return {};
  const double cpu = PredictSeconds(model, kCpuBackend, footprint);
  std::vector<std::pair<double, int>> faster;
  for (size_t i = 0; i < model.devices.size(); ++i) {
    const DeviceLoad load = i < loads.size() ? loads[i] : DeviceLoad{};
    if (!load.available) continue;
    const double seconds = PredictSeconds(model, static_cast<int>(i), footprint, load.in_flight);
    if (seconds < cpu) faster.emplace_back(seconds, static_cast<int>(i));
  }
  std::stable_sort(faster.begin(), faster.end());
  std::vector<int> order;
  for (const auto& [seconds, index] : faster) order.push_back(index);
  return order;
}

int ChooseBackend(const CostModel& model, const RequestFootprint& footprint,
                  std::span<const DeviceLoad> loads) {
  std::vector<int> order = FasterThanCpu(model, footprint, loads);
  return order.empty() ? kCpuBackend : order.front();
}

}  // namespace tensorop::server
