// Host <-> device transfers of the first OpenCL device (issue 15 part 2), at
// 1 MiB and 64 MiB, next to what OpenCL itself reaches in the same run:
//   PinnedCopy/{h2d,d2h}   oclbw's pinned copy (../shared/gpu/oclbw.c): one
//                          clEnqueueWriteBuffer/ReadBuffer of the whole size
//                          from a mapped CL_MEM_ALLOC_HOST_PTR buffer
//   PageableCopy/{h2d,d2h} the same from malloc'd memory (the old upload path)
//   StagingDma/{h2d,d2h}   Device::StagingDma: the device's own DMA between its
//                          staging chunks and a device buffer (no host copy)
//   Upload, Download       Device::Upload/Download: the full transfer from or
//                          to pageable caller memory, the staging copy included
// bytes_per_second counts the bytes moved. Ratios: StagingDma / PinnedCopy of
// the same size and direction (targets: >= 0.8 at 64 MiB, >= 0.6 at 1 MiB).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/opencl/device.h"

namespace tensorop {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

opencl_backend::Device* FirstDevice() {
  static std::vector<std::unique_ptr<opencl_backend::Device>>* devices =
      new std::vector<std::unique_ptr<opencl_backend::Device>>(
          opencl_backend::OpenAllDevices(nullptr));
  return devices->empty() ? nullptr : devices->front().get();
}

// oclbw's copies: its own queue, a device buffer and pinned (or pageable)
// host memory of `bytes`.
void BM_OpenClCopy(benchmark::State& state, bool pinned, bool to_device) {
  opencl_backend::Device* device = FirstDevice();
  if (device == nullptr) {
    state.SkipWithError("no OpenCL device");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  cl_int error = CL_SUCCESS;
  cl_device_id id = device->id();
  cl_command_queue queue = clCreateCommandQueue(device->context(), id, 0, &error);
  cl_mem buffer = clCreateBuffer(device->context(), CL_MEM_READ_WRITE, bytes, nullptr, &error);
  cl_mem pin = nullptr;
  std::vector<std::byte> pageable;
  std::byte* host = nullptr;
  if (pinned) {
    pin = clCreateBuffer(device->context(), CL_MEM_ALLOC_HOST_PTR, bytes, nullptr, &error);
    host = static_cast<std::byte*>(clEnqueueMapBuffer(
        queue, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, nullptr, nullptr, &error));
  } else {
    pageable.assign(bytes, std::byte{1});
    host = pageable.data();
  }
  if (error != CL_SUCCESS || host == nullptr) {
    state.SkipWithError("OpenCL setup failed");
  } else {
    std::memset(host, 2, bytes);
    const auto copy = [&] {
      return to_device ? clEnqueueWriteBuffer(queue, buffer, CL_FALSE, 0, bytes, host, 0, nullptr,
                                              nullptr)
                       : clEnqueueReadBuffer(queue, buffer, CL_FALSE, 0, bytes, host, 0, nullptr,
                                             nullptr);
    };
    copy();
    clFinish(queue);
    for (auto _ : state) {
      if (copy() != CL_SUCCESS) state.SkipWithError("copy failed");
      clFinish(queue);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
  }
  if (pin != nullptr) {
    clEnqueueUnmapMemObject(queue, pin, host, 0, nullptr, nullptr);
    clFinish(queue);
    clReleaseMemObject(pin);
  }
  clReleaseMemObject(buffer);
  clReleaseCommandQueue(queue);
}

void BM_PinnedCopyH2D(benchmark::State& state) { BM_OpenClCopy(state, true, true); }
void BM_PinnedCopyD2H(benchmark::State& state) { BM_OpenClCopy(state, true, false); }
void BM_PageableCopyH2D(benchmark::State& state) { BM_OpenClCopy(state, false, true); }
void BM_PageableCopyD2H(benchmark::State& state) { BM_OpenClCopy(state, false, false); }

void BM_StagingDma(benchmark::State& state, bool to_device) {
  opencl_backend::Device* device = FirstDevice();
  if (device == nullptr) {
    state.SkipWithError("no OpenCL device");
    return;
  }
  const int64_t bytes = state.range(0);
  (void)device->StagingDma(bytes, to_device);  // staging and the buffer allocated outside
  for (auto _ : state) {
    absl::Status status = device->StagingDma(bytes, to_device);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
void BM_StagingDmaH2D(benchmark::State& state) { BM_StagingDma(state, true); }
void BM_StagingDmaD2H(benchmark::State& state) { BM_StagingDma(state, false); }

void BM_Transfer(benchmark::State& state, bool upload) {
  opencl_backend::Device* device = FirstDevice();
  if (device == nullptr) {
    state.SkipWithError("no OpenCL device");
    return;
  }
  std::vector<std::byte> host(static_cast<size_t>(state.range(0)), std::byte{3});
  const auto transfer = [&] { return upload ? device->Upload(host) : device->Download(host); };
  (void)transfer();
  for (auto _ : state) {
    absl::Status status = transfer();
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
void BM_Upload(benchmark::State& state) { BM_Transfer(state, true); }
void BM_Download(benchmark::State& state) { BM_Transfer(state, false); }

#define TRANSFER_SIZES ->Arg(kMiB)->Arg(64 * kMiB)->UseRealTime()->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_PinnedCopyH2D) TRANSFER_SIZES;
BENCHMARK(BM_StagingDmaH2D) TRANSFER_SIZES;
BENCHMARK(BM_PinnedCopyD2H) TRANSFER_SIZES;
BENCHMARK(BM_StagingDmaD2H) TRANSFER_SIZES;
BENCHMARK(BM_PageableCopyH2D) TRANSFER_SIZES;
BENCHMARK(BM_Upload) TRANSFER_SIZES;
BENCHMARK(BM_PageableCopyD2H) TRANSFER_SIZES;
BENCHMARK(BM_Download) TRANSFER_SIZES;

}  // namespace
}  // namespace tensorop

BENCHMARK_MAIN();
