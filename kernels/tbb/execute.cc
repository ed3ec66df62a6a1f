#include "kernels/tbb/execute.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/tbb/scatter_elements.h"
#include "kernels/tbb/strided_copy.h"

namespace tensorop::tbb_backend {

absl::Status Execute(const ExecutionPlan& plan, std::span<const std::byte* const> inputs,
                     std::span<std::byte* const> outputs, const StopCheck& stop) {
  if (inputs.size() != plan.input_names.size() || outputs.size() != plan.outputs.size()) {
    return absl::InternalError(absl::StrCat(
        "plan for ", plan.op, " takes ", plan.input_names.size(), " inputs and ",
        plan.outputs.size(), " outputs; got ", inputs.size(), " and ", outputs.size()));
  }
  RETURN_IF_ERROR(stop());
  for (const StridedCopy& copy : plan.copies) {
    RETURN_IF_ERROR(RunStridedCopy(copy, inputs[copy.input_slot], outputs[copy.output_slot], stop));
  }
  for (const ScatterWalk& walk : plan.scatters) {
    RETURN_IF_ERROR(RunScatterWalk(walk, inputs[walk.indices_slot], inputs[walk.updates_slot],
                                   outputs[walk.output_slot], stop));
  }
  return absl::OkStatus();
}

}  // namespace tensorop::tbb_backend
