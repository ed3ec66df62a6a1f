// One OpenCL device: its context, command queues, staging memory and program
// cache, and the execution of plans on it. Devices are found through the ICD
// loader. The members are defined in device*.cc, one concern per file (see
// device.cc).
#ifndef TENSOROP_KERNELS_OPENCL_DEVICE_H_
#define TENSOROP_KERNELS_OPENCL_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
  // On a device opened with DeviceOptions::profile_kernels: the kernel phase
  // as the device saw it, the sum of CL_PROFILING_COMMAND_START..END over its
  // commands (copies, kernels, fills, the scatter's flag read), and how many.
  int64_t kernel_device_ns = 0;
  int64_t kernel_commands = 0;
};

// The work sizes of copy and scatter launches. Device::Open takes the row of
// kLaunchTables for the device's kind (device.cc says how each was measured);
// DeviceOptions::launch_table replaces it (benchmarks compare rows with it).
struct LaunchTable {
  // Words (or updates) per kernel launch: the stop check runs between.
  int64_t items_per_launch = int64_t{1} << 22;
  // Bytes per clEnqueueCopyBuffer(Rect) command, likewise.
  int64_t bytes_per_command = int64_t{64} << 20;
  // The work-group width of the 2-D launches (a power of two; one row high);
  // 0: the runtime chooses.
  size_t group_width = 0;
  // Contiguous runs by the strided_copy kernel (16-byte words) rather than
  // clEnqueueCopyBuffer(Rect).
  bool runs_by_kernel = false;
  // Transposing copies by the tiled transpose_copy kernel.
  bool tiles = true;
};

// A host input read as several runs goes up run by run into its outputs only
// when every run is at least this (InputsReadAsRuns); one run always does.
// Each upload waits for a staging chunk's last DMA, a device round trip: on
// PoCL, 16 runs of 4 KiB took twice as long one by one as one upload and 16
// copies on the device; 16 runs of 1 MiB took 0.55-0.86 of it, 2 of 32 MiB 0.65.
inline constexpr int64_t kSeveralRunsMinBytes = int64_t{1} << 20;

// How a device is opened.
struct DeviceOptions {
  // Bytes of pinned host staging (CL_MEM_ALLOC_HOST_PTR buffers, mapped once)
  // the device may hold; it grows in chunks up to this bound as transfers need
  // it. 0: no staging, transfers go straight from the caller's memory.
  int64_t staging_bytes = int64_t{64} << 20;
  // The compute queue records profiling events (CL_QUEUE_PROFILING_ENABLE), so
  // DeviceTimings can say what the kernels took on the device. For benchmarks:
  // tensord never sets it, and without a DeviceTimings nothing is read.
  bool profile_kernels = false;
  // Replaces the device's row of the launch table (for benchmarks).
  std::optional<LaunchTable> launch_table = std::nullopt;
};

class Device;

// A kernel object on loan from its device's cache; back to the cache when it
// goes out of scope. One borrower at a time sets its arguments and enqueues:
// clSetKernelArg on a kernel shared between requests would race, and an
// enqueued launch keeps the arguments it was given, so the object is free to
// lend again once the borrower's launches are enqueued.
class KernelLease {
 public:
  KernelLease(Device* owner, int key, cl_kernel kernel)
      : owner_(owner), key_(key), kernel_(kernel) {}
  KernelLease(KernelLease&& other) noexcept
      : owner_(other.owner_), key_(other.key_), kernel_(other.kernel_) {
    other.kernel_ = nullptr;
  }
  KernelLease& operator=(KernelLease&&) = delete;
  ~KernelLease();
  cl_kernel get() const { return kernel_; }

 private:
  Device* owner_;
  int key_;
  cl_kernel kernel_;
};

// A device buffer on loan from its device's pool; back to the pool when it goes
// out of scope. Commands on a buffer run on three queues (upload, compute,
// download), so the order of one queue no longer protects the next borrower:
// Execute gives its buffers back only after every command of its request has
// completed (it waits for its last event, or drains the queues on an error
// path), so a returned buffer has nothing pending.
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

// A device buffer holding one tensor that stays on the device (a handle),
// allocated at its exact size outside the pool and released with the last
// holder.
class ResidentBuffer {
 public:
  ResidentBuffer(cl_mem mem, int64_t bytes) : mem_(mem), bytes_(bytes) {}
  ~ResidentBuffer();
  ResidentBuffer(const ResidentBuffer&) = delete;
  ResidentBuffer& operator=(const ResidentBuffer&) = delete;
  cl_mem mem() const { return mem_; }
  int64_t bytes() const { return bytes_; }

 private:
  cl_mem mem_;
  int64_t bytes_;
};

// An input held on the device: its resident buffer and the byte of it where
// the input's layout starts (past 0 for a view of a larger tensor).
struct ResidentInput {
  const ResidentBuffer* buffer = nullptr;
  int64_t byte_offset = 0;
};

// Where one execution's bytes are. Input i is `inputs[i]` on the host, or,
// when `resident_inputs[i]` names a buffer, read in place there (whole from
// its byte_offset; a scatter reads its indices and updates from byte 0: their
// offsets must be 0). Output j is downloaded into `outputs[j]` (its
// buffer_bytes(), zeroed by the caller), or, when `resident_outputs[j]` is
// not null (`bytes` at least the output's), written in place there and not
// downloaded (outputs[j] is then not touched). Either resident span may be
// empty: nothing resident.
struct DeviceIo {
  std::span<const std::span<const std::byte>> inputs = {};
  std::span<const ResidentInput> resident_inputs = {};
  std::span<std::byte* const> outputs = {};
  std::span<const ResidentBuffer* const> resident_outputs = {};
};

class Device {
 public:
  // Creates the context and queues for `device`.
  static absl::StatusOr<std::unique_ptr<Device>> Open(cl_platform_id platform, cl_device_id device,
                                                      const DeviceOptions& options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // CL_DEVICE_NAME, e.g. "pthread-skylake-avx512-AMD EPYC 7B13".
  const std::string& name() const { return name_; }
  const std::string& platform_name() const { return platform_name_; }
  // The largest single buffer the device allocates.
  int64_t max_buffer_bytes() const { return max_buffer_bytes_; }
  // Whether its buffers live in host memory: a CPU device (PoCL's) or one
  // reporting CL_DEVICE_HOST_UNIFIED_MEMORY (an integrated GPU).
  bool host_memory() const { return host_memory_; }
  // Bytes of free buffers kept for reuse (at most kMaxPooledBytes).
  int64_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    return pooled_bytes_;
  }

  // The bound on staging memory (DeviceOptions::staging_bytes), and what of it
  // is allocated now.
  int64_t staging_bytes() const { return staging_limit_; }
  int64_t staging_allocated_bytes() {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    return staging_allocated_;
  }
  // Input bytes uploaded so far (only the ranges plans read).
  int64_t uploaded_bytes() const { return uploaded_bytes_.load(std::memory_order_relaxed); }

  // Uploads the byte range of each input the plan reads (an input read only
  // as runs: each run straight into its output), runs the plan's kernels in
  // order and downloads the outputs into `outputs` (each
  // plan.outputs[i].buffer_bytes(), zeroed by the caller). Uploads, kernels
  // and downloads go to three queues joined by events, so those of concurrent
  // calls overlap. `stop` is asked between chunks and launches. Device errors
  // are UNAVAILABLE naming the OpenCL call and code.
  absl::Status Execute(const ExecutionPlan& plan,
                       std::span<const std::span<const std::byte>> inputs,
                       std::span<std::byte* const> outputs, const StopCheck& stop,
                       DeviceTimings* timings = nullptr);

  // Execute with some inputs already on the device and some outputs staying
  // there, as `io` says (DeviceIo).
  absl::Status ExecuteResident(const ExecutionPlan& plan, const DeviceIo& io, const StopCheck& stop,
                               DeviceTimings* timings = nullptr);

  // The launch table row this device uses.
  const LaunchTable& launch_table() const { return launch_table_; }

  // CL_DEVICE_GLOBAL_MEM_SIZE.
  int64_t global_memory_bytes() const { return global_memory_bytes_; }
  // A buffer of exactly `bytes` to hold a tensor on the device (zero-filled
  // when `zero`). RESOURCE_EXHAUSTED when the device cannot allocate it (past
  // max_buffer_bytes(), or out of device memory): not a device failure.
  absl::StatusOr<std::unique_ptr<ResidentBuffer>> AllocateResident(int64_t bytes, bool zero);
  // Copies `host` into `buffer` from its byte 0, and `host.size()` bytes of
  // the buffer from `byte_offset` into `host`; each returns once done.
  absl::Status WriteResident(const ResidentBuffer& buffer, std::span<const std::byte> host,
                             const StopCheck& stop);
  absl::Status ReadResident(const ResidentBuffer& buffer, int64_t byte_offset,
                            std::span<std::byte> host, const StopCheck& stop);

  // Transfer probes, for benchmarks and calibration; each waits for its end.
  // `bytes` by DMA between staging and a device buffer, chunked as Execute
  // chunks them (no host copy): the rate of the PCIe link itself.
  absl::Status StagingDma(int64_t bytes, bool to_device);
  // An upload of `host` as Execute does it: copies into staging overlapping
  // the DMA of the previous chunk.
  absl::Status Upload(std::span<const std::byte> host);
  // A download into `host` as Execute does it.
  absl::Status Download(std::span<std::byte> host);
  // For benchmarks that measure OpenCL itself next to this device.
  cl_context context() const { return context_; }
  cl_device_id id() const { return device_; }

  // Kernels index with 32-bit math when every offset a launch computes is at
  // most this (in words); above it they take the 64-bit variant. Tests lower it
  // to run the 64-bit kernels on small tensors.
  static constexpr int64_t kDefaultIndex32Limit = (int64_t{1} << 31) - (int64_t{1} << 20);
  void set_index32_limit(int64_t limit) { index32_limit_ = limit; }

 private:
  friend class PooledBuffer;
  friend class KernelLease;
  Device() = default;
  // A buffer of at least `bytes`, from the pool when one of its size class is
  // free. Sizes round up to powers of two so buffers are reused across requests.
  absl::StatusOr<PooledBuffer> TakeBuffer(int64_t bytes, absl::string_view what);
  void ReturnBuffer(cl_mem mem, size_t size);

  // Pinned staging, in chunks of staging_chunk_bytes_.
  struct StagingChunk {
    cl_mem mem = nullptr;
    std::byte* host = nullptr;  // mapped for the chunk's life
    cl_event busy = nullptr;    // the last DMA using it; wait before reuse
  };
  // A chunk for this caller alone, waited free of its last DMA. With `wait`,
  // blocks (asking `stop`) while every chunk is lent and the bound is reached;
  // without, nullptr then. A caller holding chunks must not wait: others may
  // wait for those.
  absl::StatusOr<StagingChunk*> TakeStaging(bool wait, const StopCheck& stop);
  // Back to the pool; `busy` (owned, may be null) is the DMA still reading or
  // writing it.
  void ReturnStaging(StagingChunk* chunk, cl_event busy);
  // The piece a transfer of `bytes` moves per staging chunk.
  int64_t PieceBytes(int64_t bytes) const;
  // Enqueues the upload of `bytes` from `host` into `dst` from its byte
  // `dst_begin` on `queue`, through staging when there is some; returns once
  // `host` is no longer read.
  absl::Status UploadBytes(cl_command_queue queue, const std::byte* host, int64_t bytes, cl_mem dst,
                           int64_t dst_begin, const StopCheck& stop);
  // Enqueues on `queue`, for each copy of `plan` whose input slot
  // `runs_go_up` names (InputsReadAsRuns: forward runs only), the upload of
  // its run from the host input straight into its output at its offset.
  absl::Status UploadRuns(const ExecutionPlan& plan,
                          std::span<const std::span<const std::byte>> inputs,
                          const std::vector<bool>& runs_go_up, std::span<const cl_mem> output_mems,
                          cl_command_queue queue, const StopCheck& stop);
  // Downloads `bytes` of `src` from its byte `src_begin` into `host` on
  // `queue` once `ready` (may be null) completed; returns when they are in
  // `host`.
  absl::Status DownloadBytes(cl_command_queue queue, cl_mem src, int64_t src_begin, int64_t bytes,
                             std::byte* host, cl_event ready, const StopCheck& stop);
  // Waits for every command queued on any queue (error paths).
  void Drain();
  enum class Source { kStridedCopy, kScatterElements, kGather };
  enum class Kernel { kStridedCopy, kTransposeCopy, kScatterElements, kGather };
  // Built once per (source, word size, index math size: 4 or 8, words per
  // vector) and reused.
  absl::StatusOr<cl_program> Program(Source source, int word_size, int index_size, int vec);
  // A kernel object of a cached program, from the cache when one is free.
  absl::StatusOr<KernelLease> MakeKernel(Kernel kernel, int word_size, int index_size, int vec);
  // A pooled buffer holding `bytes` of `data` (the kernels' outer dimensions
  // past eight), written before the call returns; none for 0 bytes.
  absl::StatusOr<std::optional<PooledBuffer>> DimensionsBuffer(const void* data, int64_t bytes);
  void ReturnKernel(int key, cl_kernel kernel);
  // The launches below keep (retained) the events of their commands in `log`
  // when it is not null: the profiled kernel phase of DeviceTimings.
  using EventLog = std::vector<cl_event>;
  absl::Status RunCopy(const StridedCopy& copy, cl_mem src, cl_mem dst, const StopCheck& stop,
                       EventLog* log);
  // RunCopy's cases: one contiguous run, runs of at most three dimensions with
  // positive pitches (both clEnqueueCopyBuffer*), anything else (the kernel).
  absl::Status CopyRun(cl_mem src, cl_mem dst, int64_t src_offset, int64_t dst_offset,
                       int64_t bytes, const StopCheck& stop, EventLog* log);
  absl::Status CopyRect(const StridedCopy& copy, cl_mem src, cl_mem dst, const StopCheck& stop,
                        EventLog* log);
  // strided_copy over `words` (the copy in the kernel's words), `vec` words per
  // store, the source read as src_mode says (strided_copy.cl).
  template <typename Index>
  absl::Status CopyKernel(const StridedCopy& words, int vec, int src_mode, cl_mem src, cl_mem dst,
                          const StopCheck& stop, EventLog* log);
  // transpose_copy over `words`: the source contiguous along the second
  // innermost dimension, the destination along the innermost.
  template <typename Index>
  absl::Status TransposeKernel(const StridedCopy& words, cl_mem src, cl_mem dst,
                               const StopCheck& stop, EventLog* log);
  absl::Status RunScatter(const ScatterWalk& walk, cl_mem indices, cl_mem updates, cl_mem output,
                          const StopCheck& stop, EventLog* log);
  template <typename Index>
  absl::Status ScatterKernel(const ScatterWalk& walk, cl_mem indices, cl_mem updates, cl_mem output,
                             const StopCheck& stop, EventLog* log);
  absl::Status RunGather(const GatherWalk& walk, cl_mem input, cl_mem indices, cl_mem output,
                         const StopCheck& stop, EventLog* log);
  template <typename Index>
  absl::Status GatherKernel(const GatherWalk& walk, cl_mem input, cl_mem indices, cl_mem output,
                            const StopCheck& stop, EventLog* log);

  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  // The compute queue (kernels and fills); uploads and downloads have their
  // own. Each is in order; a request joins them with markers and events.
  cl_command_queue queue_ = nullptr;
  cl_command_queue upload_queue_ = nullptr;
  cl_command_queue download_queue_ = nullptr;
  std::string name_;
  std::string platform_name_;
  int64_t max_buffer_bytes_ = 0;
  int64_t global_memory_bytes_ = 0;
  bool host_memory_ = false;
  bool profile_kernels_ = false;  // the compute queue records profiling events
  LaunchTable launch_table_;
  // Free buffers by size; bounded so an idle device holds little memory.
  static constexpr int64_t kMaxPooledBytes = int64_t{256} << 20;
  std::mutex pool_mutex_;
  std::multimap<size_t, cl_mem> free_buffers_;
  int64_t pooled_bytes_ = 0;
  int64_t staging_limit_ = 0;
  int64_t staging_chunk_bytes_ = 0;
  std::mutex staging_mutex_;
  std::condition_variable staging_returned_;
  std::vector<std::unique_ptr<StagingChunk>> staging_chunks_;  // every one allocated
  std::deque<StagingChunk*> staging_free_;                     // oldest returned first
  int64_t staging_allocated_ = 0;
  std::atomic<int64_t> uploaded_bytes_{0};
  std::mutex programs_mutex_;
  std::map<std::tuple<Source, int, int, int>, cl_program> programs_;
  // Free kernel objects by program (key: Source, word size, index size packed
  // in an int); a few per program at most, one per concurrent launcher.
  std::mutex kernels_mutex_;
  std::map<int, std::vector<cl_kernel>> free_kernels_;
  std::atomic<int64_t> index32_limit_{kDefaultIndex32Limit};
};

// Every device of every platform the ICD loader knows. No platform is an empty
// list, not an error; a device that fails to open is skipped with its reason in
// `skipped`.
std::vector<std::unique_ptr<Device>> OpenAllDevices(std::vector<std::string>* skipped,
                                                    const DeviceOptions& options = {});

}  // namespace tensorop::opencl_backend

#endif  // TENSOROP_KERNELS_OPENCL_DEVICE_H_
