// RunChain's executor: the steps PlanChain planned (server/engine/chain_steps.h)
// run one after another, each an ordinary request through the pipeline.
#include "server/engine/chain.h"

#include <atomic>
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
#include "core/plan/strided_copy.h"
#include "core/status_macros.h"
#include "server/engine/chain_steps.h"

namespace tensorop::server {
namespace {

std::atomic<int64_t> fused_chain_steps{0};
std::atomic<int64_t> lent_chain_steps{0};

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

// Points `run`'s input "input" at what `source`'s reads (the same bytes, on a
// device or in host memory, whole or in pieces), and its copies at `windows`
// on it: one copy per output, however many windows were composed.
void ReadThroughViews(const PlannedRun& source, const std::vector<InputWindow>& windows,
                      PlannedRun& run) {
  const size_t slot = InputSlot(run.plan, "input");
  const size_t read = InputSlot(source.plan, "input");
  run.inputs[slot] = source.inputs[read];
  run.sources[slot] = source.sources[read];
  run.plan.windows = windows;
  run.plan.copies.clear();
  for (size_t j = 0; j < windows.size(); ++j) {
    run.plan.copies.push_back(PlanStridedCopy(run.plan.outputs[j], windows[j],
                                              static_cast<int>(slot), static_cast<int>(j)));
  }
}

// Where each output of `run` starts on the input its copies read, when every
// one is answered and read by no later step (`answer_only`), not kept, and one
// contiguous run of that input in its own unpadded layout: those bytes are the
// answer. Null otherwise.
std::optional<std::vector<int64_t>> LendableRuns(const v1::RunRequest& request,
                                                 const PlannedRun& run,
                                                 const std::vector<bool>& answer_only) {
  // One copy per output and nothing else writing it (a pad's fills would).
  if (run.plan.copies.size() != run.plan.outputs.size() || !run.plan.fills.empty()) {
    return std::nullopt;
  }
  std::vector<int64_t> starts;
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
        copy.element_count != layout.element_count || copy.dst_offset != 0 || !contiguous) {
      return std::nullopt;
    }
    starts.push_back(copy.src_offset);
  }
  return starts;
}

// The outputs of `run` (a step reading views, its copies through them made
// by ReadThroughViews) lent from the resident tensor its input reads, which
// `source` (its root's run) pins, when LendableRuns allows: as Fetch answers a
// handle, nothing is copied. Null otherwise.
std::optional<Outputs> LentFromResident(const v1::RunRequest& request, const PlannedRun& run,
                                        const PlannedRun& source,
                                        const std::vector<bool>& answer_only) {
  const size_t slot = InputSlot(run.plan, "input");
  if (slot == run.plan.input_names.size() ||
      run.sources[slot].kind == InputSource::Kind::kDeviceHandle ||
      run.sources[slot].kind == InputSource::Kind::kReceived) {
    return std::nullopt;
  }
  const std::span<const std::byte> read = run.inputs[slot];
  const std::shared_ptr<const ResidentTensor>* tensor = HostTensorRead(source.handles, read);
  if (tensor == nullptr) return std::nullopt;
  const std::optional<std::vector<int64_t>> starts = LendableRuns(request, run, answer_only);
  if (!starts.has_value()) return std::nullopt;
  Outputs lent;
  for (size_t j = 0; j < starts->size(); ++j) {
    lent.layouts.push_back(run.plan.outputs[j]);
    // Holds the tensor (and so its bytes) for as long as the answer needs them.
    lent.buffers.emplace_back(*tensor, const_cast<std::byte*>(read.data() + (*starts)[j]));
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

// One chain's run over its planned steps: each step's inputs fed from the
// outputs earlier steps made, the step run (or its outputs lent, or left as
// views), and what no later step reads freed.
class ChainRun {
 public:
  ChainRun(const v1::RunChainRequest& chain, const Engine& engine, Placement& placement,
           const StopCheck& stop, MemoryBudget::Reservation& reservation,
           const HandleAccess& handles, std::vector<PlannedStep> steps)
      : chain_(chain),
        engine_(engine),
        placement_(placement),
        stop_(stop),
        reservation_(reservation),
        handles_(handles),
        steps_(std::move(steps)),
        kept_ids_(&handles) {}

  absl::Status Run() {
    for (int i = 0; i < static_cast<int>(steps_.size()); ++i) {
      RETURN_IF_ERROR(FeedInputs(i));
      PlannedStep& step = steps_[i];
      // Reading views: its copies through them, from its root's input.
      if (step.root >= 0) ReadThroughViews(*steps_[step.root].run, step.composed, *step.run);
      if (step.skipped) {
        // Its outputs are views; its run stays, holding what its input reads.
        fused_chain_steps.fetch_add(1, std::memory_order_relaxed);
      } else if (!Lend(i)) {
        RETURN_IF_ERROR(Execute(i));
      }
      FreeRead(i);
    }
    return absl::OkStatus();
  }

  // The results' outputs, each buffer with its reservation.
  Outputs Answer() {
    Outputs answer;
    for (const v1::ChainResult& result : chain_.results()) {
      StepOutputs& from = steps_[result.step()].made;
      const int k = result.output();
      answer.layouts.push_back(from.outputs.layouts[k]);
      answer.buffers.push_back(from.outputs.buffers[k]);
      answer.handles.push_back(k < static_cast<int>(from.outputs.handles.size())
                                   ? from.outputs.handles[k]
                                   : std::nullopt);
    }
    kept_ids_.Succeeded();
    return answer;
  }

 private:
  // Earlier steps' outputs in place of the zeros step `i` was planned with:
  // read in place where they are on a device, else their host bytes.
  absl::Status FeedInputs(int i) {
    PlannedStep& step = steps_[i];
    for (const auto& [name, input] : chain_.steps(i).inputs()) {
      if (!input.has_step() || steps_[input.step().step()].skipped) continue;  // a view: no bytes
      StepOutputs& from = steps_[input.step().step()].made;
      const int k = input.step().output();
      const size_t slot = InputSlot(step.run->plan, name);
      if (!step.replan && from.kept[k] != nullptr && from.kept[k]->on_device()) {
        if (slot < step.run->sources.size()) {
          step.run->sources[slot] = InputSource::OnDevice(from.kept[k].get());
        }
        continue;
      }
      ASSIGN_OR_RETURN(const std::span<const std::byte> bytes,
                       from.Bytes(k, reservation_, handles_, stop_));
      step.uploaded[name] = InputSource::Uploaded(bytes);
      if (slot < step.run->sources.size()) {
        step.run->inputs[slot] = bytes;
        step.run->sources[slot] = InputSource::Uploaded(bytes);
      }
    }
    return absl::OkStatus();
  }

  // Step `i` answered without a copy: reading views, with the bytes of the
  // resident tensor they are on (LentFromResident), or as a window step on an
  // earlier step's output, with that output's buffer (LendFromStep). Whether
  // it was.
  bool Lend(int i) {
    PlannedStep& step = steps_[i];
    if (placement_.device == Device::kOpenCl) return false;
    std::vector<bool> answer_only;
    for (const StepOutputPlan& output : step.outputs) {
      answer_only.push_back(output.answered && output.last_read == i);
    }
    if (step.root < 0) return LendFromStep(i, answer_only);
    std::optional<Outputs> lent =
        LentFromResident(step.request, *step.run, *steps_[step.root].run, answer_only);
    if (!lent.has_value()) return false;
    // Settled where the bytes are, as an op on a host handle would be.
    placement_.device = Device::kCpu;
    placement_.label = "cpu";
    step.made.outputs = *std::move(lent);
    step.made.kept.resize(step.outputs.size());
    step.made.lent = true;
    lent_chain_steps.fetch_add(1, std::memory_order_relaxed);
    step.run.reset();
    return true;
  }

  // Step `i`, a window step on an earlier step's output that is held in host
  // memory, read by no later step and not itself a result, answered with that
  // buffer's bytes where LendableRuns allows. The buffer's reservation stays
  // with it, as long as one of step `i`'s windows holds it.
  bool LendFromStep(int i, const std::vector<bool>& answer_only) {
    PlannedStep& step = steps_[i];
    if (!step.windows_on.has_value()) return false;
    PlannedStep& from = steps_[step.windows_on->step()];
    const int k = step.windows_on->output();
    if (from.made.lent || from.made.borrowed || from.outputs[k].answered ||
        from.outputs[k].last_read != i || k >= static_cast<int>(from.made.outputs.buffers.size()) ||
        from.made.outputs.buffers[k] == nullptr) {
      return false;
    }
    const std::optional<std::vector<int64_t>> starts =
        LendableRuns(step.request, *step.run, answer_only);
    if (!starts.has_value()) return false;
    SharedOutput buffer = std::move(from.made.outputs.buffers[k]);  // Free then finds none
    Outputs lent;
    for (size_t j = 0; j < starts->size(); ++j) {
      lent.layouts.push_back(step.run->plan.outputs[j]);
      lent.buffers.emplace_back(buffer, buffer.get() + (*starts)[j]);
    }
    step.made.outputs = std::move(lent);
    step.made.kept.resize(step.outputs.size());
    step.made.borrowed = true;
    lent_chain_steps.fetch_add(1, std::memory_order_relaxed);
    step.run.reset();
    return true;
  }

  // Runs step `i` through the pipeline into held buffers.
  absl::Status Execute(int i) {
    PlannedStep& step = steps_[i];
    // On a device, what later steps read stays there: kept on it like a
    // result, and released after its last use.
    if (handles_.store != nullptr &&
        (placement_.device == Device::kOpenCl || ReadsFromDevice(*step.run))) {
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        if (step.outputs[k].last_read == i || step.outputs[k].answered) continue;
        while (step.request.outputs_size() <= static_cast<int>(k)) step.request.add_outputs();
        step.request.mutable_outputs(static_cast<int>(k))->set_keep(true);
      }
    }
    StepOutputs& made = step.made;
    // What the step reserves besides its outputs' buffers (device copies, a
    // part) is done with when it returns.
    MemoryBudget::Reservation reservation = reservation_.Sibling();
    CallContext call = engine_.Call(step.request, placement_, stop_, reservation);
    call.handles = &handles_;
    // A replanned step reads its inputs as uploaded pieces; the others run as planned.
    call.uploaded = step.replan ? &step.uploaded : nullptr;
    call.planned = step.replan ? nullptr : step.run.get();
    absl::StatusOr<Outputs> outputs = server::Execute(call, IntoHeldBuffers{});
    step.run.reset();  // and with it the handles and regions it pinned
    // The first step settles AUTO (Execute leaves `placement` where it ran),
    // so the rest of the chain runs there too.
    if (!outputs.ok()) return InStep(i, outputs.status());
    made.outputs = *std::move(outputs);
    made.kept.resize(made.outputs.layouts.size());
    for (size_t k = 0; k < made.outputs.layouts.size(); ++k) {
      if (k >= made.outputs.handles.size() || !made.outputs.handles[k].has_value()) continue;
      const std::string& id = made.outputs.handles[k]->id();
      kept_ids_.Add(id);
      ASSIGN_OR_RETURN(made.kept[k], handles_.store->Use(handles_.caller, id, "a kept result"));
    }
    return absl::OkStatus();
  }

  // Frees, after their last use, what step `i` read (views hold no bytes),
  // what its root read when it read through views, and what it made for no
  // one.
  void FreeRead(int i) {
    for (const int reader : {i, steps_[i].root}) {
      if (reader < 0) continue;
      for (const auto& [name, input] : chain_.steps(reader).inputs()) {
        if (!input.has_step() || steps_[input.step().step()].skipped) continue;
        PlannedStep& from = steps_[input.step().step()];
        const int k = input.step().output();
        if (from.outputs[k].last_read == i && !from.outputs[k].answered) {
          from.made.Free(k, handles_);
        }
      }
    }
    PlannedStep& step = steps_[i];
    if (step.skipped) return;  // made nothing
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      if (step.outputs[k].last_read == i && !step.outputs[k].answered) {
        step.made.Free(static_cast<int>(k), handles_);
      }
    }
  }

  const v1::RunChainRequest& chain_;
  const Engine& engine_;
  Placement& placement_;
  const StopCheck& stop_;
  // The call's: the steps' reservations, and their buffers', are its siblings.
  MemoryBudget::Reservation& reservation_;
  const HandleAccess& handles_;
  std::vector<PlannedStep> steps_;
  KeptUntilDone kept_ids_;
};

}  // namespace

int64_t FusedChainSteps() { return fused_chain_steps.load(std::memory_order_relaxed); }
int64_t LentChainSteps() { return lent_chain_steps.load(std::memory_order_relaxed); }

absl::StatusOr<ResultParts> ExecuteChainIntoParts(const v1::RunChainRequest& chain,
                                                  const Engine& engine, Placement& placement,
                                                  const StopCheck& stop,
                                                  MemoryBudget::Reservation& reservation,
                                                  CallRecord& record, const HandleAccess* handles) {
  // Admitted as one call, so that while the store drains the steps reading
  // no handle themselves are not turned away one by one.
  HandleAccess admitted = handles != nullptr ? *handles : HandleAccess{};
  admitted.views = false;  // outputs keep the layouts the chain is planned with
  RETURN_IF_ERROR(CheckReferences(chain, engine.options().max_chain_steps));
  if (admitted.store != nullptr) {
    RETURN_IF_ERROR(admitted.store->Admit(ReadsHandle(chain)));
    admitted.admitted = true;
  }
  ASSIGN_OR_RETURN(std::vector<PlannedStep> steps,
                   PlanChain(chain, engine.options(), stop, &admitted));
  ChainRun run(chain, engine, placement, stop, reservation, admitted, std::move(steps));
  const absl::Status ran = run.Run();
  // Where the steps ran (a lent step settles on the CPU): the answer's backend.
  record.backend = placement.label;
  RETURN_IF_ERROR(ran);
  return ResultParts(run.Answer(), placement.label, engine.options().chunk_bytes);
}

}  // namespace tensorop::server
