// Pad (DML_PADDING1_OPERATOR_DESC, ONNX Pad): every rule of OPERATORS.md "Pad".
#ifndef TENSOROP_CORE_VALIDATE_PAD_H_
#define TENSOROP_CORE_VALIDATE_PAD_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

enum class PadMode { kConstant, kEdge, kReflect, kSymmetric };

// Output positions out_begin + r * period + j along one dimension, for
// r < repeats and j < length, read input position in_begin + j * in_step there
// (in_step: 1 forward, -1 mirrored, 0 an edge repeated). A dimension's runs
// cover its output positions once each.
struct PadRun {
  int64_t out_begin = 0;
  int64_t length = 0;
  int64_t in_begin = 0;
  int64_t in_step = 1;
  int64_t repeats = 1;
  int64_t period = 0;  // positions between repeats; 0 when repeats is 1
};

// One plan holds at most this many copies: the product over the dimensions of
// their runs (at most 6 each; at most 3 when no padding is wider than the
// input, and 3^8 fits). Wider reflections in many dimensions at once are
// RESOURCE_EXHAUSTED.
inline constexpr int64_t kMaxPadCopies = 8192;

struct PadGeometry {
  Layout input;
  Layout output;
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> start_padding;
  uint64_t value_bits = 0;                // constant mode's element
  std::vector<std::vector<PadRun>> runs;  // the other modes: per dimension
};

absl::StatusOr<PadGeometry> ValidatePad(const PadAttrs& attrs, const TensorView& input,
                                        std::span<const OutputDesc> outputs, const Limits& limits);

// The output's sizes, input.sizes[i] + start_padding[i] + end_padding[i], after
// the rules that need only sizes (counts, mode, reflect's two elements):
// INVALID_ARGUMENT for a rule broken or a size beyond 64 bits; the element
// count is left to the caller. For OutputSizes too, which has no input bytes.
absl::StatusOr<std::vector<int64_t>> PaddedSizes(const PadAttrs& attrs,
                                                 std::span<const int64_t> input_sizes);

// The runs of one dimension of `size` input positions padded by `start` and
// `end` in a mode other than constant; the padded size fits the element limit.
std::vector<PadRun> DimensionRuns(PadMode mode, int64_t size, int64_t start, int64_t end);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_PAD_H_
