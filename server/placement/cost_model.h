// AUTO's cost model: measured rates per backend (plain data, filled by the
// calibration, server/placement/calibration.h) and pure functions predicting a request's
// time on each backend and picking the least. No devices, threads or gRPC here,
// so tests and benchmarks call the same decision the server makes.
#ifndef TENSOROP_SERVER_PLACEMENT_COST_MODEL_H_
#define TENSOROP_SERVER_PLACEMENT_COST_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/plan/byte_range.h"
#include "core/plan/plan.h"

namespace tensorop::server {

// What one request costs on the CPU workers (oneTBB), measured at the
// server's worker count. A rate of 0 means "not measured".
struct CpuRates {
  int workers = 0;
  double fixed_seconds = 0;             // a tiny request, start to end
  double copy_bytes_per_second = 0;     // output bytes of strided copies
  double scatter_bytes_per_second = 0;  // update bytes of ScatterElements
};

// What one request costs on one OpenCL device. A rate of 0: not measured.
struct DeviceRates {
  double fixed_seconds = 0;  // a tiny request: upload, launch, download, waits
  double upload_bytes_per_second = 0;
  double download_bytes_per_second = 0;
  double copy_bytes_per_second = 0;     // copy kernels, output bytes
  double scatter_bytes_per_second = 0;  // scatter kernel, update bytes
  // Every rate above was measured (a failed or cut-short calibration leaves
  // the device out of AUTO's choice).
  bool Complete() const {
    return fixed_seconds > 0 && upload_bytes_per_second > 0 && download_bytes_per_second > 0 &&
           copy_bytes_per_second > 0 && scatter_bytes_per_second > 0;
  }
};

struct CostModel {
  CpuRates cpu;
  std::vector<DeviceRates> devices = {};  // by device pool index
  bool CpuComplete() const {
    return cpu.fixed_seconds > 0 && cpu.copy_bytes_per_second > 0 &&
           cpu.scatter_bytes_per_second > 0;
  }
};

// Where an input's bytes live now: on the host (every input today), or
// already on a device (kept tensors, a later issue): then that device moves
// nothing for it.
inline constexpr int kOnHost = -1;

struct InputFootprint {
  int64_t bytes = 0;       // the byte range the plan reads
  int location = kOnHost;  // kOnHost or a device pool index
};

// What a request moves, independent of where it runs.
struct RequestFootprint {
  std::vector<InputFootprint> inputs = {};
  int64_t copy_bytes = 0;  // bytes the strided copies write
  // Of those, the runs a device uploads straight into the outputs (core's
  // InputsReadAsRuns): no copy there, only their upload.
  int64_t run_copy_bytes = 0;
  int64_t scatter_bytes = 0;  // element bytes the index walks move (scatter, gather)
  int64_t output_bytes = 0;   // output buffers, padding included (downloads)
};

// The byte range [begin, end) of input `slot` that `plan` reads (its copies
// and scatter walks: InputReadRanges), clamped to [0, input_bytes); {0, 0}
// when it reads none.
ByteRange PlanReadRange(const ExecutionPlan& plan, int slot, int64_t input_bytes);

// The footprint of `plan` over `input_bytes` (each input's length, by slot),
// every input on the host.
RequestFootprint FootprintOf(const ExecutionPlan& plan, std::span<const int64_t> input_bytes);
RequestFootprint FootprintOf(const ExecutionPlan& plan,
                             std::span<const std::span<const std::byte>> inputs);
// The same before the inputs are at hand: a valid plan reads inside them anyway.
RequestFootprint FootprintOf(const ExecutionPlan& plan);

// A backend AUTO may choose: the CPU, or device `index` of the pool.
inline constexpr int kCpuBackend = -1;

// Predicted seconds of `footprint` on `backend` (kCpuBackend or a device
// index) with `in_flight` requests already queued or running there: fixed
// cost, plus each input's bytes that must move to the backend (0 where it
// lives there already), plus the kernels at their measured rates, plus the
// download of the outputs for a device, plus `in_flight` times the device's
// fixed cost (a rough queue wait; the CPU's is 0: the request is already on a
// worker when AUTO decides). +infinity where the model lacks a rate.
double PredictSeconds(const CostModel& model, int backend, const RequestFootprint& footprint,
                      int in_flight = 0);

// A device as AUTO sees it at the moment of choosing.
struct DeviceLoad {
  bool available = true;  // healthy, with room in its queue
  int in_flight = 0;
};

// The backends predicted faster than the CPU, fastest first (device indices);
// empty: the CPU. `loads` is by device index (missing: available, idle). A
// caller takes the first device that has room at once and never waits for
// one: AUTO runs on the CPU otherwise.
std::vector<int> FasterThanCpu(const CostModel& model, const RequestFootprint& footprint,
                               std::span<const DeviceLoad> loads);

// The backend with the least predicted time: kCpuBackend or a device index.
int ChooseBackend(const CostModel& model, const RequestFootprint& footprint,
                  std::span<const DeviceLoad> loads);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_COST_MODEL_H_
