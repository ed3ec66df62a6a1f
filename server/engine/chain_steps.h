// RunChain's steps, one structure each: what the chain's plan says of a step
// (its request and plan, which of its outputs are read when and which come
// back, whether it runs or its outputs are views) and, while the chain runs,
// the outputs it made. Planned here (PlanChain) before any step runs;
// run by server/engine/chain.cc.
#ifndef TENSOROP_SERVER_ENGINE_CHAIN_STEPS_H_
#define TENSOROP_SERVER_ENGINE_CHAIN_STEPS_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/plan/strided_copy.h"
#include "server/data/handle_store.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/service_options.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// `status` of steps[step], its message naming the step.
absl::Status InStep(int step, const absl::Status& status);

// What the chain's shape allows, before any step is planned: the step count,
// every reference to an earlier step's output, every result named once, and
// no step output that asks for what only results say (keep, shared memory).
absl::Status CheckReferences(const v1::RunChainRequest& chain, int max_steps);

// Where an output of a step that does not run lives: `window` on the input
// of step `root`, the first step up its line whose input exists as bytes.
struct View {
  int root = -1;
  InputWindow window;
};

// The outputs one step made, held while later steps read them.
struct StepOutputs {
  Outputs outputs;  // a kept output's buffer is null: its bytes are `kept`'s
  std::vector<std::shared_ptr<const ResidentTensor>> kept;
  bool lent = false;  // the buffers are a resident tensor's (LentFromResident), not reserved
  // The buffers are windows of an earlier step's buffer (which holds its
  // reservation whole, as long as a window does).
  bool borrowed = false;

  // Output `output`'s bytes in host memory: a kept result that lives on a
  // device is downloaded for the steps that read it (once, into a buffer
  // reserved in the call of `call`).
  absl::StatusOr<std::span<const std::byte>> Bytes(int output,
                                                   const MemoryBudget::Reservation& call,
                                                   const HandleAccess& handles,
                                                   const StopCheck& stop);
  // Gives output `output`'s buffer (or intermediate handle) back.
  void Free(int output, const HandleAccess& handles);
};

// One output of a step, as the chain's plan sees it.
struct StepOutputPlan {
  Layout layout;
  int last_read = 0;                        // the last step reading it; its own when none does
  bool answered = false;                    // a result names it
  std::optional<View> view = std::nullopt;  // where it lives when its step does not run
};

// One step of the chain: a request of its own, planned before the chain runs.
struct PlannedStep {
  v1::RunRequest request;
  UploadedInputs uploaded;  // the bytes of its inputs that the request does not carry
  std::unique_ptr<PlannedRun> run;
  bool replan = false;  // it reads index values an earlier step computes
  std::vector<StepOutputPlan> outputs;
  // A window step (slice, strided_slice, split) whose outputs no one needs as
  // bytes does not run: each output is a view, its window composed onto what
  // its input reads.
  bool skipped = false;
  // A step that runs while reading a view: the step whose input the view is
  // on (else -1), and its own windows composed onto that input, by output. It
  // copies once, from there.
  int root = -1;
  std::vector<InputWindow> composed;
  // A window step that runs on an earlier step's output made as bytes (not a
  // view): that output, whose buffer may answer its windows without a copy.
  std::optional<v1::StepOutput> windows_on = std::nullopt;
  // While the chain runs: what the step made.
  StepOutputs made;
};

// Every step of `chain`, whose references CheckReferences passed, planned
// before any runs, earlier outputs stood for by zeros; which step reads which
// output last, which outputs come back, and which steps leave views instead
// of running. Errors name steps[i] or results[j].
absl::StatusOr<std::vector<PlannedStep>> PlanChain(const v1::RunChainRequest& chain,
                                                   const ServiceOptions& options,
                                                   const StopCheck& stop,
                                                   const HandleAccess* handles);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_ENGINE_CHAIN_STEPS_H_
