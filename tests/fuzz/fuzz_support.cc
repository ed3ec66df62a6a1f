#include "tests/fuzz/fuzz_support.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/plan/plan.h"
#include "core/status_macros.h"
#include "google/protobuf/stubs/logging.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/call_context.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/wire/convert.h"

namespace tensorop::fuzz {
namespace {

using server::Placement;
using server::Scheduler;

// One worker, like a tensord with --worker_threads=1; the CPU only (AUTO runs
// there, OPENCL is FAILED_PRECONDITION as on a server without devices).
Scheduler& TheScheduler() {
  static Scheduler* const scheduler = new Scheduler(
      server::SchedulerOptions{.worker_threads = 1, .max_queued_requests = 4, .devices = nullptr});
  return *scheduler;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::abort();
}

// The lowest and highest byte offsets (relative to `offset`) that a walk of
// `sizes` with byte `strides` starts an element at. 128-bit: no overflow here
// whatever the plan says.
struct Span128 {
  __int128 low;
  __int128 high;
};
Span128 Reach(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
              int64_t offset) {
  Span128 reach{offset, offset};
  for (size_t d = 0; d < sizes.size(); ++d) {
    const __int128 extent = static_cast<__int128>(sizes[d] - 1) * strides[d];
    (extent < 0 ? reach.low : reach.high) += extent;
  }
  return reach;
}

void CheckInside(const Span128& reach, int element_size, int64_t buffer_bytes,
                 const std::string& what) {
  if (reach.low < 0 || reach.high + element_size > buffer_bytes) {
    Fail(absl::StrCat(what, " reaches bytes [", static_cast<int64_t>(reach.low), ", ",
                      static_cast<int64_t>(reach.high + element_size), ") of a buffer of ",
                      buffer_bytes));
  }
}

// Every element a plan touches lies inside the buffers it is given: the
// guarantee validation and planning make to the kernels, checked here
// independently of the kernels (ASan would only see an overrun past a heap
// block, not one inside a proto string's spare capacity).
void CheckPlan(const ExecutionPlan& plan, const std::vector<int64_t>& input_bytes) {
  auto input = [&](int slot) -> int64_t {
    if (slot < 0 || static_cast<size_t>(slot) >= input_bytes.size()) {
      Fail(absl::StrCat("input slot ", slot, " of ", input_bytes.size()));
    }
    return input_bytes[static_cast<size_t>(slot)];
  };
  auto output = [&](int slot) -> int64_t {
    if (slot < 0 || static_cast<size_t>(slot) >= plan.outputs.size()) {
      Fail(absl::StrCat("output slot ", slot, " of ", plan.outputs.size()));
    }
    return plan.outputs[static_cast<size_t>(slot)].buffer_bytes();
  };
  for (size_t i = 0; i < plan.copies.size(); ++i) {
    const StridedCopy& copy = plan.copies[i];
    if (copy.sizes.size() != copy.src_strides.size() ||
        copy.sizes.size() != copy.dst_strides.size()) {
      Fail(absl::StrCat("copy ", i, ": ranks differ"));
    }
    int64_t count = 1;
    for (int64_t size : copy.sizes) {
      if (size < 0) Fail(absl::StrCat("copy ", i, ": negative size"));
      count *= size;  // each size <= 2^32-1 elements in all: no overflow
    }
    if (copy.sizes.empty()) count = 1;
    if (count != copy.element_count && copy.element_count != 0) {
      Fail(absl::StrCat("copy ", i, ": element_count ", copy.element_count, " but sizes hold ",
                        count));
    }
    if (copy.element_count == 0) continue;
    CheckInside(Reach(copy.sizes, copy.src_strides, copy.src_offset), copy.element_size,
                input(copy.input_slot), absl::StrCat("copy ", i, " source"));
    CheckInside(Reach(copy.sizes, copy.dst_strides, copy.dst_offset), copy.element_size,
                output(copy.output_slot), absl::StrCat("copy ", i, " destination"));
  }
  for (size_t i = 0; i < plan.scatters.size(); ++i) {
    const ScatterWalk& walk = plan.scatters[i];
    if (walk.element_count == 0) continue;
    CheckInside(Reach(walk.sizes, walk.indices_strides, 0), walk.index_size,
                input(walk.indices_slot), absl::StrCat("scatter ", i, " indices"));
    CheckInside(Reach(walk.sizes, walk.updates_strides, 0), walk.element_size,
                input(walk.updates_slot), absl::StrCat("scatter ", i, " updates"));
    Span128 out = Reach(walk.sizes, walk.output_strides, 0);
    const __int128 axis = static_cast<__int128>(walk.axis_size - 1) * walk.output_axis_stride;
    (axis < 0 ? out.low : out.high) += axis;
    CheckInside(out, walk.element_size, output(walk.output_slot),
                absl::StrCat("scatter ", i, " output"));
  }
  for (size_t i = 0; i < plan.gathers.size(); ++i) {
    const GatherWalk& walk = plan.gathers[i];
    if (walk.element_count == 0) continue;
    CheckInside(Reach(walk.sizes, walk.indices_strides, 0), walk.index_size,
                input(walk.indices_slot), absl::StrCat("gather ", i, " indices"));
    Span128 in = Reach(walk.sizes, walk.input_strides, 0);
    in.high += static_cast<__int128>(walk.axis_size - 1) * walk.input_axis_stride;
    CheckInside(in, walk.element_size, input(walk.input_slot),
                absl::StrCat("gather ", i, " input"));
    CheckInside(Reach(walk.sizes, walk.output_strides, 0), walk.element_size,
                output(walk.output_slot), absl::StrCat("gather ", i, " output"));
  }
}

int64_t Work(const ExecutionPlan& plan) {
  int64_t work = 0;
  for (const StridedCopy& copy : plan.copies) work += copy.element_count;
  for (const ScatterWalk& walk : plan.scatters) work += walk.element_count;
  for (const GatherWalk& walk : plan.gathers) work += walk.element_count;
  return work;
}

// Takes `request` through the server's own steps of a call
// (server/pipeline/call_context.h: Admit, ReserveAndResolveInputs,
// BindOutputs, ExecuteBound), with the harness's checks between them: the
// plan against its inputs' bytes, the outputs against the limits, and work
// past kMaxWorkElements not started.
absl::Status PlanAndExecute(const v1::RunRequest& request, Placement& placement, Answer answer) {
  static const server::ServiceOptions options{
      .limits = FuzzLimits(), .max_message_bytes = kMaxMessageBytes, .chunk_bytes = kChunkBytes};
  server::MemoryBudget budget(kMaxRequestBytes * 4);
  server::MemoryBudget::Reservation reservation = budget.Empty();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const StopCheck stop = [deadline]() -> absl::Status {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError("deadline exceeded before the request finished");
    }
    return absl::OkStatus();
  };
  Scheduler& scheduler = TheScheduler();
  const server::CallContext call{.request = request,
                                 .options = options,
                                 .scheduler = scheduler,
                                 .placement = placement,
                                 .stop = stop,
                                 .reservation = reservation};
  absl::StatusOr<server::Admission> admitted =
      server::Admit(call, [&](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
        int64_t output_bytes = 0;
        for (const Layout& layout : plan.outputs) output_bytes += layout.buffer_bytes();
        if (output_bytes > FuzzLimits().max_request_bytes) {
          Fail(
              absl::StrCat("planned outputs of ", output_bytes, " bytes passed the request limit"));
        }
        if (answer == Answer::kInline && output_bytes > kMaxMessageBytes) {
          return absl::ResourceExhaustedError("over the message limit");
        }
        return 0;
      });
  if (!admitted.ok()) return admitted.status();
  server::PlannedRun& run = *admitted->run;

  // The inputs in blocks of exactly their size, so that ASan sees any overrun.
  std::vector<std::unique_ptr<std::byte[]>> inputs;
  std::vector<int64_t> input_bytes;
  for (std::span<const std::byte>& input : run.inputs) {
    inputs.push_back(std::make_unique<std::byte[]>(input.size()));
    if (!input.empty()) std::memcpy(inputs.back().get(), input.data(), input.size());
    input = std::span<const std::byte>(inputs.back().get(), input.size());
    input_bytes.push_back(static_cast<int64_t>(input.size()));
  }
  CheckPlan(run.plan, input_bytes);
  if (Work(run.plan) > kMaxWorkElements) return absl::OkStatus();  // see kMaxWorkElements

  // Value-initialised blocks: padding reads as zero, as in the server.
  std::vector<std::unique_ptr<std::byte[]>> outputs;
  const server::AllocateFn allocate = [&](const Layout& layout,
                                          std::byte*) -> absl::StatusOr<std::byte*> {
    outputs.push_back(std::make_unique<std::byte[]>(static_cast<size_t>(layout.buffer_bytes())));
    return outputs.back().get();
  };
  absl::Status status;
  absl::Status submitted = scheduler.Submit(placement, [&] {
    status = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(const std::vector<opencl_backend::ResidentInput> resident,
                       server::ReserveAndResolveInputs(call, *admitted));
      ASSIGN_OR_RETURN(server::BoundOutputs bound, server::BindOutputs(call, *admitted, allocate));
      server::KeptOutputs kept;
      return server::ExecuteBound(call, *admitted, resident, bound, nullptr, &kept);
    }();
  });
  if (!submitted.ok()) Fail(absl::StrCat("Submit: ", submitted.ToString()));
  scheduler.Wait();
  if (!status.ok()) return status;
  const std::vector<Layout>& planned_outputs = run.plan.outputs;

  // The answer as the client would get it.
  if (answer == Answer::kInline) {
    v1::RunResponse response;
    response.set_id(request.id());
    response.set_backend(placement.label);
    for (size_t i = 0; i < planned_outputs.size(); ++i) {
      server::ToProtoTensor(
          planned_outputs[i],
          std::span<const std::byte>(outputs[i].get(),
                                     static_cast<size_t>(planned_outputs[i].buffer_bytes())),
          response.add_outputs());
    }
    std::string wire;
    if (!response.SerializeToString(&wire)) Fail("the response does not serialize");
  } else {
    // Header and chunks per output, as RunStream and RunChunked send them.
    for (size_t i = 0; i < planned_outputs.size(); ++i) {
      const Layout& layout = planned_outputs[i];
      v1::ResultPart part;
      v1::OutputHeader* header = part.mutable_header();
      header->set_index(static_cast<int32_t>(i));
      header->set_dtype(server::ToProtoDType(layout.dtype));
      header->mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
      header->mutable_strides()->Assign(layout.strides.begin(), layout.strides.end());
      header->set_byte_length(layout.buffer_bytes());
      header->set_backend(placement.label);
      std::string wire;
      if (!part.SerializeToString(&wire)) Fail("a result header does not serialize");
      for (int64_t offset = 0; offset < layout.buffer_bytes(); offset += kChunkBytes) {
        const int64_t length = std::min(kChunkBytes, layout.buffer_bytes() - offset);
        part.set_chunk(reinterpret_cast<const char*>(outputs[i].get()) + offset,
                       static_cast<size_t>(length));
        if (!part.SerializeToString(&wire)) Fail("a result chunk does not serialize");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

Limits FuzzLimits() {
  Limits limits;
  limits.max_request_bytes = kMaxRequestBytes;
  return limits;
}

absl::Status RunRequest(const v1::RunRequest& request, absl::string_view method, Answer answer) {
  server::CallRecord record = server::DescribeRequest(method, request);
  std::optional<int> device;
  if (request.has_device_index()) device = request.device_index();
  absl::Status status;
  absl::StatusOr<Placement> placement = TheScheduler().Place(request.backend(), device);
  if (!placement.ok()) {
    status = placement.status();
  } else {
    record.backend = placement->label;
    status = PlanAndExecute(request, *placement, answer);
  }
  // The log line every call ends with (formatted, not written: stderr is the
  // fuzzer's).
  const std::string line = server::FormatLogLine(record, status, absl::Now());
  if (line.empty()) Fail("empty log line");
  return status;
}

std::vector<absl::string_view> SplitFrames(const uint8_t* data, size_t size) {
  std::vector<absl::string_view> frames;
  const char* bytes = reinterpret_cast<const char*>(data);
  while (size >= 4 && frames.size() < kMaxFrames) {
    const size_t length = std::min<size_t>(
        size - 4, static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8 |
                      static_cast<size_t>(data[2]) << 16 | static_cast<size_t>(data[3]) << 24);
    frames.emplace_back(bytes + 4, length);
    data += 4 + length;
    bytes += 4 + length;
    size -= 4 + length;
  }
  return frames;
}

std::string JoinFrames(const std::vector<std::string>& frames) {
  std::string out;
  for (const std::string& frame : frames) {
    const uint32_t length = static_cast<uint32_t>(frame.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
    out += frame;
  }
  return out;
}

}  // namespace tensorop::fuzz

// libFuzzer calls this once before the first input. Protobuf logs every string
// field with invalid UTF-8 that it parses (gRPC answers those INVALID_ARGUMENT
// too); a line per input would be most of the fuzzer's time.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
