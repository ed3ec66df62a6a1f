// Operator parameters as plain data, one struct per operator.
#ifndef TENSOROP_CORE_ATTRS_H_
#define TENSOROP_CORE_ATTRS_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace tensorop {

// DML_SLICE1_OPERATOR_DESC (OPERATORS.md "Slice").
struct SliceAttrs {
  std::vector<int64_t> offsets = {};
  std::vector<int64_t> window_sizes = {};
  std::vector<int64_t> window_strides = {};
};

// OpenVINO StridedSlice-1 (OPERATORS.md "StridedSlice").
struct StridedSliceAttrs {
  std::vector<int64_t> begin = {};
  std::vector<int64_t> end = {};
  std::vector<int64_t> stride = {};  // empty: all 1
  std::vector<int64_t> begin_mask = {};
  std::vector<int64_t> end_mask = {};
  std::vector<int64_t> new_axis_mask = {};
  std::vector<int64_t> shrink_axis_mask = {};
  std::vector<int64_t> ellipsis_mask = {};
};

// DML_SPLIT_OPERATOR_DESC (OPERATORS.md "Split").
struct SplitAttrs {
  int64_t axis = 0;
};

// DML_SCATTER_OPERATOR_DESC (OPERATORS.md "ScatterElements").
struct ScatterElementsAttrs {
  int64_t axis = 0;
};

// ONNX Transpose (OPERATORS.md "Transpose").
struct TransposeAttrs {
  std::vector<int64_t> perm = {};  // empty: the dimensions reversed
};

// ONNX Reshape without allowzero's 0 (OPERATORS.md "Reshape").
struct ReshapeAttrs {
  std::vector<int64_t> sizes = {};  // one entry may be -1
};

// ONNX Expand (OPERATORS.md "Expand").
struct ExpandAttrs {
  std::vector<int64_t> sizes = {};  // aligned with the input's at the last entry
};

// DML_TILE_OPERATOR_DESC, ONNX Tile (OPERATORS.md "Tile").
struct TileAttrs {
  std::vector<int64_t> repeats = {};  // one per dimension, each >= 1
};

// DML_GATHER_OPERATOR_DESC, ONNX Gather (OPERATORS.md "Gather").
struct GatherAttrs {
  int64_t axis = 0;
};

// DML_GATHER_ELEMENTS_OPERATOR_DESC, ONNX GatherElements (OPERATORS.md
// "GatherElements").
struct GatherElementsAttrs {
  int64_t axis = 0;
};

// DML_JOIN_OPERATOR_DESC, ONNX Concat (OPERATORS.md "Join").
struct JoinAttrs {
  int64_t axis = 0;
};

// DML_PADDING1_OPERATOR_DESC, ONNX Pad (OPERATORS.md "Pad").
struct PadAttrs {
  std::vector<int64_t> start_padding = {};  // one per dimension, each >= 0
  std::vector<int64_t> end_padding = {};
  std::string mode = {};   // "constant" (or empty), "edge", "reflect", "symmetric"
  std::string value = {};  // constant mode's element as text; empty: 0
};

using OpAttrs = std::variant<SliceAttrs, StridedSliceAttrs, SplitAttrs, ScatterElementsAttrs,
                             TransposeAttrs, ReshapeAttrs, ExpandAttrs, TileAttrs, GatherAttrs,
                             GatherElementsAttrs, JoinAttrs, PadAttrs>;

}  // namespace tensorop

#endif  // TENSOROP_CORE_ATTRS_H_
