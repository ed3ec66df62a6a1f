#include "kernels/tbb/execute.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/tbb/blocks.h"
#include "kernels/tbb/gather.h"
#include "kernels/tbb/scatter_elements.h"
#include "kernels/tbb/strided_copy.h"

namespace tensorop::tbb_backend {

namespace {

// The bytes a plan's copies and fills write.
int64_t CopiedBytes(const ExecutionPlan& plan) {
  int64_t bytes = 0;
  for (const StridedCopy& copy : plan.copies) bytes += copy.element_count * copy.element_size;
  for (const StridedCopy& fill : plan.fills) bytes += fill.element_count * fill.element_size;
  return bytes;
}

}  // namespace

bool RunsOnCallingThread(const ExecutionPlan& plan) {
  // Every ForEachBlock of a plan counts some of these bytes: when all of them
  // together are under the bound, each loop is.
  int64_t bytes = CopiedBytes(plan);
  for (const ScatterWalk& walk : plan.scatters) {
    bytes += walk.element_count * (walk.element_size + walk.index_size);
  }
  for (const GatherWalk& walk : plan.gathers) {
    bytes += walk.element_count * (walk.element_size + walk.index_size);
  }
  return bytes <= kSerialBytes;
}

absl::Status Execute(const ExecutionPlan& plan, std::span<const std::byte* const> inputs,
                     std::span<std::byte* const> outputs, const StopCheck& stop) {
  if (inputs.size() != plan.input_names.size() || outputs.size() != plan.outputs.size()) {
    return absl::InternalError(absl::StrCat(
        "plan for ", plan.op, " takes ", plan.input_names.size(), " inputs and ",
        plan.outputs.size(), " outputs; got ", inputs.size(), " and ", outputs.size()));
  }
  RETURN_IF_ERROR(stop());
  // Copies, then fills (from the plan's value), by one index.
  const size_t count = plan.copies.size() + plan.fills.size();
  const auto run = [&](size_t i) {
    if (i < plan.copies.size()) {
      const StridedCopy& copy = plan.copies[i];
      return RunStridedCopy(copy, inputs[copy.input_slot], outputs[copy.output_slot], stop);
    }
    const StridedCopy& fill = plan.fills[i - plan.copies.size()];
    return RunStridedCopy(fill, plan.fill_value.data(), outputs[fill.output_slot], stop);
  };
  if (count == 1) {
    RETURN_IF_ERROR(run(0));
  } else if (count > 1) {
    // Many copies (a split's outputs, an input read in pieces, a pad's slabs)
    // write disjoint bytes: they run in parallel with each other, grouped into
    // blocks of about kBlockBytes, a large one's own blocks in parallel too.
    const int64_t bytes = CopiedBytes(plan);
    const int64_t blocks = static_cast<int64_t>(count);
    std::mutex mutex;
    absl::Status failed;
    RETURN_IF_ERROR(ForEachBlock(blocks, blocks * kBlockBytes / std::max<int64_t>(bytes, 1), bytes,
                                 stop, [&](int64_t begin, int64_t end) {
                                   for (int64_t i = begin; i < end; ++i) {
                                     absl::Status status = run(static_cast<size_t>(i));
                                     if (!status.ok()) {
                                       std::lock_guard<std::mutex> lock(mutex);
                                       if (failed.ok()) failed = std::move(status);
                                       return;
                                     }
                                   }
                                 }));
    RETURN_IF_ERROR(failed);
  }
  for (const ScatterWalk& walk : plan.scatters) {
    RETURN_IF_ERROR(RunScatterWalk(walk, inputs[walk.indices_slot], inputs[walk.updates_slot],
                                   outputs[walk.output_slot], stop));
  }
  for (const GatherWalk& walk : plan.gathers) {
    RETURN_IF_ERROR(RunGatherWalk(walk, inputs[walk.input_slot], inputs[walk.indices_slot],
                                  outputs[walk.output_slot], stop));
  }
  return absl::OkStatus();
}

}  // namespace tensorop::tbb_backend
