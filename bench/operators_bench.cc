// Each operator at 1 KiB, 1 MiB and 64 MiB (the layout operators: 32 MiB) of
// float32 output, on oneTBB and on the first OpenCL device (PoCL's CPU device here), beside a
// memcpy of the same bytes in the same run. bytes_per_second counts output bytes. Planning happens
// once, outside the timed loop. OpenCL figures include the transfers; the
// counters upload_ms, kernel_ms and download_ms break them out (host wall
// clock, each phase waited for). With TENSOROP_BENCH_PROFILE=1 in the
// environment the device records profiling events and kernel_device_ms is the
// kernel phase as the device saw it (the sum of its commands' START..END; GPU
// figures compare it with oclbw's events, bench/gpu/oclbw.c). With
// TENSOROP_BENCH_RESIDENT=1 the OpenCL rows' inputs are put on the device once,
// before the timed loop, as a handle keeps them: the kernel phase then reads
// them there, where a host input read only as runs (a contiguous Slice, a
// scatter's input) goes up straight into the output and has no device copy.
//
// About 700 lines, past the project's ~600: each operator's case is a Make
// function and a BM_ line beside the others', read as one table, and the GPU
// scripts (bench/gpu-measure.sh) filter this one binary's rows by name.
//
// AutoBest/<op>: per case, the median of 5 runs on oneTBB and on the device,
// the backend tensord's AUTO picks for it (server/placement/cost_model.h's decision,
// from this process's calibration, server/placement/calibration.h) and AUTO / best.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "core/operator.h"
#include "kernels/opencl/device.h"
#include "kernels/tbb/execute.h"
#include "oneapi/tbb/task_arena.h"
#include "server/placement/calibration.h"
#include "server/placement/cost_model.h"

namespace tensorop {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = kKiB * kKiB;
constexpr int64_t kRowElements = 1024;  // 4 KiB rows of float32

// Output shape [rows, columns] of float32 holding `bytes`.
std::vector<int64_t> OutputShape(int64_t bytes) {
  const int64_t elements = bytes / 4;
  const int64_t columns = std::min<int64_t>(elements, kRowElements);
  return {elements / columns, columns};
}

struct Prepared {
  std::vector<std::vector<std::byte>> inputs;
  OpRequest request;
  ExecutionPlan plan;
  std::vector<std::vector<std::byte>> outputs;
};

enum Backend { kTbb, kOpenCl };

// An environment variable's integer value, or `otherwise` when it is not set.
int64_t EnvInt(const char* name, int64_t otherwise) {
  const char* value = std::getenv(name);
  return value == nullptr || *value == '\0' ? otherwise : std::atoll(value);
}

// The first device; TENSOROP_BENCH_PROFILE=1 opens it profiling its kernels,
// TENSOROP_BENCH_GROUP_WIDTH and TENSOROP_BENCH_RUNS_BY_KERNEL (0 or 1)
// replace those fields of its launch table row (device.h's LaunchTable).
opencl_backend::Device* FirstDevice() {
  static std::vector<std::unique_ptr<opencl_backend::Device>>* devices = [] {
    opencl_backend::DeviceOptions options;
    options.profile_kernels = EnvInt("TENSOROP_BENCH_PROFILE", 0) == 1;
    auto* opened = new std::vector<std::unique_ptr<opencl_backend::Device>>(
        opencl_backend::OpenAllDevices(nullptr, options));
    const int64_t width = EnvInt("TENSOROP_BENCH_GROUP_WIDTH", -1);
    const int64_t runs = EnvInt("TENSOROP_BENCH_RUNS_BY_KERNEL", -1);
    if (!opened->empty() && (width >= 0 || runs >= 0)) {
      opencl_backend::LaunchTable table = opened->front()->launch_table();
      if (width >= 0) table.group_width = static_cast<size_t>(width);
      if (runs >= 0) table.runs_by_kernel = runs == 1;
      options.launch_table = table;
      opened->clear();
      *opened = opencl_backend::OpenAllDevices(nullptr, options);
    }
    return opened;
  }();
  return devices->empty() ? nullptr : devices->front().get();
}

// The inputs on `device`, written once (TENSOROP_BENCH_RESIDENT=1); empty
// otherwise or when one does not fit.
struct ResidentInputs {
  std::vector<std::unique_ptr<opencl_backend::ResidentBuffer>> buffers;
  std::vector<opencl_backend::ResidentInput> inputs;
};
ResidentInputs PutResident(opencl_backend::Device* device,
                           std::span<const std::span<const std::byte>> inputs) {
  ResidentInputs resident;
  if (device == nullptr || EnvInt("TENSOROP_BENCH_RESIDENT", 0) != 1) return resident;
  for (std::span<const std::byte> input : inputs) {
    absl::StatusOr<std::unique_ptr<opencl_backend::ResidentBuffer>> buffer =
        device->AllocateResident(std::max<int64_t>(1, static_cast<int64_t>(input.size())), false);
    if (!buffer.ok() || !device->WriteResident(**buffer, input, NeverStop).ok()) return {};
    resident.inputs.push_back({buffer->get(), 0});
    resident.buffers.push_back(std::move(*buffer));
  }
  return resident;
}

// With `phases`, the OpenCL run times its phases (DeviceTimings: each waited
// for); without, it runs as tensord runs it.
void RunPrepared(benchmark::State& state, Prepared& p, Backend backend, bool phases = true) {
  std::vector<const std::byte*> inputs;
  std::vector<std::span<const std::byte>> input_spans;
  for (auto& input : p.inputs) {
    inputs.push_back(input.data());
    input_spans.push_back(input);
  }
  std::vector<std::byte*> outputs;
  int64_t output_bytes = 0;
  for (auto& output : p.outputs) {
    outputs.push_back(output.data());
    output_bytes += static_cast<int64_t>(output.size());
  }
  opencl_backend::Device* device = backend == kOpenCl ? FirstDevice() : nullptr;
  if (backend == kOpenCl && device == nullptr) {
    state.SkipWithError("no OpenCL device");
    return;
  }
  const ResidentInputs resident = PutResident(device, input_spans);
  const opencl_backend::DeviceIo io{
      .inputs = input_spans, .resident_inputs = resident.inputs, .outputs = outputs};
  opencl_backend::DeviceTimings timings;
  if (device != nullptr) {  // build the programs outside the timed loop
    (void)device->ExecuteResident(p.plan, io, NeverStop);
  }
  for (auto _ : state) {
    absl::Status status = device == nullptr ? tbb_backend::Execute(p.plan, inputs, outputs)
                                            : device->ExecuteResident(p.plan, io, NeverStop,
                                                                      phases ? &timings : nullptr);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * output_bytes);
  if (device != nullptr && phases) {
    const double n = static_cast<double>(state.iterations()) * 1e6;
    state.counters["upload_ms"] = static_cast<double>(timings.upload_ns) / n;
    state.counters["kernel_ms"] = static_cast<double>(timings.kernel_ns) / n;
    state.counters["download_ms"] = static_cast<double>(timings.download_ns) / n;
    if (timings.kernel_commands > 0) {
      state.counters["kernel_device_ms"] = static_cast<double>(timings.kernel_device_ns) / n;
      state.counters["kernel_commands"] =
          static_cast<double>(timings.kernel_commands) / static_cast<double>(state.iterations());
    }
  }
}

std::vector<std::byte> RandomBytes(int64_t n) {
  std::vector<std::byte> bytes(n);
  std::mt19937 rng(1);
  for (auto& b : bytes) b = static_cast<std::byte>(rng());
  return bytes;
}

// Plans `request`, whose input tensors point into p.inputs, and allocates outputs.
void Plan(Prepared& p) {
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(p.request, {});
  if (!plan.ok()) {
    fprintf(stderr, "plan failed: %s\n", std::string(plan.status().message()).c_str());
    std::abort();
  }
  p.plan = std::move(*plan);
  for (const Layout& layout : p.plan.outputs) p.outputs.emplace_back(layout.buffer_bytes());
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<std::byte> src = RandomBytes(bytes), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

enum Window { kContiguous, kStrided, kReversed, kBroadcast, kTransposed };

// A slice whose output is [rows, columns]: rows from the middle of a taller
// input (contiguous), every other column of a twice-as-wide input (strided),
// the columns backwards (reversed), one row repeated (broadcast input), or a
// whole square input laid out column-major, so the copy transposes
// (transposed: [4096, 4096] at 64 MiB).
Prepared MakeSlice(int64_t bytes, Window window) {
  std::vector<int64_t> out = OutputShape(bytes);
  if (window == kTransposed) {
    const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(bytes / 4)));
    out = {side, side};
  }
  const int64_t rows = out[0], columns = out[1];
  Prepared p;
  TensorDesc desc{DType::kFloat32, {rows + 2, columns}, {}};
  SliceAttrs attrs{{1, 0}, {rows, columns}, {1, 1}};
  if (window == kStrided) {
    desc.sizes = {rows, 2 * columns};
    attrs = {{0, 0}, {rows, 2 * columns}, {1, 2}};
  } else if (window == kReversed) {
    desc.sizes = {rows, columns};
    attrs = {{0, 0}, {rows, columns}, {1, -1}};
  } else if (window == kBroadcast) {
    desc = {DType::kFloat32, {rows, columns}, {0, 1}};
    attrs = {{0, 0}, {rows, columns}, {1, 1}};
  } else if (window == kTransposed) {
    desc = {DType::kFloat32, {rows, columns}, {1, rows}};
    attrs = {{0, 0}, {rows, columns}, {1, 1}};
  }
  const int64_t input_elements = window == kBroadcast ? columns : desc.sizes[0] * desc.sizes[1];
  p.inputs.push_back(RandomBytes(input_elements * 4));
  p.request = {attrs, {{"input", {desc, p.inputs[0]}}}, {{out, {}}}};
  Plan(p);
  return p;
}

Prepared MakeStridedSlice(int64_t bytes, Window window) {
  const std::vector<int64_t> out = OutputShape(bytes);
  const int64_t rows = out[0], columns = out[1];
  Prepared p;
  TensorDesc desc{DType::kFloat32, {rows + 2, columns}, {}};
  StridedSliceAttrs attrs;
  attrs.begin = {1, 0};
  attrs.end = {rows + 1, columns};
  if (window == kStrided) {
    desc.sizes = {rows, 2 * columns};
    attrs.begin = {0, 0};
    attrs.end = {rows, 2 * columns};
    attrs.stride = {1, 2};
  } else if (window == kReversed) {
    desc.sizes = {rows, columns};
    attrs.begin = {0, -1};
    attrs.end = {rows, 0};
    attrs.stride = {1, -1};
    attrs.end_mask = {0, 1};
  }
  p.inputs.push_back(RandomBytes(desc.sizes[0] * desc.sizes[1] * 4));
  p.request = {attrs, {{"input", {desc, p.inputs[0]}}}, {}};
  Plan(p);
  return p;
}

// Two outputs of equal size: halves of the rows (contiguous) or of the columns
// (strided: each output row is half an input row).
Prepared MakeSplit(int64_t bytes, Window window) {
  const std::vector<int64_t> out = OutputShape(bytes);
  const int64_t rows = out[0], columns = out[1];
  Prepared p;
  TensorDesc desc{DType::kFloat32, {rows, columns}, {}};
  p.inputs.push_back(RandomBytes(rows * columns * 4));
  if (window == kContiguous && rows >= 2) {
    p.request = {SplitAttrs{0},
                 {{"input", {desc, p.inputs[0]}}},
                 {{{rows / 2, columns}, {}}, {{rows - rows / 2, columns}, {}}}};
  } else {
    p.request = {SplitAttrs{1},
                 {{"input", {desc, p.inputs[0]}}},
                 {{{rows, columns / 2}, {}}, {{rows, columns - columns / 2}, {}}}};
  }
  Plan(p);
  return p;
}

// Every row of updates lands on a row chosen by a permutation (axis 0).
Prepared MakeScatter(int64_t bytes) {
  const std::vector<int64_t> out = OutputShape(bytes);
  const int64_t rows = out[0], columns = out[1];
  Prepared p;
  std::vector<int32_t> permutation(rows);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), std::mt19937(3));
  std::vector<int32_t> indices(rows * columns);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) indices[r * columns + c] = permutation[r];
  }
  p.inputs.push_back(RandomBytes(rows * columns * 4));
  p.inputs.emplace_back(reinterpret_cast<std::byte*>(indices.data()),
                        reinterpret_cast<std::byte*>(indices.data() + indices.size()));
  p.inputs.push_back(RandomBytes(rows * columns * 4));
  TensorDesc data_desc{DType::kFloat32, {rows, columns}, {}};
  TensorDesc index_desc{DType::kInt32, {rows, columns}, {}};
  p.request = {ScatterElementsAttrs{0},
               {{"input", {data_desc, p.inputs[0]}},
                {"indices", {index_desc, p.inputs[1]}},
                {"updates", {data_desc, p.inputs[2]}}},
               {}};
  Plan(p);
  return p;
}

// A [rows, columns] float32 matrix of `bytes` with rows of up to 2048 (32 MiB:
// [4096, 2048]), the shape the layout operators' targets name.
std::vector<int64_t> MatrixShape(int64_t bytes) {
  const int64_t elements = bytes / 4;
  const int64_t columns = std::min<int64_t>(elements, 2048);
  return {elements / columns, columns};
}

// The matrix transposed: a copy that reads with a stride of a whole row.
Prepared MakeTranspose(int64_t bytes) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  Prepared p;
  p.inputs.push_back(RandomBytes(bytes));
  p.request = {
      TransposeAttrs{{1, 0}}, {{"input", {{DType::kFloat32, shape, {}}, p.inputs[0]}}}, {}};
  Plan(p);
  return p;
}

// The matrix flattened from an input that is no window of the output: rows in
// a padded pitch (strided) or column-major (transposed); contiguous: a packed
// input, its window copied.
Prepared MakeReshape(int64_t bytes, Window window) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  const int64_t rows = shape[0], columns = shape[1];
  TensorDesc desc{DType::kFloat32, shape, {}};
  int64_t input_elements = rows * columns;
  if (window == kStrided) {
    desc.strides = {columns + 16, 1};
    input_elements = rows * (columns + 16);
  } else if (window == kTransposed) {
    desc.strides = {1, rows};
  }
  Prepared p;
  p.inputs.push_back(RandomBytes(input_elements * 4));
  p.request = {ReshapeAttrs{{rows * columns}}, {{"input", {desc, p.inputs[0]}}}, {}};
  Plan(p);
  return p;
}

// One row broadcast to the whole matrix.
Prepared MakeExpand(int64_t bytes) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  Prepared p;
  p.inputs.push_back(RandomBytes(shape[1] * 4));
  p.request = {
      ExpandAttrs{shape}, {{"input", {{DType::kFloat32, {1, shape[1]}, {}}, p.inputs[0]}}}, {}};
  Plan(p);
  return p;
}

// The matrix made of a quarter of it tiled twice each way: rows of half the
// matrix's width, each read once per repeat.
Prepared MakeTile(int64_t bytes) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  const std::vector<int64_t> quarter = {std::max<int64_t>(shape[0] / 2, 1), shape[1] / 2};
  Prepared p;
  p.inputs.push_back(RandomBytes(quarter[0] * quarter[1] * 4));
  p.request = {TileAttrs{{shape[0] / quarter[0], 2}},
               {{"input", {{DType::kFloat32, quarter, {}}, p.inputs[0]}}},
               {}};
  Plan(p);
  return p;
}

// The matrix gathered by a shuffled permutation of its rows (axis 0: each
// output row one index and one run) or of its columns (axis 1: an index per
// element), int64 indices as ONNX models send them.
Prepared MakeGather(int64_t bytes, int64_t axis) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  std::vector<int64_t> indices(static_cast<size_t>(shape[axis]));
  std::iota(indices.begin(), indices.end(), 0);
  std::shuffle(indices.begin(), indices.end(), std::mt19937(5));
  Prepared p;
  p.inputs.push_back(RandomBytes(bytes));
  p.inputs.emplace_back(reinterpret_cast<std::byte*>(indices.data()),
                        reinterpret_cast<std::byte*>(indices.data() + indices.size()));
  p.request = {GatherAttrs{axis},
               {{"input", {{DType::kFloat32, shape, {}}, p.inputs[0]}},
                {"indices", {{DType::kInt64, {shape[axis]}, {}}, p.inputs[1]}}},
               {}};
  Plan(p);
  return p;
}

// Each row of the matrix reordered by its own random columns (int32 indices):
// take_along_axis after an argsort.
Prepared MakeGatherElements(int64_t bytes) {
  const std::vector<int64_t> shape = MatrixShape(bytes);
  std::mt19937 rng(7);
  std::vector<int32_t> indices(static_cast<size_t>(shape[0] * shape[1]));
  for (int32_t& index : indices) index = static_cast<int32_t>(rng() % shape[1]);
  Prepared p;
  p.inputs.push_back(RandomBytes(bytes));
  p.inputs.emplace_back(reinterpret_cast<std::byte*>(indices.data()),
                        reinterpret_cast<std::byte*>(indices.data() + indices.size()));
  p.request = {GatherElementsAttrs{1},
               {{"input", {{DType::kFloat32, shape, {}}, p.inputs[0]}},
                {"indices", {{DType::kInt32, shape, {}}, p.inputs[1]}}},
               {}};
  Plan(p);
  return p;
}

// The matrix joined from 8 inputs along rows (axis 0: each input one run) or
// along columns (axis 1: each output row 8 runs, one per input), as ONNX
// models concatenate channels.
Prepared MakeJoin(int64_t bytes, int64_t axis) {
  constexpr int64_t kInputs = 8;
  std::vector<int64_t> part = MatrixShape(bytes);
  part[static_cast<size_t>(axis)] = std::max<int64_t>(part[static_cast<size_t>(axis)] / kInputs, 1);
  Prepared p;
  p.request.attrs = JoinAttrs{axis};
  for (int64_t k = 0; k < kInputs; ++k) p.inputs.push_back(RandomBytes(part[0] * part[1] * 4));
  for (int64_t k = 0; k < kInputs; ++k) {
    p.request.inputs.push_back({absl::StrCat("inputs_", k),
                                {{DType::kFloat32, part, {}}, p.inputs[static_cast<size_t>(k)]}});
  }
  Plan(p);
  return p;
}

// The matrix as a pad's output: a border of 2 rows and 16 columns around the
// input, in one of the four modes (a float32 value in constant mode).
Prepared MakePad(int64_t bytes, int64_t mode) {
  static constexpr const char* kModes[] = {"constant", "edge", "reflect", "symmetric"};
  const std::vector<int64_t> shape = MatrixShape(bytes);
  const std::vector<int64_t> border = {std::min<int64_t>(2, (shape[0] - 2) / 2),
                                       std::min<int64_t>(16, (shape[1] - 2) / 2)};
  const std::vector<int64_t> inner = {shape[0] - 2 * border[0], shape[1] - 2 * border[1]};
  Prepared p;
  p.inputs.push_back(RandomBytes(inner[0] * inner[1] * 4));
  p.request = {
      PadAttrs{
          .start_padding = border, .end_padding = border, .mode = kModes[mode], .value = "0.5"},
      {{"input", {{DType::kFloat32, inner, {}}, p.inputs[0]}}},
      {}};
  Plan(p);
  return p;
}

// Arguments: bytes, window, backend (0 oneTBB, 1 OpenCL).
void BM_Slice(benchmark::State& state) {
  Prepared p = MakeSlice(state.range(0), static_cast<Window>(state.range(1)));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
void BM_StridedSlice(benchmark::State& state) {
  Prepared p = MakeStridedSlice(state.range(0), static_cast<Window>(state.range(1)));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
void BM_Split(benchmark::State& state) {
  Prepared p = MakeSplit(state.range(0), static_cast<Window>(state.range(1)));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
// A whole Slice on the device as tensord runs it, its phases not timed
// apart: the small request's figure. Arguments: bytes, window.
void BM_SliceWhole(benchmark::State& state) {
  Prepared p = MakeSlice(state.range(0), static_cast<Window>(state.range(1)));
  RunPrepared(state, p, kOpenCl, /*phases=*/false);
}
// Arguments: bytes, backend.
void BM_ScatterElements(benchmark::State& state) {
  Prepared p = MakeScatter(state.range(0));
  RunPrepared(state, p, static_cast<Backend>(state.range(1)));
}

// Arguments: bytes, backend.
void BM_Transpose(benchmark::State& state) {
  Prepared p = MakeTranspose(state.range(0));
  RunPrepared(state, p, static_cast<Backend>(state.range(1)));
}
// Arguments: bytes, window, backend.
void BM_Reshape(benchmark::State& state) {
  Prepared p = MakeReshape(state.range(0), static_cast<Window>(state.range(1)));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
// Arguments: bytes, backend.
void BM_Expand(benchmark::State& state) {
  Prepared p = MakeExpand(state.range(0));
  RunPrepared(state, p, static_cast<Backend>(state.range(1)));
}
// Arguments: bytes (of the output), backend.
void BM_Tile(benchmark::State& state) {
  Prepared p = MakeTile(state.range(0));
  RunPrepared(state, p, static_cast<Backend>(state.range(1)));
}
// Arguments: bytes, axis, backend.
void BM_Gather(benchmark::State& state) {
  Prepared p = MakeGather(state.range(0), state.range(1));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
// Arguments: bytes, backend.
void BM_GatherElements(benchmark::State& state) {
  Prepared p = MakeGatherElements(state.range(0));
  RunPrepared(state, p, static_cast<Backend>(state.range(1)));
}
// Arguments: bytes, axis, backend.
void BM_Join(benchmark::State& state) {
  Prepared p = MakeJoin(state.range(0), state.range(1));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}
// Arguments: bytes, mode (0 constant, 1 edge, 2 reflect, 3 symmetric), backend.
void BM_Pad(benchmark::State& state) {
  Prepared p = MakePad(state.range(0), state.range(1));
  RunPrepared(state, p, static_cast<Backend>(state.range(2)));
}

// The calibration tensord would run on this host at oneTBB's default
// concurrency (the cores this process may use), once per process.
const server::CalibrationReport& Calibration() {
  static const server::CalibrationReport* report = [] {
    std::vector<opencl_backend::Device*> devices;
    std::vector<std::string> labels;
    if (FirstDevice() != nullptr) {
      devices.push_back(FirstDevice());
      labels.push_back("opencl:" + FirstDevice()->name());
    }
    auto* calibrated = new server::CalibrationReport(
        server::Calibrate(devices, {.worker_threads = tbb::this_task_arena::max_concurrency()}));
    fprintf(stderr, "%s\n", server::DescribeCalibration(*calibrated, labels).c_str());
    return calibrated;
  }();
  return *report;
}

// The median wall time of `runs` calls of `run`.
template <typename Run>
double MedianSeconds(int runs, Run run) {
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Counters: cpu_ms and opencl_ms (medians of 5), auto_opencl (1 when AUTO
// picks the device), auto_over_best; the reported time is AUTO's.
void AutoBest(benchmark::State& state, Prepared& p) {
  constexpr int kRuns = 5;
  opencl_backend::Device* device = FirstDevice();
  if (device == nullptr) {
    state.SkipWithError("no OpenCL device");
    return;
  }
  const server::CalibrationReport& calibration = Calibration();
  std::vector<const std::byte*> inputs;
  std::vector<std::span<const std::byte>> input_spans;
  for (auto& input : p.inputs) {
    inputs.push_back(input.data());
    input_spans.push_back(input);
  }
  std::vector<std::byte*> outputs;
  for (auto& output : p.outputs) outputs.push_back(output.data());
  const int choice =
      server::ChooseBackend(calibration.model, server::FootprintOf(p.plan, input_spans), {});
  absl::Status status = device->Execute(p.plan, input_spans, outputs, NeverStop);  // builds
  double cpu = 0, opencl = 0;
  for (auto _ : state) {
    cpu = MedianSeconds(kRuns, [&] {
      if (absl::Status s = tbb_backend::Execute(p.plan, inputs, outputs); !s.ok()) status = s;
    });
    opencl = MedianSeconds(kRuns, [&] {
      if (absl::Status s = device->Execute(p.plan, input_spans, outputs, NeverStop); !s.ok()) {
        status = s;
      }
    });
    state.SetIterationTime(choice == server::kCpuBackend ? cpu : opencl);
  }
  if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
  const double chosen = choice == server::kCpuBackend ? cpu : opencl;
  state.counters["cpu_ms"] = cpu * 1e3;
  state.counters["opencl_ms"] = opencl * 1e3;
  state.counters["auto_opencl"] = choice == server::kCpuBackend ? 0 : 1;
  state.counters["auto_over_best"] = chosen / std::min(cpu, opencl);
}

void BM_AutoBestSlice(benchmark::State& state) {
  Prepared p = MakeSlice(state.range(0), static_cast<Window>(state.range(1)));
  AutoBest(state, p);
}
void BM_AutoBestStridedSlice(benchmark::State& state) {
  Prepared p = MakeStridedSlice(state.range(0), static_cast<Window>(state.range(1)));
  AutoBest(state, p);
}
void BM_AutoBestSplit(benchmark::State& state) {
  Prepared p = MakeSplit(state.range(0), static_cast<Window>(state.range(1)));
  AutoBest(state, p);
}
void BM_AutoBestScatterElements(benchmark::State& state) {
  Prepared p = MakeScatter(state.range(0));
  AutoBest(state, p);
}

const std::vector<int64_t> kSizes = {kKiB, kMiB, 64 * kMiB};

BENCHMARK(BM_Memcpy)
    ->ArgsProduct({{kKiB, kMiB, 32 * kMiB, 64 * kMiB}})
    ->ArgNames({"bytes"})
    ->UseRealTime();
BENCHMARK(BM_Slice)
    ->ArgsProduct({kSizes,
                   {kContiguous, kStrided, kReversed, kBroadcast, kTransposed},
                   {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "window", "backend"})
    ->UseRealTime();
BENCHMARK(BM_SliceWhole)
    ->ArgsProduct({{kKiB, kMiB}, {kContiguous, kReversed}})
    ->ArgNames({"bytes", "window"})
    ->UseRealTime();
BENCHMARK(BM_StridedSlice)
    ->ArgsProduct({kSizes, {kContiguous, kStrided, kReversed}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "window", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Split)
    ->ArgsProduct({kSizes, {kContiguous, kStrided}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "window", "backend"})
    ->UseRealTime();
BENCHMARK(BM_ScatterElements)
    ->ArgsProduct({kSizes, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "backend"})
    ->UseRealTime();

// The layout operators at the sizes their targets name (32 MiB), beside
// BM_Memcpy's 32 MiB.
const std::vector<int64_t> kLayoutSizes = {kKiB, kMiB, 32 * kMiB};
BENCHMARK(BM_Transpose)
    ->ArgsProduct({kLayoutSizes, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Reshape)
    ->ArgsProduct({kLayoutSizes, {kContiguous, kStrided, kTransposed}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "window", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Expand)
    ->ArgsProduct({kLayoutSizes, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "backend"})
    ->UseRealTime();
// The copy operators, at the same sizes (of their outputs).
BENCHMARK(BM_Tile)
    ->ArgsProduct({kLayoutSizes, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Gather)
    ->ArgsProduct({kLayoutSizes, {0, 1}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "axis", "backend"})
    ->UseRealTime();
BENCHMARK(BM_GatherElements)
    ->ArgsProduct({kLayoutSizes, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Join)
    ->ArgsProduct({kLayoutSizes, {0, 1}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "axis", "backend"})
    ->UseRealTime();
BENCHMARK(BM_Pad)
    ->ArgsProduct({kLayoutSizes, {0, 1, 2, 3}, {kTbb, kOpenCl}})
    ->ArgNames({"bytes", "mode", "backend"})
    ->UseRealTime();

BENCHMARK(BM_AutoBestSlice)
    ->ArgsProduct({kSizes, {kContiguous, kStrided, kReversed, kBroadcast}})
    ->ArgNames({"bytes", "window"})
    ->Iterations(1)
    ->Repetitions(1)  // each run already takes medians of 5
    ->UseManualTime();
BENCHMARK(BM_AutoBestStridedSlice)
    ->ArgsProduct({kSizes, {kContiguous, kStrided, kReversed}})
    ->ArgNames({"bytes", "window"})
    ->Iterations(1)
    ->Repetitions(1)  // each run already takes medians of 5
    ->UseManualTime();
BENCHMARK(BM_AutoBestSplit)
    ->ArgsProduct({kSizes, {kContiguous, kStrided}})
    ->ArgNames({"bytes", "window"})
    ->Iterations(1)
    ->Repetitions(1)  // each run already takes medians of 5
    ->UseManualTime();
BENCHMARK(BM_AutoBestScatterElements)
    ->ArgsProduct({kSizes})
    ->ArgNames({"bytes"})
    ->Iterations(1)
    ->Repetitions(1)  // each run already takes medians of 5
    ->UseManualTime();

}  // namespace
}  // namespace tensorop

BENCHMARK_MAIN();
