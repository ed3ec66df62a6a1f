// StridedCopy on oneTBB: blocks of the flattened element range run in parallel.
#ifndef TENSOROP_KERNELS_TBB_STRIDED_COPY_H_
#define TENSOROP_KERNELS_TBB_STRIDED_COPY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/plan/plan.h"

namespace tensorop::tbb_backend {

absl::Status RunStridedCopy(const StridedCopy& copy, const std::byte* src, std::byte* dst,
                            const StopCheck& stop);

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_STRIDED_COPY_H_
