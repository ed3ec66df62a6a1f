// RunChain's planning and execution over the steps' parallel arrays. (About
// 600 lines, at the project's ~600: issue 43 rewrites the executor over one
// step structure, which is where this file is split.)
#include "server/engine/chain.h"

#include <algorithm>
#include <atomic>
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
#include "core/plan/strided_copy.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"
#include "proto/operator_oneof.h"
#include "server/memory/zero_bytes.h"
#include "server/wire/convert.h"

namespace tensorop::server {
namespace {

std::atomic<int64_t> fused_chain_steps{0};
std::atomic<int64_t> lent_chain_steps{0};

// `status` of steps[step], its message naming the step.
absl::Status InStep(int step, const absl::Status& status) {
  if (status.ok()) return status;
  // Field paths continue the step's ("steps[1].slice.window_strides[2] ...").
  const bool names_field = status.code() == absl::StatusCode::kInvalidArgument ||
                           status.code() == absl::StatusCode::kNotFound;
  return absl::Status(
      status.code(), absl::StrCat("steps[", step, "]", names_field ? "." : ": ", status.message()));
}

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

// What the chain's shape allows, before any step is planned: the step count,
// every reference to an earlier step's output, every result named once, and
// no step output that asks for what only results say (keep, shared memory).
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

using StepBytesFn =
    std::function<absl::StatusOr<std::span<const std::byte>>(const v1::StepOutput& from)>;

// steps[i] of `chain` as a request of its own: the chain's tensors by layout
// (their data bytes in `uploaded`, not copied), earlier steps' outputs by the
// layouts the chain's plan gave them and the bytes `step_bytes` gives, and
// the results' strides and keep on its outputs.
absl::StatusOr<v1::RunRequest> StepRequest(const v1::RunChainRequest& chain, int i,
                                           const std::vector<std::vector<Layout>>& layouts,
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
      SetTensorLayout(layouts[input.step().step()][input.step().output()], &tensor);
      ASSIGN_OR_RETURN(std::span<const std::byte> bytes, step_bytes(input.step()));
      uploaded->bytes.emplace(name, bytes);
    } else if (input.tensor().location_case() == v1::Tensor::kData) {
      const v1::Tensor& given = input.tensor();
      tensor.set_dtype(given.dtype());
      *tensor.mutable_sizes() = given.sizes();
      *tensor.mutable_strides() = given.strides();
      uploaded->bytes.emplace(name, std::as_bytes(std::span(given.data())));
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

// Whether any step reads a handle: while the store drains, that makes the
// chain a call on a handle here (a step naming one that is not here is
// NOT_FOUND when it is planned).
bool ReadsHandle(const v1::RunChainRequest& chain) {
  for (const v1::ChainStep& step : chain.steps()) {
    for (const auto& [name, input] : step.inputs()) {
      if (input.has_tensor() && input.tensor().has_handle()) return true;
    }
  }
  return false;
}

// One step as a request of its own, planned before the chain runs.
struct PlannedStep {
  v1::RunRequest request;
  UploadedInputs uploaded;  // the bytes of its inputs that the request does not carry
  std::unique_ptr<PlannedRun> run;
  bool replan = false;  // it reads index values an earlier step computes
};

// One step's outputs while the chain runs.
struct StepOutputs {
  Outputs outputs;  // a kept output's buffer is null: its bytes are `kept`'s
  std::vector<std::shared_ptr<const ResidentTensor>> kept;
  MemoryBudget::Reservation reservation;  // the bytes of the buffers still held
  bool lent = false;  // the buffers are a resident tensor's (LentFromResident), not reserved

  // Output `output`'s bytes in host memory: a kept result that lives on a
  // device is downloaded for the steps that read it (once, reserved with the
  // step's buffers).
  absl::StatusOr<std::span<const std::byte>> Bytes(int output, const HandleAccess& handles,
                                                   const StopCheck& stop) {
    const size_t bytes = static_cast<size_t>(outputs.layouts[output].buffer_bytes());
    if (kept[output] == nullptr)
      return std::span<const std::byte>(outputs.buffers[output].get(), bytes);
    if (!kept[output]->on_device()) return kept[output]->bytes();
    if (outputs.buffers[output] == nullptr) {
      RETURN_IF_ERROR(reservation.Grow(static_cast<int64_t>(bytes),
                                       "a kept result on a device that a later step reads"));
      ASSIGN_OR_RETURN(OutputBuffer copy, AllocateOutput(outputs.layouts[output], nullptr));
      RETURN_IF_ERROR(handles.store->Download(*kept[output], {copy.get(), bytes}, stop));
      handles.store->CountCopy();
      outputs.buffers[output] = Share(std::move(copy));
    }
    return std::span<const std::byte>(outputs.buffers[output].get(), bytes);
  }
  void Free(int output, const HandleAccess& handles) {
    if (kept[output] != nullptr) {  // an intermediate kept on a device
      handles.store->Release(handles.caller, std::vector<std::string>{kept[output]->id()});
      kept[output].reset();
    }
    if (outputs.buffers[output] == nullptr) return;
    outputs.buffers[output].reset();
    reservation.Shrink(outputs.layouts[output].buffer_bytes());
  }
};

// Where an output of a step that does not run lives: `window` on the input
// of step `root`, the first step up its line whose input exists as bytes.
struct View {
  int root = -1;
  InputWindow window;
};

// Which steps run. A window step (slice, strided_slice, split) whose outputs
// no one needs as bytes does not: each of its outputs is a View, its window
// composed onto what its input reads. Bytes are needed for a result, and
// where any step but a window step reads the output through "input" (or the
// output is not packed, or empty). A step that runs while reading a view
// copies once, from its root's input, through the composed windows.
struct ChainViews {
  std::vector<bool> skipped;                            // by step
  std::vector<std::vector<std::optional<View>>> views;  // by step, output: of skipped steps
  std::vector<int> root;  // by step: a running step reading a view, its root; else -1
  std::vector<std::vector<InputWindow>> composed;  // by step, output: such a step's windows
};

bool IsWindowStep(const PlannedStep& step) {
  return !step.replan && !step.run->plan.windows.empty();
}

// The step output `step` reads through its input "input", if any.
std::optional<v1::StepOutput> InputStep(const v1::ChainStep& step) {
  const auto input = step.inputs().find("input");
  if (input == step.inputs().end() || !input->second.has_step()) return std::nullopt;
  return input->second.step();
}

ChainViews PlanViews(const v1::RunChainRequest& chain, const std::vector<PlannedStep>& planned,
                     const std::vector<std::vector<Layout>>& layouts,
                     const std::vector<std::vector<bool>>& answered) {
  const int steps = chain.steps_size();
  std::vector<std::vector<bool>> needed = answered;
  for (int t = 0; t < steps; ++t) {
    for (const auto& [name, input] : chain.steps(t).inputs()) {
      if (!input.has_step()) continue;
      const int i = input.step().step();
      const int k = input.step().output();
      if (!IsWindowStep(planned[t]) || name != "input" || !ComposableMiddle(layouts[i][k])) {
        needed[i][k] = true;
      }
    }
  }
  ChainViews plan{.skipped = std::vector<bool>(steps, false),
                  .views = std::vector<std::vector<std::optional<View>>>(steps),
                  .root = std::vector<int>(steps, -1),
                  .composed = std::vector<std::vector<InputWindow>>(steps)};
  for (int i = 0; i < steps; ++i) {
    if (!IsWindowStep(planned[i])) continue;
    const std::vector<InputWindow>& windows = planned[i].run->plan.windows;
    const std::optional<v1::StepOutput> from = InputStep(chain.steps(i));
    const View* read = from.has_value() && plan.skipped[from->step()]
                           ? &*plan.views[from->step()][from->output()]
                           : nullptr;
    std::vector<InputWindow> onto_root;
    for (size_t j = 0; j < windows.size(); ++j) {
      onto_root.push_back(read == nullptr
                              ? windows[j]
                              : ComposeWindows(read->window, layouts[from->step()][from->output()],
                                               windows[j], layouts[i][j].sizes));
    }
    const int root = read == nullptr ? i : read->root;
    if (std::none_of(needed[i].begin(), needed[i].end(), [](bool need) { return need; })) {
      plan.skipped[i] = true;
      for (InputWindow& window : onto_root) {
        plan.views[i].push_back(View{.root = root, .window = std::move(window)});
      }
    } else if (read != nullptr) {
      plan.root[i] = root;
      plan.composed[i] = std::move(onto_root);
    }
  }
  return plan;
}

// Points `run`'s input "input" at what `source`'s reads (the same bytes, on a
// device or in host memory, whole or in pieces), and its copies at `windows`
// on it: one copy per output, however many windows were composed.
void ReadThroughViews(const PlannedRun& source, const std::vector<InputWindow>& windows,
                      PlannedRun& run) {
  const size_t slot = InputSlot(run.plan, "input");
  run.inputs[slot] = source.inputs[InputSlot(source.plan, "input")];
  run.on_device.erase("input");
  if (const auto found = source.on_device.find("input"); found != source.on_device.end()) {
    run.on_device.emplace("input", found->second);
  }
  run.pieced.erase("input");
  if (const auto found = source.pieced.find("input"); found != source.pieced.end()) {
    run.pieced.emplace("input", found->second);
  }
  run.plan.windows = windows;
  run.plan.copies.clear();
  for (size_t j = 0; j < windows.size(); ++j) {
    run.plan.copies.push_back(PlanStridedCopy(run.plan.outputs[j], windows[j],
                                              static_cast<int>(slot), static_cast<int>(j)));
  }
}

// The outputs of `run` (a step reading views, its copies through them made
// by ReadThroughViews) lent from the resident tensor its input reads, which
// `source` (its root's run) pins, when every one is answered and read by no
// later step (`answer_only`) and is one contiguous run of that tensor's bytes
// in its own unpadded layout: as Fetch answers a handle, nothing is copied.
// Null otherwise.
std::optional<Outputs> LentFromResident(const v1::RunRequest& request, const PlannedRun& run,
                                        const PlannedRun& source,
                                        const std::vector<bool>& answer_only) {
  const size_t slot = InputSlot(run.plan, "input");
  if (slot == run.plan.input_names.size() || run.on_device.contains("input") ||
      run.pieced.contains("input")) {
    return std::nullopt;
  }
  const std::span<const std::byte> read = run.inputs[slot];
  const std::shared_ptr<const ResidentTensor>* tensor = HostTensorRead(source.handles, read);
  if (tensor == nullptr || run.plan.copies.size() != run.plan.outputs.size()) {
    return std::nullopt;
  }
  Outputs lent;
  for (size_t j = 0; j < run.plan.outputs.size(); ++j) {
    const Layout& layout = run.plan.outputs[j];
    const StridedCopy& copy = run.plan.copies[j];
    const bool contiguous =
        copy.sizes.empty() || (copy.sizes.size() == 1 && copy.src_strides[0] == copy.element_size &&
                               copy.dst_strides[0] == copy.element_size);
    if (!answer_only[j] ||
        (static_cast<int>(j) < request.outputs_size() &&
         request.outputs(static_cast<int>(j)).keep()) ||
        layout.element_count == 0 || layout.buffer_elements != layout.element_count ||
        copy.dst_offset != 0 || !contiguous) {
      return std::nullopt;
    }
    lent.layouts.push_back(layout);
    // Holds the tensor (and so its bytes) for as long as the answer needs them.
    lent.buffers.emplace_back(*tensor, const_cast<std::byte*>(read.data() + copy.src_offset));
  }
  return lent;
}

// Releases the handles a failed chain kept.
class KeptUntilDone {
 public:
  explicit KeptUntilDone(const HandleAccess* handles) : handles_(handles) {}
  ~KeptUntilDone() {
    if (!ids_.empty()) handles_->store->Release(handles_->caller, ids_);
  }
  void Add(const std::string& id) { ids_.push_back(id); }
  void Succeeded() { ids_.clear(); }

 private:
  const HandleAccess* handles_;
  std::vector<std::string> ids_;
};

}  // namespace

int64_t FusedChainSteps() { return fused_chain_steps.load(std::memory_order_relaxed); }
int64_t LentChainSteps() { return lent_chain_steps.load(std::memory_order_relaxed); }

absl::StatusOr<ResultParts> ExecuteChainIntoParts(const v1::RunChainRequest& chain,
                                                  const ServiceOptions& options,
                                                  Scheduler& scheduler, Placement& placement,
                                                  const StopCheck& stop, MemoryBudget& budget,
                                                  MemoryBudget::Reservation& reservation,
                                                  CallRecord& record, const HandleAccess* handles) {
  RETURN_IF_ERROR(CheckReferences(chain, options.max_chain_steps));
  const int steps = chain.steps_size();
  // Admitted as one call, so that while the store drains the steps reading
  // no handle themselves are not turned away one by one.
  HandleAccess admitted = handles != nullptr ? *handles : HandleAccess{};
  admitted.views = false;  // outputs keep the layouts the chain is planned with
  if (admitted.store != nullptr) {
    RETURN_IF_ERROR(admitted.store->Admit(ReadsHandle(chain)));
    admitted.admitted = true;
  }
  handles = &admitted;  // never null from here

  // Every step planned before any runs, earlier outputs stood for by zeros.
  // The plans are kept for the run; only a step that reads index values an
  // earlier step computes is planned again, on those values.
  std::vector<PlannedStep> planned(static_cast<size_t>(steps));  // never moved: plans view them
  std::vector<std::vector<Layout>> layouts(steps);
  for (int i = 0; i < steps; ++i) {
    RETURN_IF_ERROR(stop());
    PlannedStep& step = planned[i];
    ASSIGN_OR_RETURN(step.request,
                     StepRequest(
                         chain, i, layouts,
                         [&](const v1::StepOutput& from) {
                           return ZeroBytes(layouts[from.step()][from.output()].buffer_bytes());
                         },
                         &step.uploaded));
    absl::StatusOr<std::unique_ptr<PlannedRun>> run =
        PlanRun(step.request, options, stop, &step.uploaded, handles);
    if (!run.ok()) return InStep(i, run.status());
    step.run = *std::move(run);
    layouts[i] = step.run->plan.outputs;
    const auto indices = chain.steps(i).inputs().find("indices");
    step.replan = chain.steps(i).has_scatter_elements() &&
                  indices != chain.steps(i).inputs().end() && indices->second.has_step();
  }

  // When each step output is last read, and which come back.
  std::vector<std::vector<int>> last_read(steps);
  std::vector<std::vector<bool>> answered(steps);
  for (int i = 0; i < steps; ++i) {
    last_read[i].assign(layouts[i].size(), i);
    answered[i].assign(layouts[i].size(), false);
    for (const auto& [name, input] : chain.steps(i).inputs()) {
      if (input.has_step()) last_read[input.step().step()][input.step().output()] = i;
    }
  }
  for (const v1::ChainResult& result : chain.results()) {
    answered[result.step()][result.output()] = true;
  }
  const ChainViews views = PlanViews(chain, planned, layouts, answered);
  // A root's input is read until the last step copying through its views.
  for (int t = 0; t < steps; ++t) {
    if (views.root[t] < 0) continue;
    for (const auto& [name, input] : chain.steps(views.root[t]).inputs()) {
      if (!input.has_step()) continue;
      int& last = last_read[input.step().step()][input.step().output()];
      last = std::max(last, t);
    }
  }

  std::vector<StepOutputs> done(steps);
  KeptUntilDone kept_ids(handles);
  for (int i = 0; i < steps; ++i) {
    PlannedStep& plan = planned[i];
    // Earlier steps' outputs in place of the zeros they were planned with:
    // read in place where they are on a device, else their host bytes.
    for (const auto& [name, input] : chain.steps(i).inputs()) {
      if (!input.has_step() || views.skipped[input.step().step()]) continue;  // a view: no bytes
      StepOutputs& from = done[input.step().step()];
      const int k = input.step().output();
      if (!plan.replan && from.kept[k] != nullptr && from.kept[k]->on_device()) {
        plan.run->on_device[name] = from.kept[k].get();
        continue;
      }
      ASSIGN_OR_RETURN(const std::span<const std::byte> bytes, from.Bytes(k, *handles, stop));
      plan.uploaded.bytes[name] = bytes;
      const size_t slot = InputSlot(plan.run->plan, name);
      if (slot < plan.run->inputs.size()) plan.run->inputs[slot] = bytes;
    }
    // Freed after their last use: what this step read (views hold no bytes),
    // and what its root read when it reads through views.
    const auto free_read = [&] {
      for (const int reader : {i, views.root[i]}) {
        if (reader < 0) continue;
        for (const auto& [name, input] : chain.steps(reader).inputs()) {
          if (!input.has_step() || views.skipped[input.step().step()]) continue;
          const int from = input.step().step();
          const int k = input.step().output();
          if (last_read[from][k] == i && !answered[from][k]) done[from].Free(k, *handles);
        }
      }
    };
    if (views.skipped[i]) {
      // Its outputs are views; its run stays, holding what its input reads.
      fused_chain_steps.fetch_add(1, std::memory_order_relaxed);
      free_read();
      continue;
    }
    if (views.root[i] >= 0) {
      const PlannedRun& root = *planned[views.root[i]].run;
      ReadThroughViews(root, views.composed[i], *plan.run);
      std::vector<bool> answer_only(layouts[i].size());
      for (size_t k = 0; k < answer_only.size(); ++k) {
        answer_only[k] = answered[i][k] && last_read[i][k] == i;
      }
      std::optional<Outputs> lent =
          placement.device == Device::kOpenCl
              ? std::nullopt
              : LentFromResident(plan.request, *plan.run, root, answer_only);
      if (lent.has_value()) {
        // Settled where the bytes are, as an op on a host handle would be.
        placement.device = Device::kCpu;
        placement.label = "cpu";
        record.backend = placement.label;
        done[i].outputs = *std::move(lent);
        done[i].kept.resize(layouts[i].size());
        done[i].reservation = budget.Empty();
        done[i].lent = true;
        lent_chain_steps.fetch_add(1, std::memory_order_relaxed);
        plan.run.reset();
        free_read();
        continue;
      }
    }
    // On a device, what later steps read stays there: kept on it like a
    // result, and released after its last use.
    if (handles != nullptr && handles->store != nullptr &&
        (placement.device == Device::kOpenCl || !plan.run->on_device.empty())) {
      for (size_t k = 0; k < layouts[i].size(); ++k) {
        if (last_read[i][k] == i || answered[i][k]) continue;
        while (plan.request.outputs_size() <= static_cast<int>(k)) plan.request.add_outputs();
        plan.request.mutable_outputs(static_cast<int>(k))->set_keep(true);
      }
    }
    StepOutputs& step = done[i];
    step.reservation = budget.Empty();
    CallContext call{plan.request, options, scheduler, placement, stop, step.reservation};
    call.handles = handles;
    // A replanned step reads its inputs as uploaded pieces; the others run as planned.
    call.uploaded = plan.replan ? &plan.uploaded : nullptr;
    call.planned = plan.replan ? nullptr : plan.run.get();
    absl::StatusOr<Outputs> outputs = Execute(call, IntoHeldBuffers{});
    plan.run.reset();  // and with it the handles and regions it pinned
    // The first step settles AUTO (Execute leaves `placement` where it ran),
    // so the rest of the chain runs there too.
    record.backend = placement.label;
    if (!outputs.ok()) return InStep(i, outputs.status());
    step.outputs = *std::move(outputs);
    step.kept.resize(step.outputs.layouts.size());
    int64_t held = 0;
    for (size_t k = 0; k < step.outputs.layouts.size(); ++k) {
      if (step.outputs.buffers[k] != nullptr) held += step.outputs.layouts[k].buffer_bytes();
      if (k >= step.outputs.handles.size() || !step.outputs.handles[k].has_value()) continue;
      const std::string& id = step.outputs.handles[k]->id();
      kept_ids.Add(id);
      ASSIGN_OR_RETURN(step.kept[k], handles->store->Use(handles->caller, id, "a kept result"));
    }
    // What the step reserved besides its outputs (device copies, a part) is done with.
    step.reservation.Shrink(step.reservation.bytes() - held);
    // And what it made for no one.
    free_read();
    for (size_t k = 0; k < layouts[i].size(); ++k) {
      if (last_read[i][k] == i && !answered[i][k]) step.Free(static_cast<int>(k), *handles);
    }
  }

  Outputs answer;
  for (const v1::ChainResult& result : chain.results()) {
    StepOutputs& from = done[result.step()];
    const int k = result.output();
    answer.layouts.push_back(from.outputs.layouts[k]);
    answer.buffers.push_back(from.outputs.buffers[k]);
    answer.handles.push_back(
        k < static_cast<int>(from.outputs.handles.size()) ? from.outputs.handles[k] : std::nullopt);
    if (from.outputs.buffers[k] != nullptr && !from.lent) {
      from.reservation.TransferTo(reservation, from.outputs.layouts[k].buffer_bytes());
    }
  }
  kept_ids.Succeeded();
  return ResultParts(std::move(answer), placement.label, options.chunk_bytes);
}

}  // namespace tensorop::server
