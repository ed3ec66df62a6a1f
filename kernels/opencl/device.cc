#include "kernels/opencl/device.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/sources.h"

namespace tensorop::opencl_backend {
namespace {

// Work-items per launch: between launches the stop check runs.
constexpr int64_t kItemsPerLaunch = int64_t{1} << 22;

// Releases a cl_mem when it goes out of scope.
struct Buffer {
  cl_mem mem = nullptr;
  Buffer() = default;
  explicit Buffer(cl_mem m) : mem(m) {}
  Buffer(Buffer&& other) noexcept : mem(other.mem) { other.mem = nullptr; }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(mem, other.mem);
    return *this;
  }
  ~Buffer() {
    if (mem != nullptr) clReleaseMemObject(mem);
  }
};


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

const char* WordType(int size) {
  switch (size) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
  }
}

absl::StatusOr<Buffer> CreateBuffer(cl_context context, cl_mem_flags flags, int64_t bytes,
                                    void* host, absl::string_view what) {
  cl_int error = CL_SUCCESS;
  // OpenCL has no empty buffers; an empty tensor gets one unused byte.
  cl_mem mem = clCreateBuffer(context, flags, static_cast<size_t>(std::max<int64_t>(bytes, 1)),
                              host, &error);
  RETURN_IF_ERROR(ClStatus(error, absl::StrCat("clCreateBuffer(", what, ")")));
  return Buffer(mem);
}

template <typename T>
absl::Status SetArg(cl_kernel kernel, cl_uint index, const T& value) {
  return ClStatus(clSetKernelArg(kernel, index, sizeof(T), &value),
                  absl::StrCat("clSetKernelArg(", index, ")"));
}

// Sets the kernel's arguments in order; the first failure is returned.
template <typename... Args>
absl::Status SetArgs(cl_kernel kernel, const Args&... args) {
  absl::Status status;
  cl_uint index = 0;
  ((status.ok() ? (status = SetArg(kernel, index++, args), 0) : 0), ...);
  return status;
}

// The `layout` argument of a kernel: dimension sizes and strides as longs.
// Never empty, so rank 0 still gets a buffer.
absl::StatusOr<Buffer> LayoutBuffer(cl_context context, std::vector<cl_long> layout,
                                    absl::string_view kernel) {
  layout.push_back(0);
  return CreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                      static_cast<int64_t>(layout.size() * sizeof(cl_long)), layout.data(),
                      absl::StrCat(kernel, " layout"));
}

// Byte strides → element strides (exact: every stride is a multiple).
std::vector<cl_long> InElements(const std::vector<int64_t>& bytes, int64_t width) {
  std::vector<cl_long> elements;
  for (int64_t b : bytes) elements.push_back(b / width);
  return elements;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> Device::Open(cl_platform_id platform,
                                                     cl_device_id device) {
  std::unique_ptr<Device> self(new Device());
  self->device_ = device;
  self->name_ = DeviceString(device, CL_DEVICE_NAME);
  self->platform_name_ = PlatformString(platform, CL_PLATFORM_NAME);
  cl_ulong max_alloc = 0;
  RETURN_IF_ERROR(ClStatus(clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                                           sizeof max_alloc, &max_alloc, nullptr),
                           "clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)"));
  self->max_buffer_bytes_ = static_cast<int64_t>(max_alloc);
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int error = CL_SUCCESS;
  self->context_ = clCreateContext(properties, 1, &device, nullptr, nullptr, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateContext"));
  self->queue_ = clCreateCommandQueue(self->context_, device, 0, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateCommandQueue"));
  return self;
}

PooledBuffer::~PooledBuffer() {
  if (mem_ != nullptr) owner_->ReturnBuffer(mem_, size_);
}

absl::StatusOr<PooledBuffer> Device::TakeBuffer(int64_t bytes, absl::string_view what) {
  size_t size = 256;
  while (static_cast<int64_t>(size) < bytes) size *= 2;
  // A size class past what the device allocates would turn a request it could
  // run into a failure: take those at their exact size.
  if (static_cast<int64_t>(size) > max_buffer_bytes_) {
    size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  }
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (auto found = free_buffers_.find(size); found != free_buffers_.end()) {
      cl_mem mem = found->second;
      free_buffers_.erase(found);
      pooled_bytes_ -= static_cast<int64_t>(size);
      return PooledBuffer(this, mem, size);
    }
  }
  cl_int error = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, size, nullptr, &error);
  RETURN_IF_ERROR(ClStatus(error, absl::StrCat("clCreateBuffer(", what, ")")));
  return PooledBuffer(this, mem, size);
}

void Device::ReturnBuffer(cl_mem mem, size_t size) {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (pooled_bytes_ + static_cast<int64_t>(size) <= kMaxPooledBytes) {
      free_buffers_.emplace(size, mem);
      pooled_bytes_ += static_cast<int64_t>(size);
      return;
    }
  }
  clReleaseMemObject(mem);
}

Device::~Device() {
  for (auto& [size, mem] : free_buffers_) clReleaseMemObject(mem);
  for (auto& [key, program] : programs_) clReleaseProgram(program);
  if (queue_ != nullptr) clReleaseCommandQueue(queue_);
  if (context_ != nullptr) clReleaseContext(context_);
}

absl::StatusOr<cl_program> Device::Program(Source source, int word_size, int index_size) {
  std::lock_guard<std::mutex> lock(programs_mutex_);
  const auto key = std::make_tuple(source, word_size, index_size);
  if (auto found = programs_.find(key); found != programs_.end()) return found->second;

  const char* text =
      source == Source::kStridedCopy ? kStridedCopyClSource : kScatterElementsClSource;
  cl_int error = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_, 1, &text, nullptr, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateProgramWithSource"));
  // index_size < 0 marks a signed index type: int/long; > 0 unsigned: uint/ulong.
  std::string options = absl::StrCat("-cl-std=CL1.2 -DWORD=", WordType(word_size));
  if (index_size != 0) {
    const bool is_signed = index_size < 0;
    const int width = is_signed ? -index_size : index_size;
    absl::StrAppend(&options, " -DINDEX=",
                    width == 4 ? (is_signed ? "int" : "uint") : (is_signed ? "long" : "ulong"));
  }
  error = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (error != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
    std::string log(log_size, '\0');
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, log_size, log.data(),
                          nullptr);
    clReleaseProgram(program);
    return absl::UnavailableError(absl::StrCat("clBuildProgram(", options, ") failed: ",
                                               ClErrorName(error), " (", error, "): ", log));
  }
  programs_.emplace(key, program);
  return program;
}

absl::StatusOr<ScopedKernel> Device::MakeKernel(Source source, int word_size, int index_size,
                                          const char* name) {
  ASSIGN_OR_RETURN(cl_program program, Program(source, word_size, index_size));
  ScopedKernel kernel;
  cl_int error = CL_SUCCESS;
  kernel.kernel = clCreateKernel(program, name, &error);
  RETURN_IF_ERROR(ClStatus(error, absl::StrCat("clCreateKernel(", name, ")")));
  return kernel;
}

absl::Status Device::RunCopy(const StridedCopy& copy, cl_mem src, cl_mem dst,
                             const StopCheck& stop) {
  if (copy.element_count == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(ScopedKernel kernel,
                   MakeKernel(Source::kStridedCopy, copy.element_size, 0, "strided_copy"));
  const int64_t width = copy.element_size;
  std::vector<cl_long> layout(copy.sizes.begin(), copy.sizes.end());
  for (const std::vector<int64_t>* strides : {&copy.src_strides, &copy.dst_strides}) {
    std::vector<cl_long> elements = InElements(*strides, width);
    layout.insert(layout.end(), elements.begin(), elements.end());
  }
  ASSIGN_OR_RETURN(Buffer layout_buffer, LayoutBuffer(context_, std::move(layout),
                                                      "strided_copy"));
  const cl_long count = copy.element_count;
  RETURN_IF_ERROR(SetArgs(kernel.kernel, src, dst, layout_buffer.mem,
                          static_cast<cl_int>(copy.sizes.size()),
                          static_cast<cl_long>(copy.src_offset / width),
                          static_cast<cl_long>(copy.dst_offset / width), count));
  for (int64_t first = 0; first < count; first += kItemsPerLaunch) {
    RETURN_IF_ERROR(stop());
    const size_t offset = static_cast<size_t>(first);
    const size_t items = static_cast<size_t>(std::min(kItemsPerLaunch, count - first));
    RETURN_IF_ERROR(ClStatus(clEnqueueNDRangeKernel(queue_, kernel.kernel, 1, &offset,
                                                    &items, nullptr, 0, nullptr, nullptr),
                             "clEnqueueNDRangeKernel(strided_copy)"));
    if (first + kItemsPerLaunch < count) {
      RETURN_IF_ERROR(ClStatus(clFinish(queue_), "clFinish"));
    }
  }
  return absl::OkStatus();
}

absl::Status Device::RunScatter(const ScatterWalk& walk, cl_mem indices, cl_mem updates,
                                cl_mem output, const StopCheck& stop) {
  const int index_key = walk.index_signed ? -walk.index_size : walk.index_size;
  ASSIGN_OR_RETURN(ScopedKernel kernel, MakeKernel(Source::kScatterElements, walk.element_size,
                                             index_key, "scatter_elements"));
  std::vector<cl_long> layout(walk.sizes.begin(), walk.sizes.end());
  for (const auto& [strides, width] :
       {std::pair{&walk.indices_strides, walk.index_size},
        std::pair{&walk.updates_strides, walk.element_size},
        std::pair{&walk.output_strides, walk.element_size}}) {
    std::vector<cl_long> elements = InElements(*strides, width);
    layout.insert(layout.end(), elements.begin(), elements.end());
  }
  ASSIGN_OR_RETURN(Buffer layout_buffer,
                   LayoutBuffer(context_, std::move(layout), "scatter_elements"));
  cl_long lines = 1;
  for (size_t d = 0; d < walk.sizes.size(); ++d) {
    if (static_cast<int>(d) != walk.axis_dim) lines *= walk.sizes[d];
  }
  const cl_long length = walk.axis_dim >= 0 ? walk.sizes[walk.axis_dim] : 1;
  // Launches of about kItemsPerLaunch updates: blocks of lines, and within
  // them ranges of the axis in ascending order (the last update must win).
  const cl_long lines_per_launch = std::min<cl_long>(lines, kItemsPerLaunch);
  const cl_long axis_per_launch = std::max<cl_long>(1, kItemsPerLaunch / lines_per_launch);
  bool first_launch = true;
  for (cl_long first_line = 0; first_line < lines; first_line += lines_per_launch) {
    const size_t offset = static_cast<size_t>(first_line);
    const size_t items = static_cast<size_t>(std::min(lines_per_launch, lines - first_line));
    for (cl_long begin = 0; begin < length; begin += axis_per_launch) {
      const cl_long end = std::min(length, begin + axis_per_launch);
      if (!first_launch) RETURN_IF_ERROR(ClStatus(clFinish(queue_), "clFinish"));
      first_launch = false;
      RETURN_IF_ERROR(stop());
      RETURN_IF_ERROR(SetArgs(kernel.kernel, indices, updates, output, layout_buffer.mem,
                              static_cast<cl_int>(walk.sizes.size()),
                              static_cast<cl_int>(walk.axis_dim),
                              static_cast<cl_long>(walk.axis_size),
                              static_cast<cl_long>(walk.output_axis_stride / walk.element_size),
                              lines, begin, end));
      RETURN_IF_ERROR(ClStatus(clEnqueueNDRangeKernel(queue_, kernel.kernel, 1, &offset, &items,
                                                      nullptr, 0, nullptr, nullptr),
                               "clEnqueueNDRangeKernel(scatter_elements)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Device::Execute(const ExecutionPlan& plan,
                             std::span<const std::span<const std::byte>> inputs,
                             std::span<std::byte* const> outputs, const StopCheck& stop,
                             DeviceTimings* timings) {
  // With timings asked for, each phase is waited for and timed on the host.
  auto phase_start = std::chrono::steady_clock::now();
  const auto end_phase = [&](int64_t DeviceTimings::*field) -> absl::Status {
    if (timings == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(ClStatus(clFinish(queue_), "clFinish"));
    const auto now = std::chrono::steady_clock::now();
    timings->*field +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - phase_start).count();
    phase_start = now;
    return absl::OkStatus();
  };
  if (inputs.size() != plan.input_names.size() || outputs.size() != plan.outputs.size()) {
    return absl::InternalError(absl::StrCat("plan for ", plan.op, " takes ",
                                            plan.input_names.size(), " inputs and ",
                                            plan.outputs.size(), " outputs"));
  }
  RETURN_IF_ERROR(stop());
  // Declared before the guard below, so they go back to the pool only after
  // the queue drained.
  std::vector<PooledBuffer> input_buffers;
  std::vector<PooledBuffer> output_buffers;
  // Whatever happens below, nothing may still be queued when this returns: the
  // host memory the commands read and write belongs to the caller.
  struct FinishOnExit {
    cl_command_queue queue;
    ~FinishOnExit() { clFinish(queue); }
  } finish_on_exit{queue_};

  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t bytes = static_cast<int64_t>(inputs[i].size());
    ASSIGN_OR_RETURN(PooledBuffer buffer,
                     TakeBuffer(bytes, absl::StrCat("input ", plan.input_names[i])));
    if (bytes > 0) {
      RETURN_IF_ERROR(ClStatus(clEnqueueWriteBuffer(queue_, buffer.mem(), CL_FALSE, 0,
                                                    static_cast<size_t>(bytes),
                                                    inputs[i].data(), 0, nullptr, nullptr),
                               "clEnqueueWriteBuffer"));
    }
    input_buffers.push_back(std::move(buffer));
  }
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const Layout& layout = plan.outputs[j];
    ASSIGN_OR_RETURN(PooledBuffer buffer,
                     TakeBuffer(layout.buffer_bytes(), absl::StrCat("output ", j)));
    // Padding must read as zero; a packed output is written whole by the kernels.
    if (layout.buffer_elements > layout.element_count) {
      const cl_uchar zero = 0;
      RETURN_IF_ERROR(ClStatus(
          clEnqueueFillBuffer(queue_, buffer.mem(), &zero, 1, 0,
                              static_cast<size_t>(layout.buffer_bytes()), 0, nullptr, nullptr),
          "clEnqueueFillBuffer"));
    }
    output_buffers.push_back(std::move(buffer));
  }
  RETURN_IF_ERROR(end_phase(&DeviceTimings::upload_ns));
  for (const StridedCopy& copy : plan.copies) {
    RETURN_IF_ERROR(RunCopy(copy, input_buffers[copy.input_slot].mem(),
                            output_buffers[copy.output_slot].mem(), stop));
  }
  for (const ScatterWalk& walk : plan.scatters) {
    RETURN_IF_ERROR(RunScatter(walk, input_buffers[walk.indices_slot].mem(),
                               input_buffers[walk.updates_slot].mem(),
                               output_buffers[walk.output_slot].mem(), stop));
  }
  RETURN_IF_ERROR(end_phase(&DeviceTimings::kernel_ns));
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const int64_t bytes = plan.outputs[j].buffer_bytes();
    if (bytes == 0) continue;
    RETURN_IF_ERROR(ClStatus(clEnqueueReadBuffer(queue_, output_buffers[j].mem(), CL_TRUE, 0,
                                                 static_cast<size_t>(bytes), outputs[j], 0,
                                                 nullptr, nullptr),
                             "clEnqueueReadBuffer"));
  }
  return end_phase(&DeviceTimings::download_ns);
}

std::vector<std::unique_ptr<Device>> OpenAllDevices(std::vector<std::string>* skipped) {
  std::vector<std::unique_ptr<Device>> devices;
  cl_uint platform_count = 0;
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) {
    return devices;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  clGetPlatformIDs(platform_count, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint device_count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) !=
            CL_SUCCESS ||
        device_count == 0) {
      continue;
    }
    std::vector<cl_device_id> ids(device_count);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, device_count, ids.data(), nullptr);
    for (cl_device_id id : ids) {
      absl::StatusOr<std::unique_ptr<Device>> device = Device::Open(platform, id);
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
