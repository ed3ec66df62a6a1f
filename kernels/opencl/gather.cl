// GatherWalk (Gather, GatherElements): every output element reads the input
// where its coordinates and its index say,
//   output[c] = input[dot(c, input_strides) + k * input_axis_stride],
//   k = indices[dot(c, index_strides)] (plus axis_size when negative),
// and no two coordinates write one element, so work-items never meet. Indices
// are in range: the host checked every one before any launch.
//
// Build options: WORD, the element word (uchar/ushort/uint/ulong); IDX/IDX8 the
// index math (int/int8 when every offset fits in 31 bits, else long/long8).
// Indices are read as uints: index_mode bit 0 means 8-byte indices (two uints,
// little-endian), bit 1 signed; strides of indices count uints, the others
// elements.
//
// Work-items take a row's columns as scatter_elements.cl does: a row is the
// innermost dimension, each work-item finds its row's start once and takes
// ITEMS columns get_global_size(0) apart; the dimensions outside the row are
// s0..s6 (innermost first: a walk has at most 8 dimensions).

#define ITEMS 4

#define TENSOROP_GATHER_STEP(c)                 \
  if (outer_rank > c) {                         \
    const IDX size = sizes.s##c;                \
    const IDX coord = rest % size;              \
    rest /= size;                               \
    input_at += coord * input_strides.s##c;     \
    index_at += coord * index_strides.s##c;     \
    output_at += coord * output_strides.s##c;   \
  }

__kernel void gather(__global const WORD* input, __global const uint* indices,
                     __global WORD* output, const IDX8 sizes, const IDX8 input_strides,
                     const IDX8 index_strides, const IDX8 output_strides, const int outer_rank,
                     const IDX input_step, const IDX index_step, const IDX output_step,
                     const IDX input_axis_stride, const IDX axis_size, const int index_mode,
                     const IDX row_begin, const IDX column_begin, const IDX column_end) {
  IDX rest = row_begin + (IDX)get_global_id(1);
  IDX input_at = 0, index_at = 0, output_at = 0;
  TENSOROP_GATHER_STEP(0)
  TENSOROP_GATHER_STEP(1)
  TENSOROP_GATHER_STEP(2)
  TENSOROP_GATHER_STEP(3)
  TENSOROP_GATHER_STEP(4)
  TENSOROP_GATHER_STEP(5)
  TENSOROP_GATHER_STEP(6)
  const IDX stride = (IDX)get_global_size(0);
  IDX column = column_begin + (IDX)get_global_id(0);
  for (int item = 0; item < ITEMS; ++item, column += stride) {
    if (column >= column_end) break;
    const IDX at = index_at + column * index_step;
    const uint low = indices[at];
    IDX k;
    if (sizeof(IDX) == 4 || (index_mode & 1) == 0) {
      // 4-byte indices; or any index in the 32-bit variant, where the range
      // check on the host leaves |k| < 2^31, which the low word holds.
      k = (index_mode & 2) != 0 || sizeof(IDX) == 4 ? (IDX)(int)low : (IDX)low;
    } else {
      const uint high = indices[at + 1];
      k = (IDX)(((ulong)high << 32) | (ulong)low);
    }
    if (k < 0) k += axis_size;
    output[output_at + column * output_step] =
        input[input_at + column * input_step + k * input_axis_stride];
  }
}
