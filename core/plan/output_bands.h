// Cuts a plan into bands that finish its outputs front to back, so that a
// streamed result can go out while the rest of it is computed.
#ifndef TENSOROP_CORE_PLAN_OUTPUT_BANDS_H_
#define TENSOROP_CORE_PLAN_OUTPUT_BANDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/plan/plan.h"

namespace tensorop {

// Part of a plan: run after the bands before it, it leaves bytes
// [0, ready_bytes) of output `output` (and every output before it) final.
struct OutputBand {
  ExecutionPlan plan;  // the whole plan's outputs and slots, this band's copies
  size_t output = 0;
  int64_t ready_bytes = 0;
};

// At most this many bands per output: larger bands beyond that, so the bands'
// plans and their scheduling stay small whatever the band size.
inline constexpr int64_t kMaxBandsPerOutput = 256;

// `plan` as bands of about `band_bytes` of output each (at least one row of
// a copy's outermost dimension), in output order. Nullopt when no order of
// bands finishes the bytes front to back: the plan scatters (an update may
// land anywhere), an output has more than one copy, or a copy's outermost
// dimension does not step over everything inside it (a transposed output).
// Bytes a band does not write (padding) must already be zeroed, as for the
// whole plan.
std::optional<std::vector<OutputBand>> SplitIntoOutputBands(const ExecutionPlan& plan,
                                                            int64_t band_bytes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_OUTPUT_BANDS_H_
