// One element of a dtype from its decimal text, exactly as a conformance case
// writes a tensor value: how pad's constant value arrives (OPERATORS.md "Pad").
#ifndef TENSOROP_CORE_ELEMENT_TEXT_H_
#define TENSOROP_CORE_ELEMENT_TEXT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace tensorop {

// Longer text is refused before any parse: no value needs it, and a parse of
// megabytes of digits is work an attacker chooses.
inline constexpr size_t kMaxElementTextBytes = 1024;

// The bits of `text` as an element of `dtype`, in the low ElementSize(dtype)
// bytes (little-endian when stored):
// - integer dtypes: a decimal integer in the dtype's range ("-128",
//   "18446744073709551615"), or a decimal number that is exactly such an
//   integer at most 2^53 ("2.0", "1e3");
// - bool: "true", "false", or the integers 1 and 0;
// - float dtypes: a decimal number rounded to the nearest value of the dtype
//   from its exact value, ties to even; "nan" (the quiet NaN with sign 0 and no
//   payload), "inf", "-inf".
// Anything else is INVALID_ARGUMENT naming `what`, the text and what the dtype
// takes.
absl::StatusOr<uint64_t> ElementBitsFromText(DType dtype, absl::string_view text,
                                             absl::string_view what);

}  // namespace tensorop

#endif  // TENSOROP_CORE_ELEMENT_TEXT_H_
