// Opening and closing a device: its context and three queues, found through
// the ICD loader. The rest of Device lives beside this file, one concern each:
// device_buffers.cc (resident and pooled buffers, the pinned staging pool),
// device_transfers.cc (host <-> device bytes through staging),
// device_programs.cc (the program and kernel cache), device_launches.cc (copy
// and scatter launches) and device_execute.cc (a plan's uploads, launches and
// downloads joined by events), as CLBlast keeps routines apart from kernels.
#include "kernels/opencl/device.h"

#include <algorithm>

#include "core/status_macros.h"

namespace tensorop::opencl_backend {
namespace {

// Staging comes in chunks of an eighth of the bound (at least two per request
// in flight overlap copy and DMA), at most this: big enough that a DMA's fixed
// cost is small next to its bytes.
constexpr int64_t kMaxStagingChunkBytes = int64_t{8} << 20;

// The launch table (device.h's LaunchTable), by kind of device. A CPU device
// (PoCL's here) keeps the sizes measured before the table existed: launches of
// 4 Mi words, the runtime's work-groups. A GPU (an H200 on NVIDIA's OpenCL,
// 2026-11-28, BENCHMARKS.md "GPU"): a 64 MiB copy is some 45 us there, so one
// launch of up to 16 Mi words (64 to 256 MiB) instead of four keeps the tail
// of each launch and the wait between them out of it (stride 2: 97 us in four
// launches, 64 in one); work-groups of the runtime's choice measured as fast
// as or faster than 256 x 1 (stride 2 59 against 64 us, reversed 45 and 45,
// the scatter 213 and 215); runs by clEnqueueCopyBuffer (44 us) rather than
// the kernel (47).
LaunchTable LaunchTableFor(cl_device_type type) {
  LaunchTable table;
  if ((type & CL_DEVICE_TYPE_GPU) != 0) {
    table.items_per_launch = int64_t{1} << 24;
    table.bytes_per_command = int64_t{256} << 20;
  }
  return table;
}

std::string DeviceString(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  clGetDeviceInfo(device, what, size, text.data(), nullptr);
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

std::string PlatformString(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) {
    return "";
  }
  std::string text(size, '\0');
  clGetPlatformInfo(platform, what, size, text.data(), nullptr);
  text.resize(text.find('\0') == std::string::npos ? text.size() : text.find('\0'));
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> Device::Open(cl_platform_id platform, cl_device_id device,
                                                     const DeviceOptions& options) {
  std::unique_ptr<Device> self(new Device());
  self->device_ = device;
  self->name_ = DeviceString(device, CL_DEVICE_NAME);
  self->platform_name_ = PlatformString(platform, CL_PLATFORM_NAME);
  cl_ulong max_alloc = 0;
  RETURN_IF_ERROR(ClStatus(
      clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, nullptr),
      "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)"));
  self->max_buffer_bytes_ = static_cast<int64_t>(max_alloc);
  cl_ulong global_memory = 0;
  RETURN_IF_ERROR(ClStatus(clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_memory,
                                           &global_memory, nullptr),
                           "clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_SIZE)"));
  self->global_memory_bytes_ = static_cast<int64_t>(global_memory);
  cl_device_type type = 0;
  cl_bool unified = CL_FALSE;
  RETURN_IF_ERROR(ClStatus(clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr),
                           "clGetDeviceInfo(CL_DEVICE_TYPE)"));
  // Deprecated by OpenCL 2.0 but answered by every 1.2 device; false if not.
  clGetDeviceInfo(device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, nullptr);
  self->host_memory_ = (type & CL_DEVICE_TYPE_CPU) != 0 || unified == CL_TRUE;
  self->launch_table_ = options.launch_table.value_or(LaunchTableFor(type));
  // transpose_copy's work-groups are 32 x 8.
  size_t max_group = 0;
  clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_group, &max_group, nullptr);
  if (max_group < 256) self->launch_table_.tiles = false;
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                              reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int error = CL_SUCCESS;
  self->context_ = clCreateContext(properties, 1, &device, nullptr, nullptr, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateContext"));
  self->profile_kernels_ = options.profile_kernels;
  self->queue_ = clCreateCommandQueue(
      self->context_, device, options.profile_kernels ? CL_QUEUE_PROFILING_ENABLE : 0, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateCommandQueue"));
  self->upload_queue_ = clCreateCommandQueue(self->context_, device, 0, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateCommandQueue(upload)"));
  self->download_queue_ = clCreateCommandQueue(self->context_, device, 0, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateCommandQueue(download)"));
  self->staging_limit_ = std::max<int64_t>(options.staging_bytes, 0);
  self->staging_chunk_bytes_ =
      std::clamp<int64_t>(self->staging_limit_ / 8, 1, kMaxStagingChunkBytes);
  if (self->staging_limit_ == 0) self->staging_chunk_bytes_ = 0;
  return self;
}

void Device::Drain() {
  for (cl_command_queue queue : {upload_queue_, queue_, download_queue_}) clFinish(queue);
}

Device::~Device() {
  for (const std::unique_ptr<StagingChunk>& chunk : staging_chunks_) {
    if (chunk->busy != nullptr) clReleaseEvent(chunk->busy);
    clEnqueueUnmapMemObject(upload_queue_, chunk->mem, chunk->host, 0, nullptr, nullptr);
  }
  if (upload_queue_ != nullptr) clFinish(upload_queue_);
  for (const std::unique_ptr<StagingChunk>& chunk : staging_chunks_) {
    clReleaseMemObject(chunk->mem);
  }
  for (auto& [size, mem] : free_buffers_) clReleaseMemObject(mem);
  for (auto& [key, kernels] : free_kernels_) {
    for (cl_kernel kernel : kernels) clReleaseKernel(kernel);
  }
  for (auto& [key, program] : programs_) clReleaseProgram(program);
  for (cl_command_queue queue : {queue_, upload_queue_, download_queue_}) {
    if (queue != nullptr) clReleaseCommandQueue(queue);
  }
  if (context_ != nullptr) clReleaseContext(context_);
}

std::vector<std::unique_ptr<Device>> OpenAllDevices(std::vector<std::string>* skipped,
                                                    const DeviceOptions& options) {
  std::vector<std::unique_ptr<Device>> devices;
  cl_uint platform_count = 0;
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) {
    return devices;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  clGetPlatformIDs(platform_count, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint device_count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) != CL_SUCCESS ||
        device_count == 0) {
      continue;
    }
    std::vector<cl_device_id> ids(device_count);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, device_count, ids.data(), nullptr);
    for (cl_device_id id : ids) {
      absl::StatusOr<std::unique_ptr<Device>> device = Device::Open(platform, id, options);
      if (device.ok()) {
        devices.push_back(std::move(*device));
      } else if (skipped != nullptr) {
        skipped->push_back(std::string(device.status().message()));
      }
    }
  }
  return devices;
}
}  // namespace tensorop::opencl_backend
