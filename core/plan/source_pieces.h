// Runs a plan on an input whose bytes lie in pieces (a request's data left in
// the slices gRPC received it in): each copy reading the input is cut into
// copies that each read one piece, so the bytes are read where they lie
// instead of being gathered into one buffer first.
#ifndef TENSOROP_CORE_PLAN_SOURCE_PIECES_H_
#define TENSOROP_CORE_PLAN_SOURCE_PIECES_H_

#include <cstdint>
#include <optional>
#include <span>

#include "core/plan/byte_range.h"
#include "core/plan/plan.h"

namespace tensorop {

// `plan` with every copy that reads input `slot` cut into copies that each
// read one of `pieces` (the input's bytes [begin, end) each, in order, one
// after the other from 0): piece i is read through the new slot
// plan.input_names.size() + i, its bytes addressed from the piece's start,
// and plan.input_names grows by one name (the input's) per piece. The
// copies' outputs stay disjoint, so they still run in any order.
// Nullopt when a scatter walk reads the slot, when an element straddles two
// pieces, or when the cut takes more than `max_copies` copies (reads that
// jump between pieces, such as a transpose's): gather those inputs instead.
std::optional<ExecutionPlan> CutCopiesAtPieces(const ExecutionPlan& plan, int slot,
                                               std::span<const ByteRange> pieces,
                                               int64_t max_copies);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_SOURCE_PIECES_H_
