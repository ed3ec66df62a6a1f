#include "kernels/opencl/device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"
#include "core/plan/byte_range.h"
#include "core/status_macros.h"
#include "kernels/opencl/sources.h"

namespace tensorop::opencl_backend {
namespace {

// Work-items per launch: between launches the stop check runs.
constexpr int64_t kItemsPerLaunch = int64_t{1} << 22;

// Uploads start at a multiple of this below the first byte a plan reads, so a
// rebased offset keeps its alignment modulo any word a kernel may use.
constexpr int64_t kUploadAlignment = 256;
// Staging comes in chunks of an eighth of the bound (at least two per request
// in flight overlap copy and DMA), at most this: big enough that a DMA's fixed
// cost is small next to its bytes.
constexpr int64_t kMaxStagingChunkBytes = int64_t{8} << 20;
// A transfer moves in pieces of half its size (two, so the host copy of one
// overlaps the DMA of the other), at least this (a DMA's fixed cost, a few
// microseconds on a GPU, stays small next to its bytes) and at most a chunk.
constexpr int64_t kMinPieceBytes = int64_t{512} << 10;
// Requests moving fewer bytes (inputs read plus outputs) than this run on the
// compute queue alone.
constexpr int64_t kOneQueueBytes = int64_t{64} << 10;

// Releases a cl_event when it goes out of scope.
struct ScopedEvent {
  cl_event event = nullptr;
  ScopedEvent() = default;
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  ~ScopedEvent() {
    if (event != nullptr) clReleaseEvent(event);
  }
};

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
                                                     cl_device_id device,
                                                     const DeviceOptions& options) {
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

absl::StatusOr<Device::StagingChunk*> Device::TakeStaging(bool wait, const StopCheck& stop) {
  StagingChunk* chunk = nullptr;
  bool grow = false;
  while (chunk == nullptr && !grow) {
    {
      std::unique_lock<std::mutex> lock(staging_mutex_);
      if (!staging_free_.empty()) {
        chunk = staging_free_.front();
        staging_free_.pop_front();
        break;
      }
      if (staging_allocated_ + staging_chunk_bytes_ <= staging_limit_) {
        staging_allocated_ += staging_chunk_bytes_;
        grow = true;
        break;
      }
      if (!wait) return nullptr;
      // Chunks come back as soon as their holders' copies are done; the
      // timeout only bounds how late `stop` is seen.
      staging_returned_.wait_for(lock, std::chrono::milliseconds(10));
    }
    RETURN_IF_ERROR(stop());
  }
  if (grow) {
    const size_t size = static_cast<size_t>(staging_chunk_bytes_);
    auto fresh = std::make_unique<StagingChunk>();
    cl_int error = CL_SUCCESS;
    fresh->mem = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size,
                                nullptr, &error);
    absl::Status status = ClStatus(error, "clCreateBuffer(staging)");
    if (status.ok()) {
      // Mapped once, for the chunk's life: its pointer is pinned memory the
      // DMA engine reads and writes directly.
      fresh->host = static_cast<std::byte*>(
          clEnqueueMapBuffer(upload_queue_, fresh->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                             size, 0, nullptr, nullptr, &error));
      status = ClStatus(error, "clEnqueueMapBuffer(staging)");
      if (!status.ok()) clReleaseMemObject(fresh->mem);
    }
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (!status.ok()) {
      staging_allocated_ -= staging_chunk_bytes_;
      staging_returned_.notify_one();
      return status;
    }
    chunk = fresh.get();
    staging_chunks_.push_back(std::move(fresh));
  }
  if (chunk->busy != nullptr) {
    // A failed DMA left nothing running either: its status was its user's.
    clWaitForEvents(1, &chunk->busy);
    clReleaseEvent(chunk->busy);
    chunk->busy = nullptr;
  }
  return chunk;
}

void Device::ReturnStaging(StagingChunk* chunk, cl_event busy) {
  {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    chunk->busy = busy;
    staging_free_.push_back(chunk);
  }
  staging_returned_.notify_one();
}

int64_t Device::PieceBytes(int64_t bytes) const {
  return std::min(staging_chunk_bytes_, std::max(bytes / 2, kMinPieceBytes));
}

absl::Status Device::UploadBytes(cl_command_queue queue, const std::byte* host, int64_t bytes,
                                 cl_mem dst, const StopCheck& stop) {
  if (bytes <= 0) return absl::OkStatus();
  if (staging_chunk_bytes_ == 0) {
    return ClStatus(clEnqueueWriteBuffer(queue, dst, CL_TRUE, 0,
                                         static_cast<size_t>(bytes), host, 0, nullptr, nullptr),
                    "clEnqueueWriteBuffer");
  }
  // Each piece: copied into a staging chunk, then its DMA queued and flushed,
  // so the copy of the next piece (into another chunk) overlaps it.
  const int64_t piece = PieceBytes(bytes);
  for (int64_t done = 0; done < bytes; done += piece) {
    RETURN_IF_ERROR(stop());
    const size_t n = static_cast<size_t>(std::min(piece, bytes - done));
    ASSIGN_OR_RETURN(StagingChunk * chunk, TakeStaging(/*wait=*/true, stop));
    std::memcpy(chunk->host, host + done, n);
    cl_event written = nullptr;
    const cl_int error =
        clEnqueueWriteBuffer(queue, dst, CL_FALSE, static_cast<size_t>(done), n, chunk->host, 0,
                             nullptr, &written);
    if (error == CL_SUCCESS) clFlush(queue);
    ReturnStaging(chunk, error == CL_SUCCESS ? written : nullptr);
    RETURN_IF_ERROR(ClStatus(error, "clEnqueueWriteBuffer"));
  }
  return absl::OkStatus();
}

absl::Status Device::DownloadBytes(cl_command_queue queue, cl_mem src, int64_t bytes,
                                   std::byte* host, cl_event ready, const StopCheck& stop) {
  if (bytes <= 0) return absl::OkStatus();
  const cl_uint waits = ready != nullptr ? 1 : 0;
  const cl_event* wait_list = ready != nullptr ? &ready : nullptr;
  if (staging_chunk_bytes_ == 0) {
    return ClStatus(clEnqueueReadBuffer(queue, src, CL_TRUE, 0,
                                        static_cast<size_t>(bytes), host, waits, wait_list,
                                        nullptr),
                    "clEnqueueReadBuffer");
  }
  // Two pieces in flight: the DMA of piece i+1 runs while piece i is copied
  // out of staging into `host`.
  struct Pending {
    StagingChunk* chunk;
    cl_event read;
    int64_t offset;
    size_t size;
  };
  std::deque<Pending> pending;
  const int64_t piece = PieceBytes(bytes);
  const auto finish_oldest = [&]() -> absl::Status {
    const Pending oldest = pending.front();
    pending.pop_front();
    const cl_int error = clWaitForEvents(1, &oldest.read);
    if (error == CL_SUCCESS) std::memcpy(host + oldest.offset, oldest.chunk->host, oldest.size);
    clReleaseEvent(oldest.read);
    ReturnStaging(oldest.chunk, nullptr);
    return ClStatus(error, "clEnqueueReadBuffer");
  };
  absl::Status status;
  for (int64_t done = 0; status.ok() && done < bytes;) {
    status = stop();
    if (!status.ok()) break;
    // Only a caller holding nothing may wait for a chunk (see TakeStaging).
    absl::StatusOr<StagingChunk*> chunk = TakeStaging(/*wait=*/pending.empty(), stop);
    if (!chunk.ok()) {
      status = chunk.status();
      break;
    }
    if (*chunk == nullptr) {
      status = finish_oldest();
      continue;
    }
    const size_t n = static_cast<size_t>(std::min(piece, bytes - done));
    cl_event read = nullptr;
    const cl_int error =
        clEnqueueReadBuffer(queue, src, CL_FALSE, static_cast<size_t>(done), n, (*chunk)->host,
                            waits, wait_list, &read);
    if (error != CL_SUCCESS) {
      ReturnStaging(*chunk, nullptr);
      status = ClStatus(error, "clEnqueueReadBuffer");
      break;
    }
    clFlush(queue);
    pending.push_back({*chunk, read, done, n});
    done += static_cast<int64_t>(n);
    if (pending.size() >= 2) status = finish_oldest();
  }
  while (!pending.empty()) {
    if (status.ok()) {
      status = finish_oldest();
    } else {
      // Back with their reads still pending: the next borrower waits for them.
      ReturnStaging(pending.front().chunk, pending.front().read);
      pending.pop_front();
    }
  }
  return status;
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
  for (auto& [key, program] : programs_) clReleaseProgram(program);
  for (cl_command_queue queue : {queue_, upload_queue_, download_queue_}) {
    if (queue != nullptr) clReleaseCommandQueue(queue);
  }
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
  // With timings asked for, each phase is waited for (its last event) and
  // timed on the host.
  auto phase_start = std::chrono::steady_clock::now();
  const auto end_phase = [&](int64_t DeviceTimings::*field, cl_event last) -> absl::Status {
    if (timings == nullptr) return absl::OkStatus();
    if (last != nullptr) RETURN_IF_ERROR(ClStatus(clWaitForEvents(1, &last), "clWaitForEvents"));
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
  // every command of this request completed.
  std::vector<PooledBuffer> input_buffers;
  std::vector<PooledBuffer> output_buffers;
  // On an error path commands of this request may still be queued on any of
  // the three queues: drain them all before the buffers go back. (Staging
  // chunks carry their own events; the caller's memory is only touched by
  // host copies, which are done.)
  struct DrainOnError {
    Device* device;
    bool clean = false;
    ~DrainOnError() {
      if (!clean) device->Drain();
    }
  } drain{this};
  ScopedEvent uploaded;
  ScopedEvent computed;

  // Only the bytes the plan reads go up; kernels address the device buffer
  // from `upload_begin`.
  const std::vector<ByteRange> ranges = InputReadRanges(plan);
  std::vector<int64_t> upload_begin(inputs.size(), 0);
  std::vector<int64_t> upload_bytes(inputs.size(), 0);
  int64_t moved = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ByteRange range = i < ranges.size() ? ranges[i] : ByteRange{};
    const int64_t size = static_cast<int64_t>(inputs[i].size());
    if (range.begin < 0 || range.end > size) {
      return absl::InternalError(absl::StrCat("plan for ", plan.op, " reads bytes [", range.begin,
                                              ", ", range.end, ") of input ",
                                              plan.input_names[i], " of ", size, " bytes"));
    }
    upload_begin[i] = range.empty() ? 0 : range.begin - range.begin % kUploadAlignment;
    upload_bytes[i] = range.empty() ? 0 : range.end - upload_begin[i];
    moved += upload_bytes[i];
  }
  for (const Layout& layout : plan.outputs) moved += layout.buffer_bytes();
  // A small request stays on the compute queue: for it the events joining
  // three queues cost more than any overlap gains.
  const bool one_queue = moved < kOneQueueBytes;
  cl_command_queue up = one_queue ? queue_ : upload_queue_;
  cl_command_queue down = one_queue ? queue_ : download_queue_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSIGN_OR_RETURN(PooledBuffer buffer,
                     TakeBuffer(upload_bytes[i], absl::StrCat("input ", plan.input_names[i])));
    RETURN_IF_ERROR(
        UploadBytes(up, inputs[i].data() + upload_begin[i], upload_bytes[i], buffer.mem(), stop));
    uploaded_bytes_.fetch_add(upload_bytes[i], std::memory_order_relaxed);
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
          clEnqueueFillBuffer(up, buffer.mem(), &zero, 1, 0,
                              static_cast<size_t>(layout.buffer_bytes()), 0, nullptr, nullptr),
          "clEnqueueFillBuffer"));
    }
    output_buffers.push_back(std::move(buffer));
  }
  // In-order queues: a marker completes after everything queued before it.
  // On one queue only a timing needs it.
  if (!one_queue || timings != nullptr) {
    RETURN_IF_ERROR(ClStatus(clEnqueueMarkerWithWaitList(up, 0, nullptr, &uploaded.event),
                             "clEnqueueMarkerWithWaitList(upload)"));
    RETURN_IF_ERROR(ClStatus(clFlush(up), "clFlush(upload)"));
  }
  RETURN_IF_ERROR(end_phase(&DeviceTimings::upload_ns, uploaded.event));

  // Kernels wait for this request's uploads, not for the host.
  if (!one_queue) {
    RETURN_IF_ERROR(ClStatus(clEnqueueBarrierWithWaitList(queue_, 1, &uploaded.event, nullptr),
                             "clEnqueueBarrierWithWaitList"));
  }
  for (const StridedCopy& copy : plan.copies) {
    StridedCopy rebased = copy;
    rebased.src_offset -= upload_begin[copy.input_slot];
    RETURN_IF_ERROR(RunCopy(rebased, input_buffers[copy.input_slot].mem(),
                            output_buffers[copy.output_slot].mem(), stop));
  }
  for (const ScatterWalk& walk : plan.scatters) {
    // Walks address indices and updates from byte 0, which their ranges hold.
    if (upload_begin[walk.indices_slot] != 0 || upload_begin[walk.updates_slot] != 0) {
      return absl::InternalError("scatter inputs were uploaded from past their byte 0");
    }
    RETURN_IF_ERROR(RunScatter(walk, input_buffers[walk.indices_slot].mem(),
                               input_buffers[walk.updates_slot].mem(),
                               output_buffers[walk.output_slot].mem(), stop));
  }
  RETURN_IF_ERROR(ClStatus(clEnqueueMarkerWithWaitList(queue_, 0, nullptr, &computed.event),
                           "clEnqueueMarkerWithWaitList(compute)"));
  RETURN_IF_ERROR(ClStatus(clFlush(queue_), "clFlush"));
  RETURN_IF_ERROR(end_phase(&DeviceTimings::kernel_ns, computed.event));

  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    RETURN_IF_ERROR(DownloadBytes(down, output_buffers[j].mem(), plan.outputs[j].buffer_bytes(),
                                  outputs[j], one_queue ? nullptr : computed.event, stop));
  }
  // With every download done (or none to do), this request's kernels, and so
  // its uploads, completed too: the buffers may go back to the pool.
  RETURN_IF_ERROR(ClStatus(clWaitForEvents(1, &computed.event), "clWaitForEvents"));
  drain.clean = true;
  return end_phase(&DeviceTimings::download_ns, nullptr);
}

absl::Status Device::StagingDma(int64_t bytes, bool to_device) {
  if (staging_chunk_bytes_ == 0) {
    return absl::FailedPreconditionError("the device has no staging (staging_bytes 0)");
  }
  ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "staging probe"));
  // As many chunks as the transfer spans and the pool gives at once (the
  // first waited for, the rest only if free); DMAs cycle through them.
  std::vector<StagingChunk*> held;
  const int64_t piece = PieceBytes(bytes);
  const int64_t wanted = (bytes + piece - 1) / piece;
  while (static_cast<int64_t>(held.size()) < std::max<int64_t>(wanted, 1)) {
    absl::StatusOr<StagingChunk*> chunk = TakeStaging(held.empty(), NeverStop);
    if (!chunk.ok() || *chunk == nullptr) break;
    held.push_back(*chunk);
  }
  if (held.empty()) return absl::UnavailableError("no staging chunk for the probe");
  cl_command_queue queue = to_device ? upload_queue_ : download_queue_;
  absl::Status status;
  for (int64_t done = 0, k = 0; status.ok() && done < bytes; done += piece, ++k) {
    const size_t n = static_cast<size_t>(std::min(piece, bytes - done));
    std::byte* host = held[static_cast<size_t>(k) % held.size()]->host;
    status = to_device
                 ? ClStatus(clEnqueueWriteBuffer(queue, buffer.mem(), CL_FALSE,
                                                 static_cast<size_t>(done), n, host, 0, nullptr,
                                                 nullptr),
                            "clEnqueueWriteBuffer")
                 : ClStatus(clEnqueueReadBuffer(queue, buffer.mem(), CL_FALSE,
                                                static_cast<size_t>(done), n, host, 0, nullptr,
                                                nullptr),
                            "clEnqueueReadBuffer");
  }
  const absl::Status finished = ClStatus(clFinish(queue), "clFinish");
  for (StagingChunk* chunk : held) ReturnStaging(chunk, nullptr);
  return status.ok() ? finished : status;
}

absl::Status Device::Upload(std::span<const std::byte> host) {
  const int64_t bytes = static_cast<int64_t>(host.size());
  ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "upload probe"));
  const absl::Status status =
      UploadBytes(upload_queue_, host.data(), bytes, buffer.mem(), NeverStop);
  const absl::Status finished = ClStatus(clFinish(upload_queue_), "clFinish");
  return status.ok() ? finished : status;
}

absl::Status Device::Download(std::span<std::byte> host) {
  const int64_t bytes = static_cast<int64_t>(host.size());
  ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "download probe"));
  const absl::Status status =
      DownloadBytes(download_queue_, buffer.mem(), bytes, host.data(), nullptr, NeverStop);
  if (!status.ok()) clFinish(download_queue_);
  return status;
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
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) !=
            CL_SUCCESS ||
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
