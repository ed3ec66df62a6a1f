// Device memory: resident buffers (a kept tensor, exactly its size), the pool
// of request buffers (power-of-two size classes, bounded), and the pool of
// pinned staging chunks transfers go through.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/scoped_event.h"

namespace tensorop::opencl_backend {

ResidentBuffer::~ResidentBuffer() {
  if (mem_ != nullptr) clReleaseMemObject(mem_);
}

absl::StatusOr<std::unique_ptr<ResidentBuffer>> Device::AllocateResident(int64_t bytes, bool zero) {
  if (bytes > max_buffer_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("a ", bytes, "-byte tensor is larger than ",
                                                     name_, " allocates at once (",
                                                     max_buffer_bytes_, " bytes)"));
  }
  cl_int error = CL_SUCCESS;
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, size, nullptr, &error);
  if (error == CL_MEM_OBJECT_ALLOCATION_FAILURE || error == CL_OUT_OF_RESOURCES ||
      error == CL_OUT_OF_HOST_MEMORY) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, " has no room for a ", bytes, "-byte tensor"));
  }
  RETURN_IF_ERROR(ClStatus(error, "clCreateBuffer(resident)"));
  auto buffer = std::make_unique<ResidentBuffer>(mem, bytes);
  if (zero && bytes > 0) {
    const cl_uchar value = 0;
    RETURN_IF_ERROR(
        ClStatus(clEnqueueFillBuffer(upload_queue_, mem, &value, 1, 0, size, 0, nullptr, nullptr),
                 "clEnqueueFillBuffer(resident)"));
    RETURN_IF_ERROR(ClStatus(clFinish(upload_queue_), "clFinish(resident)"));
  }
  return buffer;
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
    fresh->mem =
        clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr, &error);
    absl::Status status = ClStatus(error, "clCreateBuffer(staging)");
    if (status.ok()) {
      // Mapped once, for the chunk's life: its pointer is pinned memory the
      // DMA engine reads and writes directly.
      fresh->host = static_cast<std::byte*>(clEnqueueMapBuffer(upload_queue_, fresh->mem, CL_TRUE,
                                                               CL_MAP_READ | CL_MAP_WRITE, 0, size,
                                                               0, nullptr, nullptr, &error));
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
}  // namespace tensorop::opencl_backend
