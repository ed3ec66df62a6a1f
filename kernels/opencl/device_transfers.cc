// Host bytes to and from the device: each transfer moves in pieces through
// pinned staging so the host copy of one piece overlaps the DMA of the next;
// the probes time the same paths (and the bare DMA) for calibration.
#include <algorithm>
#include <cstring>
#include <deque>

#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/scoped_event.h"
#include "oneapi/tbb/parallel_for.h"

namespace tensorop::opencl_backend {
namespace {

// A transfer moves in pieces of half its size (two, so the host copy of one
// overlaps the DMA of the other), at least this (a DMA's fixed cost, a few
// microseconds on a GPU, stays small next to its bytes) and at most a chunk.
constexpr int64_t kMinPieceBytes = int64_t{512} << 10;

// Host bytes to or from pinned staging. One thread's memcpy reaches a fifth of
// what PCIe moves (about 10 GB/s against 54 on an H100 host), so a piece is
// copied in blocks across oneTBB's threads; small pieces stay on this one.
void CopyHostBytes(std::byte* dst, const std::byte* src, size_t bytes) {
  constexpr size_t kBlock = size_t{256} << 10;
  if (bytes < 2 * kBlock) {
    std::memcpy(dst, src, bytes);
    return;
  }
  tbb::parallel_for(size_t{0}, (bytes + kBlock - 1) / kBlock, [&](size_t block) {
    const size_t at = block * kBlock;
    std::memcpy(dst + at, src + at, std::min(kBlock, bytes - at));
  });
}

}  // namespace

absl::Status Device::WriteResident(const ResidentBuffer& buffer, std::span<const std::byte> host,
                                   const StopCheck& stop) {
  if (static_cast<int64_t>(host.size()) > buffer.bytes()) {
    return absl::InternalError("a resident write past its buffer");
  }
  ScopedEvent written;
  absl::Status status = UploadBytes(upload_queue_, host.data(), static_cast<int64_t>(host.size()),
                                    buffer.mem(), 0, stop);
  if (status.ok()) {
    status = ClStatus(clEnqueueMarkerWithWaitList(upload_queue_, 0, nullptr, &written.event),
                      "clEnqueueMarkerWithWaitList(resident)");
  }
  if (status.ok()) status = ClStatus(clWaitForEvents(1, &written.event), "clWaitForEvents");
  if (!status.ok()) clFinish(upload_queue_);  // nothing of it may still run
  return status;
}

absl::Status Device::ReadResident(const ResidentBuffer& buffer, int64_t byte_offset,
                                  std::span<std::byte> host, const StopCheck& stop) {
  if (byte_offset < 0 || static_cast<int64_t>(host.size()) > buffer.bytes() - byte_offset) {
    return absl::InternalError("a resident read past its buffer");
  }
  const absl::Status status =
      DownloadBytes(download_queue_, buffer.mem(), byte_offset, static_cast<int64_t>(host.size()),
                    host.data(), nullptr, stop);
  if (!status.ok()) clFinish(download_queue_);
  return status;
}

int64_t Device::PieceBytes(int64_t bytes) const {
  return std::min(staging_chunk_bytes_, std::max(bytes / 2, kMinPieceBytes));
}

absl::Status Device::UploadBytes(cl_command_queue queue, const std::byte* host, int64_t bytes,
                                 cl_mem dst, int64_t dst_begin, const StopCheck& stop) {
  if (bytes <= 0) return absl::OkStatus();
  if (staging_chunk_bytes_ == 0) {
    return ClStatus(clEnqueueWriteBuffer(queue, dst, CL_TRUE, static_cast<size_t>(dst_begin),
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
    CopyHostBytes(chunk->host, host + done, n);
    cl_event written = nullptr;
    const cl_int error =
        clEnqueueWriteBuffer(queue, dst, CL_FALSE, static_cast<size_t>(dst_begin + done), n,
                             chunk->host, 0, nullptr, &written);
    if (error == CL_SUCCESS) clFlush(queue);
    ReturnStaging(chunk, error == CL_SUCCESS ? written : nullptr);
    RETURN_IF_ERROR(ClStatus(error, "clEnqueueWriteBuffer"));
  }
  return absl::OkStatus();
}

absl::Status Device::DownloadBytes(cl_command_queue queue, cl_mem src, int64_t src_begin,
                                   int64_t bytes, std::byte* host, cl_event ready,
                                   const StopCheck& stop) {
  if (bytes <= 0) return absl::OkStatus();
  const cl_uint waits = ready != nullptr ? 1 : 0;
  const cl_event* wait_list = ready != nullptr ? &ready : nullptr;
  if (staging_chunk_bytes_ == 0) {
    return ClStatus(
        clEnqueueReadBuffer(queue, src, CL_TRUE, static_cast<size_t>(src_begin),
                            static_cast<size_t>(bytes), host, waits, wait_list, nullptr),
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
    if (error == CL_SUCCESS) CopyHostBytes(host + oldest.offset, oldest.chunk->host, oldest.size);
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
        clEnqueueReadBuffer(queue, src, CL_FALSE, static_cast<size_t>(src_begin + done), n,
                            (*chunk)->host, waits, wait_list, &read);
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
    status =
        to_device
            ? ClStatus(
                  clEnqueueWriteBuffer(queue, buffer.mem(), CL_FALSE, static_cast<size_t>(done), n,
                                       host, 0, nullptr, nullptr),
                  "clEnqueueWriteBuffer")
            : ClStatus(clEnqueueReadBuffer(queue, buffer.mem(), CL_FALSE, static_cast<size_t>(done),
                                           n, host, 0, nullptr, nullptr),
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
      UploadBytes(upload_queue_, host.data(), bytes, buffer.mem(), 0, NeverStop);
  const absl::Status finished = ClStatus(clFinish(upload_queue_), "clFinish");
  return status.ok() ? finished : status;
}

absl::Status Device::Download(std::span<std::byte> host) {
  const int64_t bytes = static_cast<int64_t>(host.size());
  ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(bytes, "download probe"));
  const absl::Status status =
      DownloadBytes(download_queue_, buffer.mem(), 0, bytes, host.data(), nullptr, NeverStop);
  if (!status.ok()) clFinish(download_queue_);
  return status;
}
}  // namespace tensorop::opencl_backend
