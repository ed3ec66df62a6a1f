// The steps of one call through the pipeline (server/pipeline/call_context.h):
// admission, reservation, output binding and execution, and PlanAndExecute,
// which takes a call through them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/plan/output_bands.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/pipeline/call_context.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/plan.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

// Where an output kept on a device "is" for `allocate`: it has no host bytes,
// its answer is only its handle.
std::byte on_device_output;

// Whether an index walk of `plan` (a scatter's indices or updates, a gather's
// input or indices) reads input `slot`, which device kernels address from
// their buffer's byte 0 (a view of a device tensor past it is read from a
// host copy instead).
bool WalkReadsFromByteZero(const ExecutionPlan& plan, size_t slot) {
  const int at = static_cast<int>(slot);
  return std::any_of(plan.scatters.begin(), plan.scatters.end(),
                     [at](const ScatterWalk& walk) {
                       return walk.indices_slot == at || walk.updates_slot == at;
                     }) ||
         std::any_of(plan.gathers.begin(), plan.gathers.end(), [at](const GatherWalk& walk) {
           return walk.input_slot == at || walk.indices_slot == at;
         });
}

// The handle input "input" of `run` reads whole: in host memory when the call
// runs there (`pinned` < 0, not sent to OpenCL), or on the device it is
// pinned to. Null when there is none.
const std::shared_ptr<const ResidentTensor>* WindowedHandle(const v1::RunRequest& request,
                                                            const PlannedRun& run, int pinned) {
  const size_t slot = InputSlot(run.plan, "input");
  if (slot == run.plan.input_names.size()) return nullptr;
  const InputSource& source = run.sources[slot];
  if (source.kind == InputSource::Kind::kDeviceHandle) {
    if (source.tensor->device_index() != pinned) return nullptr;
    for (const auto& pin : run.handles) {
      if (pin.get() == source.tensor) return &pin;
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
absl::StatusOr<bool> KeepAsViews(const CallContext& call, const PlannedRun& run, int pinned,
                                 const AllocateFn& allocate, KeptOutputs* kept) {
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
        plan.op, absl::StrCat("outputs[", j, "] of request ", Quoted(request.id())));
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

}  // namespace

absl::StatusOr<Admission> Admit(const CallContext& call, const AdmitFn& admit) {
  // Work that expired or was cancelled while queued is not started.
  RETURN_IF_ERROR(call.stop());
  Admission admission;
  admission.run = call.planned;
  if (admission.run == nullptr) {
    ASSIGN_OR_RETURN(admission.planned_here,
                     Plan(call.request, call.options.limits, call.options.shared_memory, call.stop,
                          call.uploaded, call.handles));
    admission.run = admission.planned_here.get();
  }
  ASSIGN_OR_RETURN(admission.answer_bytes, admit(admission.run->plan));
  // Inputs on the device the op is pinned to are read in place; those on
  // another device come to host memory first.
  admission.pinned = PinnedDevice(call.request, call.placement, *admission.run);
  return admission;
}

absl::StatusOr<std::vector<opencl_backend::ResidentInput>> ReserveAndResolveInputs(
    const CallContext& call, Admission& admission) {
  PlannedRun& run = *admission.run;
  const int pinned = admission.pinned;
  const bool may_run_on_device = call.scheduler.MayRunOnDevice(call.placement, run.plan);
  const int64_t kept_bytes = KeptOutputBytes(call.request, run.plan.outputs);
  const int64_t output_bytes = TotalBytes(run.plan.outputs) -
                               SharedMemoryOutputBytes(call.request, run.plan.outputs) - kept_bytes;
  RETURN_IF_ERROR(ReadPiecedInputs(run, pinned < 0 && !may_run_on_device, call.reservation));
  const size_t slots = run.plan.input_names.size();
  std::vector<opencl_backend::ResidentInput> resident_inputs(slots);
  int64_t copy_bytes = run.host_copy_bytes;
  for (size_t slot = 0; slot < run.sources.size(); ++slot) {
    if (run.sources[slot].kind != InputSource::Kind::kDeviceHandle) continue;
    const ResidentTensor& tensor = *run.sources[slot].tensor;
    if (tensor.device_index() == pinned &&
        (tensor.byte_offset() == 0 || !WalkReadsFromByteZero(run.plan, slot))) {
      resident_inputs[slot] = {.buffer = &tensor.device_buffer()->buffer(),
                               .byte_offset = tensor.byte_offset()};
    } else if (!run.host_copies.contains(run.plan.input_names[slot])) {
      copy_bytes += tensor.layout().buffer_bytes();
    }
  }
  int64_t bytes = output_bytes + admission.answer_bytes + copy_bytes;
  if (pinned >= 0) {  // the device's own copies of what is not resident there
    bytes += output_bytes;
    for (size_t slot = 0; slot < slots; ++slot) {
      if (resident_inputs[slot].buffer == nullptr) {
        bytes += static_cast<int64_t>(run.inputs[slot].size());
      }
    }
  } else if (may_run_on_device) {
    bytes += output_bytes + kept_bytes;
    for (std::span<const std::byte> input : run.inputs) {
      bytes += static_cast<int64_t>(input.size());
    }
  }
  RETURN_IF_ERROR(call.reservation.Grow(
      bytes, [&] { return absl::StrCat("the outputs of request ", Quoted(call.request.id())); }));
  for (size_t slot = 0; slot < run.sources.size(); ++slot) {
    const InputSource& source = run.sources[slot];
    if (source.kind != InputSource::Kind::kDeviceHandle ||
        resident_inputs[slot].buffer != nullptr) {
      continue;
    }
    ASSIGN_OR_RETURN(run.inputs[slot], HostCopy(run, run.plan.input_names[slot], *source.tensor,
                                                *call.handles, call.stop));
  }
  return resident_inputs;
}

absl::StatusOr<BoundOutputs> BindOutputs(const CallContext& call, const Admission& admission,
                                         const AllocateFn& allocate) {
  const v1::RunRequest& request = call.request;
  const HandleAccess* handles = call.handles;
  PlannedRun& run = *admission.run;
  const size_t count = run.plan.outputs.size();
  BoundOutputs bound{.outputs = {},
                     .resident = std::vector<const opencl_backend::ResidentBuffer*>(count),
                     .pending = std::vector<HandleStore::Pending>(count)};
  bound.outputs.reserve(count);
  for (const Layout& layout : run.plan.outputs) {
    const int index = static_cast<int>(bound.outputs.size());
    ASSIGN_OR_RETURN(std::byte * elsewhere,
                     SharedMemoryOutput(request, index, layout, call.options.shared_memory,
                                        RegionOwner(handles), run.shared_memory));
    if (index < request.outputs_size() && request.outputs(index).keep()) {
      if (elsewhere != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("outputs[", index, "]: keep and shared_memory are both set; choose one"));
      }
      if (handles == nullptr || handles->store == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("outputs[", index, "].keep: this call does not keep outputs"));
      }
      HandleStore::Pending& pending = bound.pending[index];
      ASSIGN_OR_RETURN(pending,
                       handles->store->Reserve(
                           handles->caller, layout,
                           absl::StrCat("outputs[", index, "] of request ", Quoted(request.id())),
                           admission.pinned));
      elsewhere = pending.data();
      if (admission.pinned >= 0) {  // stays on the device: no host buffer
        bound.resident[index] = &pending.device_buffer()->buffer();
        elsewhere = &on_device_output;
      }
    }
    ASSIGN_OR_RETURN(std::byte * output, allocate(layout, elsewhere));
    bound.outputs.push_back(output);
  }
  return bound;
}

absl::Status ExecuteBound(const CallContext& call, Admission& admission,
                          const std::vector<opencl_backend::ResidentInput>& resident_inputs,
                          BoundOutputs& bound, const BandedStart* banded, KeptOutputs* kept) {
  Scheduler& scheduler = call.scheduler;
  Placement& placement = call.placement;
  const StopCheck& stop = call.stop;
  PlannedRun& run = *admission.run;
  // Host-memory handles that a device reads are copied there for the call.
  const auto count_host_handles = [&] {
    for (const auto& tensor : run.handles) {
      if (!tensor->on_device()) call.handles->store->CountCopy();
    }
  };
  if (admission.pinned >= 0) {
    count_host_handles();
    const absl::Status status = scheduler.ExecuteOnDevice(admission.pinned, placement, run.plan,
                                                          {.inputs = run.inputs,
                                                           .resident_inputs = resident_inputs,
                                                           .outputs = bound.outputs,
                                                           .resident_outputs = bound.resident},
                                                          stop);
    if (status.code() == absl::StatusCode::kUnavailable) {
      return LostInputs(run, admission.pinned, status);
    }
    RETURN_IF_ERROR(status);
  } else if (std::optional<std::vector<OutputBand>> bands =
                 banded != nullptr && !KeepsOutputs(call.request) &&
                         !scheduler.MayRunOnDevice(placement, run.plan)
                     ? SplitIntoOutputBands(run.plan, banded->band_bytes)
                     : std::nullopt;
             bands.has_value() && bands->size() > 1) {
    // On the CPU, band after band, the parts going out as their bands end.
    placement.device = Device::kCpu;
    placement.label = "cpu";
    ResultProgress& progress = banded->start();
    for (const OutputBand& band : *bands) {
      if (progress.abandoned()) return WriteFailure(stop);
      RETURN_IF_ERROR(scheduler.Execute(placement, band.plan, run.inputs, bound.outputs, stop));
      progress.Advance(band.output, band.ready_bytes);
    }
  } else {
    if (placement.device != Device::kCpu) count_host_handles();
    RETURN_IF_ERROR(scheduler.Execute(placement, run.plan, run.inputs, bound.outputs, stop));
  }
  RETURN_IF_ERROR(CheckSharedMemoryIntact(run.shared_memory));
  kept->assign(bound.pending.size(), nullptr);
  for (size_t i = 0; i < bound.pending.size(); ++i) {
    if (bound.pending[i]) (*kept)[i] = call.handles->store->Commit(std::move(bound.pending[i]));
  }
  return absl::OkStatus();
}

absl::Status PlanAndExecute(const CallContext& call, const AdmitFn& admit,
                            const AllocateFn& allocate, KeptOutputs* kept,
                            const BandedStart* banded) {
  ASSIGN_OR_RETURN(Admission admission, Admit(call, admit));
  ASSIGN_OR_RETURN(const bool views,
                   KeepAsViews(call, *admission.run, admission.pinned, allocate, kept));
  if (views) {
    if (admission.pinned >= 0) {  // answered as where the views are: on the device
      call.placement.device = Device::kOpenCl;
      call.placement.device_index = admission.pinned;
      call.placement.label = call.handles->store->options().devices->Label(admission.pinned);
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::vector<opencl_backend::ResidentInput> resident_inputs,
                   ReserveAndResolveInputs(call, admission));
  ASSIGN_OR_RETURN(BoundOutputs bound, BindOutputs(call, admission, allocate));
  return ExecuteBound(call, admission, resident_inputs, bound, banded, kept);
}

}  // namespace tensorop::server
