// One OpenCL device: its context, command queue and program cache, and the
// execution of plans on it. Devices are found through the ICD loader.
#ifndef TENSOROP_KERNELS_OPENCL_DEVICE_H_
#define TENSOROP_KERNELS_OPENCL_DEVICE_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"
#include "kernels/opencl/cl_error.h"

namespace tensorop::opencl_backend {

// Where an Execute() spent its time, when the caller asks: uploads (and the
// zeroing of padded outputs), kernels, downloads. Asking serialises the phases.
struct DeviceTimings {
  int64_t upload_ns = 0;
  int64_t kernel_ns = 0;
  int64_t download_ns = 0;
};

// Releases a cl_kernel when it goes out of scope. One per launch sequence:
// clSetKernelArg on a kernel shared between requests would race.
struct ScopedKernel {
  cl_kernel kernel = nullptr;
  ScopedKernel() = default;
  ScopedKernel(ScopedKernel&& other) noexcept : kernel(other.kernel) { other.kernel = nullptr; }
  ScopedKernel& operator=(ScopedKernel&&) = delete;
  ~ScopedKernel() {
    if (kernel != nullptr) clReleaseKernel(kernel);
  }
};

class Device;

// A device buffer on loan from its device's pool; back to the pool when it goes
// out of scope. Requests share one in-order queue, so a returned buffer's
// pending commands complete before the next borrower's.
class PooledBuffer {
 public:
  PooledBuffer(Device* owner, cl_mem mem, size_t size) : owner_(owner), mem_(mem), size_(size) {}
  PooledBuffer(PooledBuffer&& other) noexcept
      : owner_(other.owner_), mem_(other.mem_), size_(other.size_) {
    other.mem_ = nullptr;
  }
  PooledBuffer& operator=(PooledBuffer&&) = delete;
  ~PooledBuffer();
  cl_mem mem() const { return mem_; }

 private:
  Device* owner_;
  cl_mem mem_;
  size_t size_;
};

class Device {
 public:
  // Creates the context and queue for `device`.
  static absl::StatusOr<std::unique_ptr<Device>> Open(cl_platform_id platform,
                                                      cl_device_id device);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // CL_DEVICE_NAME, e.g. "pthread-skylake-avx512-AMD EPYC 7B13".
  const std::string& name() const { return name_; }
  const std::string& platform_name() const { return platform_name_; }
  // The largest single buffer the device allocates.
  int64_t max_buffer_bytes() const { return max_buffer_bytes_; }
  // Bytes of free buffers kept for reuse (at most kMaxPooledBytes).
  int64_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    return pooled_bytes_;
  }

  // Uploads the inputs, runs the plan's kernels in order and downloads the
  // outputs into `outputs` (each plan.outputs[i].buffer_bytes(), zeroed by the
  // caller). `stop` is asked between launches. Device errors are UNAVAILABLE
  // naming the OpenCL call and code.
  absl::Status Execute(const ExecutionPlan& plan,
                       std::span<const std::span<const std::byte>> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop,
                       DeviceTimings* timings = nullptr);

 private:
  friend class PooledBuffer;
  Device() = default;
  // A buffer of at least `bytes`, from the pool when one of its size class is
  // free. Sizes round up to powers of two so buffers are reused across requests.
  absl::StatusOr<PooledBuffer> TakeBuffer(int64_t bytes, absl::string_view what);
  void ReturnBuffer(cl_mem mem, size_t size);
  enum class Source { kStridedCopy, kScatterElements };
  // Built once per (source, word size, index size) and reused.
  absl::StatusOr<cl_program> Program(Source source, int word_size, int index_size);
  // A fresh kernel object of a cached program.
  absl::StatusOr<ScopedKernel> MakeKernel(Source source, int word_size, int index_size,
                                          const char* name);
  absl::Status RunCopy(const StridedCopy& copy, cl_mem src, cl_mem dst,
                       const StopCheck& stop);
  absl::Status RunScatter(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                          cl_mem output, const StopCheck& stop);

  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string name_;
  std::string platform_name_;
  int64_t max_buffer_bytes_ = 0;
  // Free buffers by size; bounded so an idle device holds little memory.
  static constexpr int64_t kMaxPooledBytes = int64_t{256} << 20;
  std::mutex pool_mutex_;
  std::multimap<size_t, cl_mem> free_buffers_;
  int64_t pooled_bytes_ = 0;
  std::mutex programs_mutex_;
  std::map<std::tuple<Source, int, int>, cl_program> programs_;
};

// Every device of every platform the ICD loader knows. No platform is an empty
// list, not an error; a device that fails to open is skipped with its reason in
// `skipped`.
std::vector<std::unique_ptr<Device>> OpenAllDevices(std::vector<std::string>* skipped);

}  // namespace tensorop::opencl_backend

#endif  // TENSOROP_KERNELS_OPENCL_DEVICE_H_
