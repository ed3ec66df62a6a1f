// A plan on the device: only the bytes it reads go up (on the upload queue;
// runs of an input read only as runs straight into their outputs),
// its copies and scatters run on the compute queue behind a marker, and its
// outputs come down on the download queue, the three joined by events so
// concurrent requests overlap. Small requests stay on one queue.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/plan/byte_range.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/scoped_event.h"

namespace tensorop::opencl_backend {
namespace {

// Uploads start at a multiple of this below the first byte a plan reads, so a
// rebased offset keeps its alignment modulo any word a kernel may use.
constexpr int64_t kUploadAlignment = 256;
// Requests moving fewer bytes (inputs read plus outputs) than this run on the
// compute queue alone.
constexpr int64_t kOneQueueBytes = int64_t{64} << 10;

}  // namespace

absl::Status Device::Execute(const ExecutionPlan& plan,
                             std::span<const std::span<const std::byte>> inputs,
                             std::span<std::byte* const> outputs, const StopCheck& stop,
                             DeviceTimings* timings) {
  return ExecuteResident(plan, {.inputs = inputs, .outputs = outputs}, stop, timings);
}

absl::Status Device::UploadRuns(const ExecutionPlan& plan,
                                std::span<const std::span<const std::byte>> inputs,
                                const std::vector<bool>& runs_go_up,
                                std::span<const cl_mem> output_mems, cl_command_queue queue,
                                const StopCheck& stop) {
  for (const StridedCopy& copy : plan.copies) {
    const size_t slot = static_cast<size_t>(copy.input_slot);
    if (copy.element_count <= 0 || !runs_go_up[slot]) continue;
    const int64_t bytes = copy.element_count * copy.element_size;
    RETURN_IF_ERROR(UploadBytes(queue, inputs[slot].data() + copy.src_offset, bytes,
                                output_mems[static_cast<size_t>(copy.output_slot)], copy.dst_offset,
                                stop));
    uploaded_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

absl::Status Device::ExecuteResident(const ExecutionPlan& plan, const DeviceIo& io,
                                     const StopCheck& stop, DeviceTimings* timings) {
  const std::span<const std::span<const std::byte>> inputs = io.inputs;
  const std::span<const ResidentInput> resident_inputs = io.resident_inputs;
  const std::span<std::byte* const> outputs = io.outputs;
  const std::span<const ResidentBuffer* const> resident_outputs = io.resident_outputs;
  const auto resident_input = [&](size_t i) {
    return i < resident_inputs.size() ? resident_inputs[i] : ResidentInput{};
  };
  const auto resident_output = [&](size_t j) {
    return j < resident_outputs.size() ? resident_outputs[j] : nullptr;
  };
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
  // Where each input and output is on the device: a pooled buffer above, or
  // a resident one.
  std::vector<cl_mem> input_mems;
  std::vector<cl_mem> output_mems;
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
  // The kernel phase's events, when timings are asked of a profiling device.
  struct Profiled {
    std::vector<cl_event> events;
    ~Profiled() {
      for (cl_event event : events) {
        if (event != nullptr) clReleaseEvent(event);
      }
    }
  } profiled;
  std::vector<cl_event>* log = timings != nullptr && profile_kernels_ ? &profiled.events : nullptr;

  // Only the bytes the plan reads go up; kernels address the device buffer
  // from `upload_begin` (a resident input's: before its buffer's byte 0 by
  // its offset, so copies read from there). A host input read only as runs
  // goes up run by run straight into the outputs (UploadRuns), in no buffer
  // of its own.
  const std::vector<ByteRange> ranges = InputReadRanges(plan);
  const std::vector<bool> read_as_runs = InputsReadAsRuns(plan, kSeveralRunsMinBytes);
  std::vector<bool> runs_go_up(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    runs_go_up[i] = read_as_runs[i] && resident_input(i).buffer == nullptr;
  }
  std::vector<int64_t> upload_begin(inputs.size(), 0);
  std::vector<int64_t> upload_bytes(inputs.size(), 0);
  int64_t moved = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ByteRange range = i < ranges.size() ? ranges[i] : ByteRange{};
    const ResidentInput resident = resident_input(i);
    const int64_t size = resident.buffer != nullptr
                             ? resident.buffer->bytes() - resident.byte_offset
                             : static_cast<int64_t>(inputs[i].size());
    if (resident.byte_offset < 0 || range.begin < 0 || range.end > size) {
      return absl::InternalError(absl::StrCat("plan for ", plan.op, " reads bytes [", range.begin,
                                              ", ", range.end, ") of input ", plan.input_names[i],
                                              " of ", size, " bytes"));
    }
    if (resident.buffer != nullptr) {  // read in place from its offset
      upload_begin[i] = -resident.byte_offset;
      continue;
    }
    if (runs_go_up[i]) {
      moved += range.size();
      continue;
    }
    upload_begin[i] = range.empty() ? 0 : range.begin - range.begin % kUploadAlignment;
    upload_bytes[i] = range.empty() ? 0 : range.end - upload_begin[i];
    moved += upload_bytes[i];
  }
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    if (resident_output(j) == nullptr) moved += plan.outputs[j].buffer_bytes();
  }
  // A small request stays on the compute queue: for it the events joining
  // three queues cost more than any overlap gains.
  const bool one_queue = moved < kOneQueueBytes;
  cl_command_queue up = one_queue ? queue_ : upload_queue_;
  cl_command_queue down = one_queue ? queue_ : download_queue_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (resident_input(i).buffer != nullptr || runs_go_up[i]) {
      input_mems.push_back(runs_go_up[i] ? nullptr : resident_input(i).buffer->mem());
      continue;
    }
    ASSIGN_OR_RETURN(PooledBuffer buffer,
                     TakeBuffer(upload_bytes[i], absl::StrCat("input ", plan.input_names[i])));
    RETURN_IF_ERROR(UploadBytes(up, inputs[i].data() + upload_begin[i], upload_bytes[i],
                                buffer.mem(), 0, stop));
    uploaded_bytes_.fetch_add(upload_bytes[i], std::memory_order_relaxed);
    input_mems.push_back(buffer.mem());
    input_buffers.push_back(std::move(buffer));
  }
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const Layout& layout = plan.outputs[j];
    cl_mem mem = nullptr;
    if (resident_output(j) != nullptr) {
      if (resident_output(j)->bytes() < layout.buffer_bytes()) {
        return absl::InternalError(
            absl::StrCat("resident output ", j, " is smaller than its layout"));
      }
      mem = resident_output(j)->mem();
    } else {
      ASSIGN_OR_RETURN(PooledBuffer buffer,
                       TakeBuffer(layout.buffer_bytes(), absl::StrCat("output ", j)));
      mem = buffer.mem();
      output_buffers.push_back(std::move(buffer));
    }
    output_mems.push_back(mem);
    // Padding must read as zero; a packed output is written whole by the kernels.
    if (layout.buffer_elements > layout.element_count) {
      const cl_uchar zero = 0;
      RETURN_IF_ERROR(ClStatus(
          clEnqueueFillBuffer(up, mem, &zero, 1, 0, static_cast<size_t>(layout.buffer_bytes()), 0,
                              nullptr, nullptr),
          "clEnqueueFillBuffer"));
    }
  }
  RETURN_IF_ERROR(UploadRuns(plan, inputs, runs_go_up, output_mems, up, stop));
  // A plan's fills read their one element from a buffer of its own.
  cl_mem fill_value = nullptr;
  if (!plan.fills.empty()) {
    const int64_t width = plan.fills.front().element_size;
    ASSIGN_OR_RETURN(PooledBuffer buffer, TakeBuffer(width, "the fill value"));
    fill_value = buffer.mem();
    input_buffers.push_back(std::move(buffer));  // back to the pool with the inputs
    RETURN_IF_ERROR(ClStatus(
        clEnqueueFillBuffer(up, fill_value, plan.fill_value.data(), static_cast<size_t>(width), 0,
                            static_cast<size_t>(width), 0, nullptr, nullptr),
        "clEnqueueFillBuffer(fill value)"));
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
    if (runs_go_up[copy.input_slot]) continue;  // went up into its output
    StridedCopy rebased = copy;
    rebased.src_offset -= upload_begin[copy.input_slot];
    RETURN_IF_ERROR(
        RunCopy(rebased, input_mems[copy.input_slot], output_mems[copy.output_slot], stop, log));
  }
  for (const StridedCopy& fill : plan.fills) {
    RETURN_IF_ERROR(RunCopy(fill, fill_value, output_mems[fill.output_slot], stop, log));
  }
  for (const ScatterWalk& walk : plan.scatters) {
    // Walks address indices and updates from byte 0, which their ranges hold.
    if (upload_begin[walk.indices_slot] != 0 || upload_begin[walk.updates_slot] != 0) {
      return absl::InternalError(
          "scatter indices or updates do not start at their buffer's byte 0");
    }
    RETURN_IF_ERROR(RunScatter(walk, input_mems[walk.indices_slot], input_mems[walk.updates_slot],
                               output_mems[walk.output_slot], stop, log));
  }
  for (const GatherWalk& walk : plan.gathers) {
    if (upload_begin[walk.input_slot] != 0 || upload_begin[walk.indices_slot] != 0) {
      return absl::InternalError("gather input or indices do not start at their buffer's byte 0");
    }
    RETURN_IF_ERROR(RunGather(walk, input_mems[walk.input_slot], input_mems[walk.indices_slot],
                              output_mems[walk.output_slot], stop, log));
  }
  RETURN_IF_ERROR(ClStatus(clEnqueueMarkerWithWaitList(queue_, 0, nullptr, &computed.event),
                           "clEnqueueMarkerWithWaitList(compute)"));
  RETURN_IF_ERROR(ClStatus(clFlush(queue_), "clFlush"));
  RETURN_IF_ERROR(end_phase(&DeviceTimings::kernel_ns, computed.event));
  if (log != nullptr) {  // every command of the phase completed: read its start and end
    for (cl_event event : profiled.events) {
      cl_ulong start = 0, end = 0;
      if (event == nullptr) continue;
      RETURN_IF_ERROR(ClStatus(
          clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
          "clGetEventProfilingInfo(START)"));
      RETURN_IF_ERROR(ClStatus(
          clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
          "clGetEventProfilingInfo(END)"));
      timings->kernel_device_ns += static_cast<int64_t>(end - start);
      ++timings->kernel_commands;
    }
  }

  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    if (resident_output(j) != nullptr) continue;  // stays on the device
    RETURN_IF_ERROR(DownloadBytes(down, output_mems[j], 0, plan.outputs[j].buffer_bytes(),
                                  outputs[j], one_queue ? nullptr : computed.event, stop));
  }
  // With every download done (or none to do), this request's kernels, and so
  // its uploads, completed too: the buffers may go back to the pool.
  RETURN_IF_ERROR(ClStatus(clWaitForEvents(1, &computed.event), "clWaitForEvents"));
  drain.clean = true;
  return end_phase(&DeviceTimings::download_ns, nullptr);
}
}  // namespace tensorop::opencl_backend
