// One request from plan to outputs, into the call's sink: admission, views,
// device residency and execution share one reservation and are read together;
// planning is apart in plan.cc, the call context and sinks in call_context.h.
#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/operator.h"
#include "core/plan/byte_range.h"
#include "core/plan/output_bands.h"
#include "core/plan/source_pieces.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/pipeline/guarded.h"
#include "server/transport/call_stop.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {
namespace {

// Told a request's plan before any output is allocated: the bytes the answer
// takes besides the output buffers (its serialized copy, a part buffer), or
// why the request is refused (an answer over the message limit).
using AdmitFn = std::function<absl::StatusOr<int64_t>(const ExecutionPlan& plan)>;

// The outputs a request kept (OutputDesc.keep), by output index: null for
// the others.
using KeptOutputs = std::vector<std::shared_ptr<const ResidentTensor>>;

// Where an output kept on a device "is" for `allocate`: it has no host bytes,
// its answer is only its handle.
std::byte on_device_output;

// Whether a scatter of `plan` reads input `slot` as its indices or updates,
// which device kernels address from their buffer's byte 0 (a view of a
// device tensor past it is read from a host copy instead).
bool ScatterReadsFromByteZero(const ExecutionPlan& plan, size_t slot) {
  return std::any_of(plan.scatters.begin(), plan.scatters.end(), [slot](const ScatterWalk& walk) {
    return walk.indices_slot == static_cast<int>(slot) ||
           walk.updates_slot == static_cast<int>(slot);
  });
}

// A streamed result that may go out while it is computed: `start` hands the
// outputs, allocated and not yet written, to the writer and returns the
// progress the bands report to.
struct BandedStart {
  int64_t band_bytes = 0;
  std::function<ResultProgress&()> start;
};

// The handle input "input" of `run` reads whole: in host memory when the call
// runs there (`pinned` < 0, not sent to OpenCL), or on the device it is
// pinned to. Null when there is none.
const std::shared_ptr<const ResidentTensor>* WindowedHandle(const v1::RunRequest& request,
                                                            const PlannedRun& run, int pinned) {
  const size_t slot = InputSlot(run.plan, "input");
  if (slot == run.plan.input_names.size()) return nullptr;
  auto on_device = run.on_device.find("input");
  if (on_device != run.on_device.end()) {
    if (on_device->second->device_index() != pinned) return nullptr;
    for (const auto& pin : run.handles) {
      if (pin.get() == on_device->second) return &pin;
    }
    return nullptr;
  }
  if (pinned >= 0 || request.backend() == v1::OPENCL) return nullptr;
  const std::span<const std::byte> read = run.inputs[slot];
  const std::shared_ptr<const ResidentTensor>* base = HostTensorRead(run.handles, read);
  return base != nullptr && (*base)->bytes().size() == read.size() ? base : nullptr;
}

// Makes every output of `run` a view of the handle it windows, when all are
// kept (in no strides asked) and are windows of non-negative strides on a
// handle where the call runs (WindowedHandle): true, with `kept` and the
// layouts `allocate` is told (no buffers). False when any of that does not
// hold: the outputs are then copied as any others.
template <typename Allocate>
absl::StatusOr<bool> KeepAsViews(const CallContext& call, const PlannedRun& run, int pinned,
                                 Allocate& allocate, KeptOutputs* kept) {
  const v1::RunRequest& request = call.request;
  const HandleAccess* handles = call.handles;
  const ExecutionPlan& plan = run.plan;
  if (handles == nullptr || handles->store == nullptr || !handles->views ||
      plan.windows.size() != plan.outputs.size() || plan.windows.empty() ||
      request.outputs_size() < static_cast<int>(plan.outputs.size())) {
    return false;
  }
  const std::shared_ptr<const ResidentTensor>* base = WindowedHandle(request, run, pinned);
  if (base == nullptr) return false;
  std::vector<Layout> layouts;
  for (size_t j = 0; j < plan.outputs.size(); ++j) {
    const v1::OutputDesc& asked = request.outputs(static_cast<int>(j));
    if (!asked.keep() || !asked.strides().empty() || asked.has_shared_memory()) return false;
    Layout layout = plan.outputs[j];
    if (layout.element_count == 0) return false;
    layout.buffer_elements = 1;
    for (size_t d = 0; d < layout.sizes.size(); ++d) {
      layout.strides[d] = layout.sizes[d] == 1 ? 0 : plan.windows[j].strides[d];
      if (layout.strides[d] < 0) return false;  // a reversed window: no layout says it
      layout.buffer_elements += (layout.sizes[d] - 1) * layout.strides[d];
    }
    layouts.push_back(std::move(layout));
  }
  KeptOutputs views;
  std::vector<std::string> made;
  for (size_t j = 0; j < layouts.size(); ++j) {
    absl::StatusOr<std::shared_ptr<const ResidentTensor>> view = handles->store->MakeView(
        handles->caller, *base, layouts[j], plan.windows[j].base * ElementSize(layouts[j].dtype),
        absl::StrCat("outputs[", j, "] of request ", Quoted(request.id())));
    if (!view.ok()) {
      handles->store->Release(handles->caller, made);
      return view.status();
    }
    made.push_back((*view)->id());
    std::byte* bytes =
        (*view)->on_device() ? &on_device_output : const_cast<std::byte*>((*view)->bytes().data());
    RETURN_IF_ERROR(allocate(layouts[j], bytes).status());
    views.push_back(*std::move(view));
  }
  *kept = std::move(views);
  return true;
}

// Plans the call's request (unless `call.planned`), admits it (`admit`),
// reserves what its outputs take in the call's reservation (and, on a device,
// its device buffers: PoCL's CPU device keeps them in host memory), asks
// `allocate(layout, elsewhere)` for each output's zeroed buffer (`elsewhere`:
// where the output goes instead of a buffer of the call's own, in a shared
// memory region or a kept tensor, else null), executes into them, and makes
// the kept outputs resident (`kept`). `banded`: a streamed call whose result
// may go out while it is computed.
template <typename Allocate>
absl::Status PlanAndExecute(const CallContext& call, const AdmitFn& admit, Allocate allocate,
                            KeptOutputs* kept, const BandedStart* banded = nullptr) {
  const v1::RunRequest& request = call.request;
  Scheduler& scheduler = call.scheduler;
  Placement& placement = call.placement;
  const StopCheck& stop = call.stop;
  const HandleAccess* handles = call.handles;
  SharedMemoryRegistry* shared_memory = call.options.shared_memory;
  // Work that expired or was cancelled while queued is not started.
  RETURN_IF_ERROR(stop());
  std::unique_ptr<PlannedRun> planned_here;
  PlannedRun* run = call.planned;
  if (run == nullptr) {
    ASSIGN_OR_RETURN(planned_here, Plan(request, call.options.limits, shared_memory, stop,
                                        call.uploaded, handles));
    run = planned_here.get();
  }
  ASSIGN_OR_RETURN(int64_t answer_bytes, admit(run->plan));
  // Inputs on the device the op is pinned to are read in place; those on
  // another device come to host memory first.
  const int pinned = PinnedDevice(request, placement, *run);
  ASSIGN_OR_RETURN(const bool views, KeepAsViews(call, *run, pinned, allocate, kept));
  if (views) {
    if (pinned >= 0) {  // answered as where the views are: on the device
      placement.device = Device::kOpenCl;
      placement.device_index = pinned;
      placement.label = handles->store->options().devices->Label(pinned);
    }
    return absl::OkStatus();
  }
  const int64_t kept_bytes = KeptOutputBytes(request, run->plan.outputs);
  const int64_t output_bytes = TotalBytes(run->plan.outputs) -
                               SharedMemoryOutputBytes(request, run->plan.outputs) - kept_bytes;
  RETURN_IF_ERROR(ReadPiecedInputs(
      *run, pinned < 0 && !scheduler.MayRunOnDevice(placement, run->plan), call.reservation));
  const size_t slots = run->plan.input_names.size();
  std::vector<opencl_backend::ResidentInput> resident_inputs(slots);
  int64_t copy_bytes = run->host_copy_bytes;
  for (size_t slot = 0; slot < slots; ++slot) {
    auto found = run->on_device.find(run->plan.input_names[slot]);
    if (found == run->on_device.end()) continue;
    const ResidentTensor& tensor = *found->second;
    if (tensor.device_index() == pinned &&
        (tensor.byte_offset() == 0 || !ScatterReadsFromByteZero(run->plan, slot))) {
      resident_inputs[slot] = {.buffer = &tensor.device_buffer()->buffer(),
                               .byte_offset = tensor.byte_offset()};
    } else if (!run->host_copies.contains(found->first)) {
      copy_bytes += found->second->layout().buffer_bytes();
    }
  }
  int64_t bytes = output_bytes + answer_bytes + copy_bytes;
  if (pinned >= 0) {  // the device's own copies of what is not resident there
    bytes += output_bytes;
    for (size_t slot = 0; slot < slots; ++slot) {
      if (resident_inputs[slot].buffer == nullptr) {
        bytes += static_cast<int64_t>(run->inputs[slot].size());
      }
    }
  } else if (scheduler.MayRunOnDevice(placement, run->plan)) {
    bytes += output_bytes + kept_bytes;
    for (std::span<const std::byte> input : run->inputs) {
      bytes += static_cast<int64_t>(input.size());
    }
  }
  RETURN_IF_ERROR(
      call.reservation.Grow(bytes, absl::StrCat("the outputs of request ", Quoted(request.id()))));
  for (size_t slot = 0; slot < slots; ++slot) {
    auto found = run->on_device.find(run->plan.input_names[slot]);
    if (found == run->on_device.end() || resident_inputs[slot].buffer != nullptr) continue;
    ASSIGN_OR_RETURN(run->inputs[slot],
                     HostCopy(*run, found->first, *found->second, *handles, stop));
  }
  std::vector<const opencl_backend::ResidentBuffer*> resident_outputs(run->plan.outputs.size(),
                                                                      nullptr);
  std::vector<std::byte*> outputs;
  outputs.reserve(run->plan.outputs.size());
  std::vector<HandleStore::Pending> pending(run->plan.outputs.size());
  for (const Layout& layout : run->plan.outputs) {
    const int index = static_cast<int>(outputs.size());
    ASSIGN_OR_RETURN(std::byte * elsewhere,
                     SharedMemoryOutput(request, index, layout, shared_memory, RegionOwner(handles),
                                        run->shared_memory));
    if (index < request.outputs_size() && request.outputs(index).keep()) {
      if (elsewhere != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("outputs[", index, "]: keep and shared_memory are both set; choose one"));
      }
      if (handles == nullptr || handles->store == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("outputs[", index, "].keep: this call does not keep outputs"));
      }
      ASSIGN_OR_RETURN(
          pending[index],
          handles->store->Reserve(
              handles->caller, layout,
              absl::StrCat("outputs[", index, "] of request ", Quoted(request.id())), pinned));
      elsewhere = pending[index].data();
      if (pinned >= 0) {  // stays on the device: no host buffer
        resident_outputs[index] = &pending[index].device_buffer()->buffer();
        elsewhere = &on_device_output;
      }
    }
    ASSIGN_OR_RETURN(std::byte * output, allocate(layout, elsewhere));
    outputs.push_back(output);
  }
  // Host-memory handles that a device reads are copied there for the call.
  const auto count_host_handles = [&] {
    for (const auto& tensor : run->handles) {
      if (!tensor->on_device()) handles->store->CountCopy();
    }
  };
  if (pinned >= 0) {
    count_host_handles();
    const absl::Status status =
        scheduler.ExecuteOnDevice(pinned, placement, run->plan, run->inputs, resident_inputs,
                                  outputs, resident_outputs, stop);
    if (status.code() == absl::StatusCode::kUnavailable) return LostInputs(*run, pinned, status);
    RETURN_IF_ERROR(status);
  } else if (std::optional<std::vector<OutputBand>> bands =
                 banded != nullptr && !KeepsOutputs(request) &&
                         !scheduler.MayRunOnDevice(placement, run->plan)
                     ? SplitIntoOutputBands(run->plan, banded->band_bytes)
                     : std::nullopt;
             bands.has_value() && bands->size() > 1) {
    // On the CPU, band after band, the parts going out as their bands end.
    placement.device = Device::kCpu;
    placement.label = "cpu";
    ResultProgress& progress = banded->start();
    for (const OutputBand& band : *bands) {
      if (progress.abandoned()) return WriteFailure(stop);
      RETURN_IF_ERROR(scheduler.Execute(placement, band.plan, run->inputs, outputs, stop));
      progress.Advance(band.output, band.ready_bytes);
    }
  } else {
    if (placement.device != Device::kCpu) count_host_handles();
    RETURN_IF_ERROR(scheduler.Execute(placement, run->plan, run->inputs, outputs, stop));
  }
  RETURN_IF_ERROR(CheckSharedMemoryIntact(run->shared_memory));
  kept->assign(pending.size(), nullptr);
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i]) (*kept)[i] = handles->store->Commit(std::move(pending[i]));
  }
  return absl::OkStatus();
}

// PlanAndExecute's `allocate` for outputs held in `outputs` (OutputBuffers or
// Outputs): each one's buffer, from `pool` when large, held as `hold` makes
// it; an output written elsewhere (a kept one) gets no buffer.
template <typename Held, typename Hold>
auto AllocateInto(BufferPool* pool, Held& outputs, Hold hold) {
  return [pool, &outputs, hold](const Layout& layout,
                                std::byte* elsewhere) -> absl::StatusOr<std::byte*> {
    outputs.layouts.push_back(layout);
    if (elsewhere != nullptr) {
      outputs.buffers.emplace_back();
      return elsewhere;
    }
    ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(layout, pool));
    outputs.buffers.push_back(hold(std::move(buffer)));
    return outputs.buffers.back().get();
  };
}

}  // namespace

std::optional<int> RequestedDevice(const v1::RunRequest& request) {
  if (!request.has_device_index()) return std::nullopt;
  return request.device_index();
}

int64_t TotalBytes(const std::vector<Layout>& layouts) {
  int64_t total = 0;
  for (const Layout& layout : layouts) total += layout.buffer_bytes();
  return total;
}

absl::Status Execute(const CallContext& call, const IntoResponse& sink) {
  const v1::RunRequest& request = call.request;
  const ServiceOptions& options = call.options;
  const AdmitFn admit = [&](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
    const std::string backend = call.placement.device == Device::kCpu
                                    ? std::string("cpu")
                                    : std::string(kMaxDeviceLabelBytes, 'x');
    // Outputs written into shared memory or kept carry no data in the answer;
    // a kept one carries its handle.
    const int64_t answer_bytes =
        RunResponseBytes(request.id(), backend, sink.with_status, "", plan.outputs) -
        SharedMemoryOutputBytes(request, plan.outputs) - KeptOutputBytes(request, plan.outputs) +
        KeptAnswerBytes(request, plan.outputs);
    if (answer_bytes > options.max_message_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the answer would take ", answer_bytes, " bytes (", TotalBytes(plan.outputs),
          " of output data), more than the server's message limit of ", options.max_message_bytes,
          " bytes (--max_message_bytes); ", sink.too_big_hint));
    }
    return answer_bytes;  // its serialized copy
  };
  v1::RunResponse* response = sink.response;
  KeptOutputs kept;
  absl::Status status = Guarded([&] {
    RETURN_IF_ERROR(PlanAndExecute(
        call, admit,
        [&](const Layout& layout, std::byte* elsewhere) -> absl::StatusOr<std::byte*> {
          v1::Tensor* tensor = response->add_outputs();
          SetTensorLayout(layout, tensor);
          if (elsewhere != nullptr) return elsewhere;  // the layout only
          // An empty output carries no data field; the kernel writes nothing.
          static std::byte no_bytes[1];
          if (layout.buffer_bytes() == 0) return no_bytes;
          // resize() zeroes: padding reads as zero.
          std::string* data = tensor->mutable_data();
          data->resize(static_cast<size_t>(layout.buffer_bytes()));
          return reinterpret_cast<std::byte*>(data->data());
        },
        &kept));
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i] == nullptr) continue;
      ToProtoHandle(*kept[i], call.handles->store->replica(),
                    response->mutable_outputs(static_cast<int>(i))->mutable_handle());
    }
    return absl::OkStatus();
  });
  if (!status.ok()) response->clear_outputs();
  return status;
}

namespace {

// Answers the call's request, as `run` planned it, with bytes of its received
// inputs where each output is such bytes (OutputAsInputBytes): their slices
// go into the answer as gRPC received them, with no buffer and no copy, the
// slices they keep reserved: taken over from `*call.received_reserved` (the
// bytes of the reservation covering `call.received`; null: none), as far as
// it goes, so the same memory is not reserved twice. Only where the CPU would
// run it: OPENCL asks for the device. False, having done nothing, when an
// output is anything else.
absl::StatusOr<bool> ForwardReceivedBytes(const CallContext& call, const PlannedRun& run,
                                          const AdmitFn& admit, OutputBuffers& outputs) {
  Placement& placement = call.placement;
  if (placement.device == Device::kOpenCl || call.scheduler.MayRunOnDevice(placement, run.plan)) {
    return false;
  }
  const ExecutionPlan& plan = run.plan;
  std::vector<std::vector<grpc::Slice>> forwarded(plan.outputs.size());
  int64_t held = 0;
  for (size_t output = 0; output < plan.outputs.size(); ++output) {
    const std::optional<SlotBytes> bytes = OutputAsInputBytes(plan, static_cast<int>(output));
    if (!bytes.has_value()) return false;
    const absl::string_view name = plan.input_names[static_cast<size_t>(bytes->input_slot)];
    const std::vector<RequestDataView::InputData>& inputs = call.received->inputs();
    auto input = std::find_if(inputs.begin(), inputs.end(), [&](const auto& data) {
      return data.input == name && data.bytes > 0;
    });
    if (input == inputs.end()) return false;  // in shared memory, a handle, ...
    forwarded[output] = call.received->DataSlices(input - inputs.begin(), bytes->range, &held);
  }
  ASSIGN_OR_RETURN(const int64_t answer_bytes, admit(plan));
  int64_t* const received_reserved = call.received_reserved;
  const int64_t taken_over = received_reserved == nullptr ? 0 : std::min(held, *received_reserved);
  RETURN_IF_ERROR(
      call.reservation.Grow(answer_bytes + held - taken_over,
                            absl::StrCat("the outputs of request ", Quoted(call.request.id()))));
  if (received_reserved != nullptr) *received_reserved -= taken_over;
  outputs.layouts = plan.outputs;
  outputs.buffers.resize(plan.outputs.size());
  outputs.forwarded = std::move(forwarded);
  placement.device = Device::kCpu;
  placement.label = "cpu";
  return true;
}

// Admits an answer of output buffers (IntoAnswerBuffers): what it takes
// besides them.
AdmitFn AdmitAnswerBuffers(const CallContext& call, const IntoAnswerBuffers& sink) {
  return [&call,
          too_big_hint = sink.too_big_hint](const ExecutionPlan& plan) -> absl::StatusOr<int64_t> {
    const std::string backend = call.placement.device == Device::kCpu
                                    ? std::string("cpu")
                                    : std::string(kMaxDeviceLabelBytes, 'x');
    const int64_t answer_bytes =
        RunResponseBytes(call.request.id(), backend, /*with_status=*/false, "", plan.outputs);
    const int64_t limit = call.options.max_message_bytes;
    if (answer_bytes > limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the answer would take ", answer_bytes, " bytes (", TotalBytes(plan.outputs),
                       " of output data), more than the server's message limit of ", limit,
                       " bytes (--max_message_bytes); ", too_big_hint));
    }
    return answer_bytes - TotalBytes(plan.outputs);  // the outputs are the answer
  };
}

// Plans the call's request into `planned`, then ForwardReceivedBytes.
absl::StatusOr<bool> PlanAndForward(const CallContext& call, const AdmitFn& admit,
                                    std::unique_ptr<PlannedRun>& planned, OutputBuffers& outputs) {
  RETURN_IF_ERROR(call.stop());
  ASSIGN_OR_RETURN(planned, Plan(call.request, call.options.limits, call.options.shared_memory,
                                 call.stop, call.uploaded, call.handles));
  return ForwardReceivedBytes(call, *planned, admit, outputs);
}

}  // namespace

absl::StatusOr<std::optional<OutputBuffers>> AnswerWithReceivedBytes(
    const CallContext& call, const IntoAnswerBuffers& sink, std::unique_ptr<PlannedRun>& planned) {
  if (call.placement.device == Device::kOpenCl || KeepsOutputs(call.request)) return std::nullopt;
  const AdmitFn admit = AdmitAnswerBuffers(call, sink);
  OutputBuffers outputs;
  bool forwarded = false;
  RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(forwarded, PlanAndForward(call, admit, planned, outputs));
    return absl::OkStatus();
  }));
  if (!forwarded) return std::nullopt;
  planned.reset();
  return outputs;
}

absl::StatusOr<OutputBuffers> Execute(const CallContext& call, const IntoAnswerBuffers& sink) {
  if (KeepsOutputs(call.request)) {
    return absl::InternalError("kept outputs are answered IntoResponse");
  }
  const AdmitFn admit = AdmitAnswerBuffers(call, sink);
  OutputBuffers outputs;
  KeptOutputs kept;
  absl::Status status = Guarded([&]() -> absl::Status {
    std::unique_ptr<PlannedRun> planned_to_forward;
    CallContext planned_call = call;
    if (call.received != nullptr) {
      ASSIGN_OR_RETURN(const bool forwarded,
                       PlanAndForward(call, admit, planned_to_forward, outputs));
      if (forwarded) return absl::OkStatus();
      planned_call.planned = planned_to_forward.get();
    }
    return PlanAndExecute(
        planned_call, admit,
        AllocateInto(call.options.buffer_pool, outputs, [](OutputBuffer buffer) { return buffer; }),
        &kept);
  });
  if (!status.ok()) return status;
  return outputs;
}

int64_t ResponseDataBytes(const v1::RunResponse& response) {
  int64_t total = 0;
  for (const v1::Tensor& tensor : response.outputs())
    total += static_cast<int64_t>(tensor.data().size());
  return total;
}

namespace {

// Admits a streamed result: what it takes besides its outputs.
AdmitFn AdmitParts(const ServiceOptions& options) {
  return [&options](const ExecutionPlan&) -> absl::StatusOr<int64_t> {
    return options.chunk_bytes + kPartOverheadBytes;  // the part being written
  };
}

// Executes the call's request into held buffers; with `streaming`, the parts
// may go out while it is computed.
absl::StatusOr<Outputs> IntoBuffers(const CallContext& call,
                                    StreamWhileComputing* streaming = nullptr) {
  const ServiceOptions& options = call.options;
  Outputs outputs;
  std::optional<BandedStart> banded;
  if (streaming != nullptr) {
    // The parts take the outputs as they are (not written yet) to the writer.
    const auto start = [&]() -> ResultProgress& {
      streaming->started = true;
      streaming->start(ResultParts(std::exchange(outputs, {}), call.placement.label,
                                   options.chunk_bytes, streaming->progress));
      return *streaming->progress;
    };
    banded.emplace(BandedStart{.band_bytes = streaming->band_bytes, .start = start});
  }
  const AdmitFn admit = AdmitParts(options);
  absl::Status status = Guarded([&] {
    RETURN_IF_ERROR(CheckNoSharedMemoryOutputs(call.request, "a streamed call"));
    KeptOutputs kept;
    RETURN_IF_ERROR(PlanAndExecute(call, admit, AllocateInto(options.buffer_pool, outputs, &Share),
                                   &kept, banded ? &*banded : nullptr));
    outputs.handles.resize(kept.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i] == nullptr) continue;
      outputs.handles[i].emplace();
      ToProtoHandle(*kept[i], call.handles->store->replica(), &*outputs.handles[i]);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return outputs;
}

}  // namespace

absl::StatusOr<Outputs> Execute(const CallContext& call, const IntoHeldBuffers&) {
  return IntoBuffers(call);
}

absl::StatusOr<ResultParts> Execute(const CallContext& call, const IntoParts& sink) {
  const v1::RunRequest& request = call.request;
  const int64_t chunk_bytes = call.options.chunk_bytes;
  Placement& placement = call.placement;
  std::unique_ptr<PlannedRun> planned;
  if (call.received != nullptr && !KeepsOutputs(request) && !WritesToSharedMemory(request)) {
    OutputBuffers forwarded;
    bool forwarding = false;
    RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
      ASSIGN_OR_RETURN(forwarding,
                       PlanAndForward(call, AdmitParts(call.options), planned, forwarded));
      return absl::OkStatus();
    }));
    sink.record->backend = placement.label;
    if (forwarding) {
      const size_t count = forwarded.layouts.size();
      return ResultParts(Outputs{.layouts = std::move(forwarded.layouts),
                                 .buffers = std::vector<SharedOutput>(count),
                                 .handles = {},
                                 .forwarded = std::move(forwarded.forwarded)},
                         placement.label, chunk_bytes);
    }
  }
  CallContext planned_call = call;
  if (planned != nullptr) planned_call.planned = planned.get();
  absl::StatusOr<Outputs> outputs = IntoBuffers(planned_call, sink.streaming);
  sink.record->backend = placement.label;
  if (!outputs.ok()) return outputs.status();
  if (sink.streaming != nullptr && sink.streaming->started) {
    return ResultParts(Outputs(), placement.label, chunk_bytes);  // they went out
  }
  return ResultParts(*std::move(outputs), placement.label, chunk_bytes);
}

absl::Status WriteFailure(const StopCheck& stop) {
  absl::Status status = stop();
  if (!status.ok()) return status;
  // A client at its deadline resets the stream, and the write can fail before
  // gRPC marks the call cancelled.
  if (const CallStop* call = stop.target<CallStop>(); call != nullptr && call->NearDeadline()) {
    return absl::DeadlineExceededError("deadline exceeded before the request finished");
  }
  return absl::CancelledError("the client stopped receiving");
}

}  // namespace tensorop::server
