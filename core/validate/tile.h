// Tile (DML_TILE_OPERATOR_DESC, ONNX Tile): every rule of OPERATORS.md "Tile".
#ifndef TENSOROP_CORE_VALIDATE_TILE_H_
#define TENSOROP_CORE_VALIDATE_TILE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/attrs.h"
#include "core/limits.h"
#include "core/tensor.h"

namespace tensorop {

// The output repeats the input `repeats[i]` times along each dimension i:
// output[c] = input[d] with d[i] = c[i] mod input.sizes[i].
struct TileGeometry {
  Layout input;
  Layout output;
  std::vector<int64_t> repeats;
};

absl::StatusOr<TileGeometry> ValidateTile(const TileAttrs& attrs, const TensorView& input,
                                          std::span<const OutputDesc> outputs,
                                          const Limits& limits);

// The output's sizes, input.sizes[i] * repeats[i]: INVALID_ARGUMENT for a rule
// broken or a size beyond 64 bits; the element count is left to the caller. For
// OutputSizes too, which has no input bytes.
absl::StatusOr<std::vector<int64_t>> TiledSizes(const TileAttrs& attrs,
                                                std::span<const int64_t> input_sizes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_VALIDATE_TILE_H_
