// ScatterWalk on oneTBB: blocks of the partition dimension in parallel, each in
// row-major order.
#ifndef TENSOROP_KERNELS_TBB_SCATTER_ELEMENTS_H_
#define TENSOROP_KERNELS_TBB_SCATTER_ELEMENTS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"

namespace tensorop::tbb_backend {

absl::Status RunScatterWalk(const ScatterWalk& walk, const std::byte* indices,
                            const std::byte* updates, std::byte* output, const StopCheck& stop);

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_SCATTER_ELEMENTS_H_
