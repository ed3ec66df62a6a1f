// One request into the call's sink: how each sink admits its answer and where
// its outputs' buffers come from. The steps every call takes (admission,
// reservation, binding, execution) are in call_steps.cc, planning in plan.cc,
// the call context and sinks in call_context.h.
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
#include "core/guarded.h"
#include "core/operator.h"
#include "core/plan/byte_range.h"
#include "core/plan/output_bands.h"
#include "core/plan/source_pieces.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/transport/call_stop.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {
namespace {

// PlanAndExecute's `allocate` for outputs held in `outputs` (OutputBuffers or
// Outputs): each one's buffer, from the call's buffer pool when large, its
// bytes taken over from what the call's reservation admitted, held as `hold`
// makes it; an output written elsewhere (a kept one) gets no buffer.
template <typename Held, typename Hold>
auto AllocateInto(const CallContext& call, Held& outputs, Hold hold) {
  return [&call, &outputs, hold](const Layout& layout,
                                 std::byte* elsewhere) -> absl::StatusOr<std::byte*> {
    outputs.layouts.push_back(layout);
    if (elsewhere != nullptr) {
      outputs.buffers.emplace_back();
      return elsewhere;
    }
    ASSIGN_OR_RETURN(OutputBuffer buffer,
                     AllocateAdmittedOutput(layout, call.options.buffer_pool, call.reservation));
    outputs.buffers.push_back(hold(std::move(buffer)));
    return outputs.buffers.back().get();
  };
}

// The most bytes the answer's backend label takes where the call may run.
std::string BackendLabelBound(const Placement& placement) {
  return placement.device == Device::kCpu ? std::string("cpu")
                                          : std::string(kMaxDeviceLabelBytes, 'x');
}

// `answer_bytes`, when an answer of that size fits the server's message
// limit; otherwise RESOURCE_EXHAUSTED naming the limit and `too_big_hint`.
absl::StatusOr<int64_t> WithinMessageLimit(int64_t answer_bytes, const ExecutionPlan& plan,
                                           const ServiceOptions& options,
                                           absl::string_view too_big_hint) {
  if (answer_bytes <= options.max_message_bytes) return answer_bytes;
  return absl::ResourceExhaustedError(
      absl::StrCat("the answer would take ", answer_bytes, " bytes (", TotalBytes(plan.outputs),
                   " of output data), more than the server's message limit of ",
                   options.max_message_bytes, " bytes (--max_message_bytes); ", too_big_hint));
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
    // Outputs written into shared memory or kept carry no data in the answer;
    // a kept one carries its handle. What it takes: its serialized copy.
    return WithinMessageLimit(RunResponseBytes(request.id(), BackendLabelBound(call.placement),
                                               sink.with_status, "", plan.outputs) -
                                  SharedMemoryOutputBytes(request, plan.outputs) -
                                  KeptOutputBytes(request, plan.outputs) +
                                  KeptAnswerBytes(request, plan.outputs),
                              plan, options, sink.too_big_hint);
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

// Whether the call has received bytes an answer may be made of.
bool HasReceivedData(const CallContext& call) {
  return call.received != nullptr && call.received->view.has_value();
}

// Answers the call's request, as `run` planned it, with bytes of its received
// inputs where each output is such bytes (OutputAsInputBytes): their slices
// go into the answer as gRPC received them, with no buffer and no copy, the
// slices they keep reserved: taken over from the cover of `call.received`,
// as far as it goes, so the same memory is not reserved twice. Only where the CPU would
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
    const std::vector<RequestDataView::InputData>& inputs = call.received->view->inputs();
    auto input = std::find_if(inputs.begin(), inputs.end(), [&](const auto& data) {
      return data.input == name && data.bytes > 0;
    });
    if (input == inputs.end()) return false;  // in shared memory, a handle, ...
    forwarded[output] =
        call.received->view->DataSlices(input - inputs.begin(), bytes->range, &held);
  }
  ASSIGN_OR_RETURN(const int64_t answer_bytes, admit(plan));
  RETURN_IF_ERROR(call.reservation.GrowTakingOver(
      answer_bytes + held, &call.received->cover, held,
      absl::StrCat("the outputs of request ", Quoted(call.request.id()))));
  outputs.layouts = plan.outputs;
  outputs.buffers.resize(plan.outputs.size());
  outputs.forwarded = std::move(forwarded);
  placement.device = Device::kCpu;
  placement.label = "cpu";
  return true;
}

// Admits an answer of output buffers (IntoAnswerBuffers): what it takes
// besides them. Asked once the request is planned.
struct AdmitAnswerBuffers {
  const CallContext& call;
  absl::string_view too_big_hint;

  absl::StatusOr<int64_t> operator()(const ExecutionPlan& plan) const {
    ASSIGN_OR_RETURN(
        const int64_t answer_bytes,
        WithinMessageLimit(RunResponseBytes(call.request.id(), BackendLabelBound(call.placement),
                                            /*with_status=*/false, "", plan.outputs),
                           plan, call.options, too_big_hint));
    return answer_bytes - TotalBytes(plan.outputs);  // the outputs are the answer
  }
};

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
  const AdmitFn admit = AdmitAnswerBuffers{call, sink.too_big_hint};
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
  const AdmitFn admit = AdmitAnswerBuffers{call, sink.too_big_hint};
  OutputBuffers outputs;
  KeptOutputs kept;
  absl::Status status = Guarded([&]() -> absl::Status {
    std::unique_ptr<PlannedRun> planned_to_forward;
    CallContext planned_call = call;
    if (HasReceivedData(call)) {
      ASSIGN_OR_RETURN(const bool forwarded,
                       PlanAndForward(call, admit, planned_to_forward, outputs));
      if (forwarded) return absl::OkStatus();
      planned_call.planned = planned_to_forward.get();
    }
    return PlanAndExecute(planned_call, admit,
                          AllocateInto(call, outputs, [](OutputBuffer buffer) { return buffer; }),
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
    RETURN_IF_ERROR(PlanAndExecute(call, admit, AllocateInto(call, outputs, &Share), &kept,
                                   banded ? &*banded : nullptr));
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
  if (HasReceivedData(call) && !KeepsOutputs(request) && !WritesToSharedMemory(request)) {
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
