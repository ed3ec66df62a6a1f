// Index tensors (ScatterElements, Gather, GatherElements): their dtype, and the
// range of every value, the first bad one named by its coordinates.
#ifndef TENSOROP_CORE_VALIDATE_INDICES_H_
#define TENSOROP_CORE_VALIDATE_INDICES_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "core/tensor.h"

namespace tensorop {

// INT32, INT64, UINT32 or UINT64: INVALID_ARGUMENT naming `indices.dtype`
// otherwise.
absl::Status CheckIndexDType(const Layout& indices);

// Every value of `indices` (its bytes `data`, read through its strides), after
// adding `axis_size` to a negative one, lies in [0, axis_size); else
// INVALID_ARGUMENT naming the first bad value in row-major order, its
// coordinates and `op`.axis. Unsigned values are never negative. `stop` is
// asked at bounded intervals.
absl::Status CheckIndexValues(absl::string_view op, const Layout& indices,
                              std::span<const std::byte> data, int64_t axis, int64_t axis_size,
                              const StopCheck& stop);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_INDICES_H_
