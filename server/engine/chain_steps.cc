// RunChain's plan: every step checked and planned before any runs, each in
// one PlannedStep (server/engine/chain_steps.h).
#include "server/engine/chain_steps.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/plan/compose_windows.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"
#include "proto/operator_oneof.h"
#include "server/memory/output_buffer.h"
#include "server/memory/zero_bytes.h"
#include "server/wire/convert.h"

namespace tensorop::server {
namespace {

// The outputs a step makes: one per OutputDesc for split, else one.
int OutputCount(const v1::ChainStep& step) {
  return step.op_case() == v1::ChainStep::kSplit ? step.outputs_size() : 1;
}

// A step's input names in order, so that the first error found is always the same.
std::vector<std::string> InputNames(const v1::ChainStep& step) {
  std::vector<std::string> names;
  names.reserve(step.inputs().size());
  for (const auto& entry : step.inputs()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

using StepBytesFn =
    std::function<absl::StatusOr<std::span<const std::byte>>(const v1::StepOutput& from)>;

// steps[i] of `chain` as a request of its own: the chain's tensors by layout
// (their data bytes in `uploaded`, not copied), earlier steps' outputs by the
// layouts the chain's plan gave them (`steps`) and the bytes `step_bytes`
// gives, and the results' strides and keep on its outputs.
absl::StatusOr<v1::RunRequest> StepRequest(const v1::RunChainRequest& chain, int i,
                                           const std::vector<PlannedStep>& steps,
                                           const StepBytesFn& step_bytes,
                                           UploadedInputs* uploaded) {
  const v1::ChainStep& step = chain.steps(i);
  v1::RunRequest request;
  // The step by its place, not the chain's id: messages about it then say
  // which step, and no step copies a client's string.
  request.set_id(absl::StrCat("steps[", i, "]"));
  CopyOperator(step, &request);  // none set: planning names the missing operator
  for (const auto& [name, input] : step.inputs()) {
    v1::Tensor& tensor = (*request.mutable_inputs())[name];
    if (input.has_step()) {
      SetTensorLayout(steps[input.step().step()].outputs[input.step().output()].layout, &tensor);
      ASSIGN_OR_RETURN(std::span<const std::byte> bytes, step_bytes(input.step()));
      uploaded->emplace(name, InputSource::Uploaded(bytes));
    } else if (input.tensor().location_case() == v1::Tensor::kData) {
      const v1::Tensor& given = input.tensor();
      tensor.set_dtype(given.dtype());
      *tensor.mutable_sizes() = given.sizes();
      *tensor.mutable_strides() = given.strides();
      uploaded->emplace(name, InputSource::Uploaded(std::as_bytes(std::span(given.data()))));
    } else {
      tensor = input.tensor();  // a handle or a shared memory span: small
    }
  }
  *request.mutable_outputs() = step.outputs();
  for (int j = 0; j < chain.results_size(); ++j) {
    const v1::ChainResult& result = chain.results(j);
    if (result.step() != i) continue;
    while (request.outputs_size() <= result.output()) request.add_outputs();
    v1::OutputDesc& output = *request.mutable_outputs(result.output());
    if (!result.strides().empty()) {
      if (!output.strides().empty() &&
          !std::equal(output.strides().begin(), output.strides().end(), result.strides().begin(),
                      result.strides().end())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "results[", j, "].strides are ",
            FormatList({result.strides().data(), static_cast<size_t>(result.strides_size())}),
            " and steps[", i, "].outputs[", result.output(), "].strides are ",
            FormatList({output.strides().data(), static_cast<size_t>(output.strides_size())}),
            ": give them in one place"));
      }
      *output.mutable_strides() = result.strides();
    }
    output.set_keep(result.keep());
  }
  request.set_backend(chain.backend());
  if (chain.has_device_index()) request.set_device_index(chain.device_index());
  return request;
}

bool IsWindowStep(const PlannedStep& step) {
  return !step.replan && !step.run->plan.windows.empty();
}

// Whether every window of `step` (a window step) on its input, laid out as
// `middle`, composes with whatever that input is a window on.
bool ReadsAsAView(const PlannedStep& step, const Layout& middle) {
  if (!ComposableMiddle(middle)) return false;
  const std::vector<InputWindow>& windows = step.run->plan.windows;
  for (size_t j = 0; j < windows.size(); ++j) {
    if (!ComposesOver(middle, windows[j], step.outputs[j].layout.sizes)) return false;
  }
  return true;
}

// The step output `step` reads through its input "input", if any.
std::optional<v1::StepOutput> InputStep(const v1::ChainStep& step) {
  const auto input = step.inputs().find("input");
  if (input == step.inputs().end() || !input->second.has_step()) return std::nullopt;
  return input->second.step();
}

// Each step planned as a request of its own, in order, earlier outputs stood
// for by zeros of their planned layouts.
absl::Status PlanSteps(const v1::RunChainRequest& chain, const ServiceOptions& options,
                       const StopCheck& stop, const HandleAccess* handles,
                       std::vector<PlannedStep>& steps) {
  for (int i = 0; i < chain.steps_size(); ++i) {
    RETURN_IF_ERROR(stop());
    PlannedStep& step = steps[i];
    ASSIGN_OR_RETURN(
        step.request,
        StepRequest(
            chain, i, steps,
            [&](const v1::StepOutput& from) {
              return ZeroBytes(steps[from.step()].outputs[from.output()].layout.buffer_bytes());
            },
            &step.uploaded));
    absl::StatusOr<std::unique_ptr<PlannedRun>> run =
        PlanRun(step.request, options, stop, &step.uploaded, handles);
    if (!run.ok()) return InStep(i, run.status());
    step.run = *std::move(run);
    for (const Layout& layout : step.run->plan.outputs) {
      step.outputs.push_back(StepOutputPlan{.layout = layout, .last_read = i});
    }
    // Indices from an earlier step are known only once it ran: planned again.
    const absl::string_view values_input = ValuesInputOf(step.request);
    const auto indices = chain.steps(i).inputs().find(std::string(values_input));
    step.replan = !values_input.empty() && indices != chain.steps(i).inputs().end() &&
                  indices->second.has_step();
  }
  return absl::OkStatus();
}

// When each step output is last read, and which come back.
void MarkReads(const v1::RunChainRequest& chain, std::vector<PlannedStep>& steps) {
  for (int i = 0; i < chain.steps_size(); ++i) {
    for (const auto& [name, input] : chain.steps(i).inputs()) {
      if (input.has_step()) steps[input.step().step()].outputs[input.step().output()].last_read = i;
    }
  }
  for (const v1::ChainResult& result : chain.results()) {
    steps[result.step()].outputs[result.output()].answered = true;
  }
}

// Which steps run. A window step whose outputs no one needs as bytes does not
// (PlannedStep::skipped). Bytes are needed for a result, and where any step
// but a window step reads the output through "input" (or the output is not
// packed, or empty). A step that runs while reading a view copies once, from
// its root's input, through the composed windows; that input is read until
// then.
void PlanViews(const v1::RunChainRequest& chain, std::vector<PlannedStep>& steps) {
  const int count = chain.steps_size();
  std::vector<std::vector<bool>> needed(count);
  for (int i = 0; i < count; ++i) {
    for (const StepOutputPlan& output : steps[i].outputs) needed[i].push_back(output.answered);
  }
  for (int t = 0; t < count; ++t) {
    for (const auto& [name, input] : chain.steps(t).inputs()) {
      if (!input.has_step()) continue;
      const int i = input.step().step();
      const int k = input.step().output();
      if (!IsWindowStep(steps[t]) || name != "input" ||
          !ReadsAsAView(steps[t], steps[i].outputs[k].layout)) {
        needed[i][k] = true;
      }
    }
  }
  for (int i = 0; i < count; ++i) {
    PlannedStep& step = steps[i];
    if (!IsWindowStep(step)) continue;
    const std::vector<InputWindow>& windows = step.run->plan.windows;
    const std::optional<v1::StepOutput> from = InputStep(chain.steps(i));
    const StepOutputPlan* read = from.has_value() && steps[from->step()].skipped
                                     ? &steps[from->step()].outputs[from->output()]
                                     : nullptr;
    std::vector<InputWindow> onto_root;
    for (size_t j = 0; j < windows.size(); ++j) {
      onto_root.push_back(read == nullptr
                              ? windows[j]
                              : ComposeWindows(read->view->window, read->layout, windows[j],
                                               step.outputs[j].layout.sizes));
    }
    const int root = read == nullptr ? i : read->view->root;
    if (std::none_of(needed[i].begin(), needed[i].end(), [](bool need) { return need; })) {
      step.skipped = true;
      for (size_t j = 0; j < onto_root.size(); ++j) {
        step.outputs[j].view = View{.root = root, .window = std::move(onto_root[j])};
      }
    } else if (read == nullptr) {
      step.windows_on = from;
    } else {
      step.root = root;
      step.composed = std::move(onto_root);
      // The root's input is read until this step has copied through its views.
      for (const auto& [name, input] : chain.steps(root).inputs()) {
        if (!input.has_step()) continue;
        int& last = steps[input.step().step()].outputs[input.step().output()].last_read;
        last = std::max(last, i);
      }
    }
  }
}

}  // namespace

// `status` of steps[step], its message naming the step.
absl::Status InStep(int step, const absl::Status& status) {
  if (status.ok()) return status;
  // Field paths continue the step's ("steps[1].slice.window_strides[2] ...").
  const bool names_field = status.code() == absl::StatusCode::kInvalidArgument ||
                           status.code() == absl::StatusCode::kNotFound;
  return absl::Status(
      status.code(), absl::StrCat("steps[", step, "]", names_field ? "." : ": ", status.message()));
}

absl::Status CheckReferences(const v1::RunChainRequest& chain, int max_steps) {
  const int steps = chain.steps_size();
  if (steps > max_steps) {
    return absl::ResourceExhaustedError(absl::StrCat("steps has ", steps,
                                                     " entries, more than the server's limit of ",
                                                     max_steps, " (--max_chain_steps)"));
  }
  if (steps == 0) return absl::InvalidArgumentError("steps is empty: a chain needs a step");
  if (chain.results_size() == 0) {
    return absl::InvalidArgumentError(
        "results is empty: name the step outputs to answer with or keep");
  }
  for (int i = 0; i < steps; ++i) {
    const v1::ChainStep& step = chain.steps(i);
    for (int k = 0; k < step.outputs_size(); ++k) {
      if (step.outputs(k).keep()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "steps[", i, "].outputs[", k, "].keep is set: a chain keeps what results keep"));
      }
      if (step.outputs(k).has_shared_memory()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "steps[", i, "].outputs[", k, "].shared_memory is set: a chain streams its results"));
      }
    }
    for (const std::string& name : InputNames(step)) {
      const v1::ChainInput& input = step.inputs().at(name);
      const std::string field = absl::StrCat("steps[", i, "].inputs[\"", name, "\"]");
      if (input.source_case() == v1::ChainInput::SOURCE_NOT_SET) {
        return absl::InvalidArgumentError(absl::StrCat(field, " has neither tensor nor step"));
      }
      if (!input.has_step()) continue;
      const v1::StepOutput& from = input.step();
      if (from.step() < 0 || from.step() >= i) {
        return absl::InvalidArgumentError(
            i == 0 ? absl::StrCat(field, ".step.step is ", from.step(),
                                  "; steps[0] has no earlier step to read")
                   : absl::StrCat(field, ".step.step is ", from.step(),
                                  "; it must name an earlier step, in [0, ", i - 1, "]"));
      }
      const int outputs = OutputCount(chain.steps(from.step()));
      if (from.output() < 0 || from.output() >= outputs) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".step.output is ", from.output(),
                                                       "; steps[", from.step(), "] has ", outputs,
                                                       " outputs"));
      }
    }
  }
  std::map<std::pair<int, int>, int> named;  // (step, output) -> result
  for (int j = 0; j < chain.results_size(); ++j) {
    const v1::ChainResult& result = chain.results(j);
    if (result.step() < 0 || result.step() >= steps) {
      return absl::InvalidArgumentError(absl::StrCat("results[", j, "].step is ", result.step(),
                                                     "; the chain has ", steps, " steps"));
    }
    const int outputs = OutputCount(chain.steps(result.step()));
    if (result.output() < 0 || result.output() >= outputs) {
      return absl::InvalidArgumentError(absl::StrCat("results[", j, "].output is ", result.output(),
                                                     "; steps[", result.step(), "] has ", outputs,
                                                     " outputs"));
    }
    auto [at, fresh] = named.try_emplace({result.step(), result.output()}, j);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat("results[", j, "] names steps[", result.step(),
                                                     "] output ", result.output(), ", as results[",
                                                     at->second, "] does"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::span<const std::byte>> StepOutputs::Bytes(int output,
                                                              const MemoryBudget::Reservation& call,
                                                              const HandleAccess& handles,
                                                              const StopCheck& stop) {
  const size_t bytes = static_cast<size_t>(outputs.layouts[output].buffer_bytes());
  if (kept[output] == nullptr)
    return std::span<const std::byte>(outputs.buffers[output].get(), bytes);
  if (!kept[output]->on_device()) return kept[output]->bytes();
  if (outputs.buffers[output] == nullptr) {
    ASSIGN_OR_RETURN(OutputBuffer copy,
                     AllocateOutput(outputs.layouts[output], /*pool=*/nullptr, call,
                                    "a kept result on a device that a later step reads"));
    RETURN_IF_ERROR(handles.store->Download(*kept[output], {copy.get(), bytes}, stop));
    handles.store->CountCopy();
    outputs.buffers[output] = Share(std::move(copy));
  }
  return std::span<const std::byte>(outputs.buffers[output].get(), bytes);
}

void StepOutputs::Free(int output, const HandleAccess& handles) {
  if (kept[output] != nullptr) {  // an intermediate kept on a device
    handles.store->Release(handles.caller, std::vector<std::string>{kept[output]->id()});
    kept[output].reset();
  }
  outputs.buffers[output].reset();  // and its reservation, once no window holds it
}

absl::StatusOr<std::vector<PlannedStep>> PlanChain(const v1::RunChainRequest& chain,
                                                   const ServiceOptions& options,
                                                   const StopCheck& stop,
                                                   const HandleAccess* handles) {
  // Sized once and never grown: each step's plan views its request and bytes.
  std::vector<PlannedStep> steps(static_cast<size_t>(chain.steps_size()));
  RETURN_IF_ERROR(PlanSteps(chain, options, stop, handles, steps));
  MarkReads(chain, steps);
  PlanViews(chain, steps);
  return steps;
}

}  // namespace tensorop::server
