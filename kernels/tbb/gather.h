// GatherWalk on oneTBB (Gather, GatherElements): blocks of rows in parallel.
#ifndef TENSOROP_KERNELS_TBB_GATHER_H_
#define TENSOROP_KERNELS_TBB_GATHER_H_

#include <cstddef>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"

namespace tensorop::tbb_backend {

absl::Status RunGatherWalk(const GatherWalk& walk, const std::byte* input, const std::byte* indices,
                           std::byte* output, const StopCheck& stop);

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_GATHER_H_
