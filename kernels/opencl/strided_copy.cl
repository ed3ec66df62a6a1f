// StridedCopy: dst[dst_offset + dot(c, dst_strides)] = src[src_offset + dot(c, src_strides)]
// for every coordinate c of the plan's sizes. The host launches what
// clEnqueueCopyBuffer(Rect) cannot do (reversed, strided, broadcast runs, more
// than three dimensions).
//
// Build options: WORD, the word moved (uchar, ushort, uint, ulong, or uint4 when
// the host widened contiguous runs to 16-byte words): bits are moved, never
// interpreted, so every dtype works without cl_khr_fp16/fp64. IDX/IDX8: the
// index math, int/int8 when every offset of the copy fits in 31 bits (the host
// checks), long/long8 otherwise.
//
// The copy is rows of `columns` (the innermost dimension) words. Work-item
// (x, y) takes row row_begin + y, finds its start once, then copies the columns
// column_begin + x + k * get_global_size(0), k < ITEMS: neighbouring work-items
// touch neighbouring words (coalesced) and the row's division is paid once per
// ITEMS words. The dimensions outside the row, innermost first, are the
// components s0..s7 of sizes/src_strides/dst_strides (outer_rank of them); any
// further out are in `more` (more_rank sizes, then as many source strides, then
// destination strides), null when none. Offsets and strides count words.

#define ITEMS 4

#define TENSOROP_COPY_STEP(c)                    \
  if (outer_rank > c) {                          \
    const IDX size = sizes.s##c;                 \
    const IDX coord = rest % size;               \
    rest /= size;                                \
    src_at += coord * src_strides.s##c;          \
    dst_at += coord * dst_strides.s##c;          \
  }

__kernel void strided_copy(__global const WORD* src, __global WORD* dst, const IDX8 sizes,
                           const IDX8 src_strides, const IDX8 dst_strides,
                           const int outer_rank, __global const IDX* more,
                           const int more_rank, const IDX src_step, const IDX dst_step,
                           const IDX src_offset, const IDX dst_offset, const IDX row_begin,
                           const IDX column_begin, const IDX column_end) {
  IDX rest = row_begin + (IDX)get_global_id(1);
  IDX src_at = src_offset;
  IDX dst_at = dst_offset;
  TENSOROP_COPY_STEP(0)
  TENSOROP_COPY_STEP(1)
  TENSOROP_COPY_STEP(2)
  TENSOROP_COPY_STEP(3)
  TENSOROP_COPY_STEP(4)
  TENSOROP_COPY_STEP(5)
  TENSOROP_COPY_STEP(6)
  TENSOROP_COPY_STEP(7)
  for (int d = 0; d < more_rank; ++d) {
    const IDX size = more[d];
    const IDX coord = rest % size;
    rest /= size;
    src_at += coord * more[more_rank + d];
    dst_at += coord * more[2 * more_rank + d];
  }
  const IDX stride = (IDX)get_global_size(0);
  IDX column = column_begin + (IDX)get_global_id(0);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (column < column_end) dst[dst_at + column * dst_step] = src[src_at + column * src_step];
    column += stride;
  }
}
