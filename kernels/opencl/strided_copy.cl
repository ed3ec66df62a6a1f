// StridedCopy: dst[dst_offset + dot(c, dst_strides)] = src[src_offset + dot(c, src_strides)]
// for every coordinate c of the plan's sizes. The host launches what
// clEnqueueCopyBuffer(Rect) cannot do (reversed, strided, broadcast runs, more
// than three dimensions).
//
// Build options: WORD, the word moved (uchar, ushort, uint, ulong, or uint4 when
// the host widened contiguous runs to 16-byte words): bits are moved, never
// interpreted, so every dtype works without cl_khr_fp16/fp64. IDX/IDX8: the
// index math, int/int8 when every offset of the copy fits in 31 bits (the host
// checks), long/long8 otherwise. VEC (1, 2, 4, 8 or 16) and WORDV (WORD, or
// the OpenCL vector of VEC words): the words a work-item moves at once along a
// row, VEC > 1 only when the destination's rows are contiguous and aligned to
// VEC words (the host checks), so each store is one VEC-word vector.
//
// strided_copy: the copy is rows of `columns` (the innermost dimension) words.
// Work-item (x, y) takes row row_begin + y, finds its start once, then copies
// the VEC columns from column_begin + VEC * (x + k * get_global_size(0)),
// k < ITEMS: neighbouring work-items touch neighbouring words (coalesced) and
// the row's division is paid once per ITEMS * VEC words. src_mode says how the
// VEC source words are read: 0 one by one src_step apart, 1 one vector (the
// source is contiguous and aligned), 2 one vector read backwards (src_step -1,
// aligned). The dimensions outside the row, innermost first, are the
// components s0..s7 of sizes/src_strides/dst_strides (outer_rank of them); any
// further out are in `more` (more_rank sizes, then as many source strides, then
// destination strides), null when none. Offsets and strides count words.
//
// transpose_copy: the two innermost dimensions a (outer) and b (inner) are
// contiguous in the source along a and in the destination along b: a tile of
// 32 x 32 words goes through local memory, read along a and written along b,
// so both sides are coalesced. Work-groups are 32 x 8; group (x, y, z) takes
// the tile at b = 32 x, a = a_begin + 32 y of outer row row_begin + z; the
// outer dimensions are passed as strided_copy's are.

#define ITEMS 4

#define TENSOROP_COPY_STEP(c)                    \
  if (outer_rank > c) {                          \
    const IDX size = sizes.s##c;                 \
    const IDX coord = rest % size;               \
    rest /= size;                                \
    src_at += coord * src_strides.s##c;          \
    dst_at += coord * dst_strides.s##c;          \
  }

#define TENSOROP_OUTER_STEPS                                \
  TENSOROP_COPY_STEP(0)                                     \
  TENSOROP_COPY_STEP(1)                                     \
  TENSOROP_COPY_STEP(2)                                     \
  TENSOROP_COPY_STEP(3)                                     \
  TENSOROP_COPY_STEP(4)                                     \
  TENSOROP_COPY_STEP(5)                                     \
  TENSOROP_COPY_STEP(6)                                     \
  TENSOROP_COPY_STEP(7)                                     \
  for (int d = 0; d < more_rank; ++d) {                     \
    const IDX size = more[d];                               \
    const IDX coord = rest % size;                          \
    rest /= size;                                           \
    src_at += coord * more[more_rank + d];                  \
    dst_at += coord * more[2 * more_rank + d];              \
  }

#if VEC == 1
#define TENSOROP_REVERSE(v) (v)
#elif VEC == 2
#define TENSOROP_REVERSE(v) ((v).s10)
#elif VEC == 4
#define TENSOROP_REVERSE(v) ((v).s3210)
#elif VEC == 8
#define TENSOROP_REVERSE(v) ((v).s76543210)
#else
#define TENSOROP_REVERSE(v) ((v).sfedcba9876543210)
#endif

__kernel void strided_copy(__global const WORD* src, __global WORD* dst, const IDX8 sizes,
                           const IDX8 src_strides, const IDX8 dst_strides,
                           const int outer_rank, __global const IDX* more,
                           const int more_rank, const IDX src_step, const IDX dst_step,
                           const IDX src_offset, const IDX dst_offset, const int src_mode,
                           const IDX row_begin, const IDX column_begin, const IDX column_end) {
  IDX rest = row_begin + (IDX)get_global_id(1);
  IDX src_at = src_offset;
  IDX dst_at = dst_offset;
  TENSOROP_OUTER_STEPS
  const IDX stride = (IDX)get_global_size(0) * VEC;
  IDX column = column_begin + (IDX)get_global_id(0) * VEC;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (column < column_end) {
#if VEC == 1
      dst[dst_at + column * dst_step] = src[src_at + column * src_step];
#else
      WORDV v;
      if (src_mode == 1) {
        v = *(__global const WORDV*)(src + src_at + column);
      } else if (src_mode == 2) {
        v = TENSOROP_REVERSE(*(__global const WORDV*)(src + src_at - column - (VEC - 1)));
      } else {
        union {
          WORD w[VEC];
          WORDV v;
        } words;
        const IDX at = src_at + column * src_step;
#pragma unroll
        for (int i = 0; i < VEC; ++i) words.w[i] = src[at + i * src_step];
        v = words.v;
      }
      *(__global WORDV*)(dst + dst_at + column) = v;
#endif
    }
    column += stride;
  }
}

__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void transpose_copy(
    __global const WORD* src, __global WORD* dst, const IDX8 sizes, const IDX8 src_strides,
    const IDX8 dst_strides, const int outer_rank, __global const IDX* more, const int more_rank,
    const IDX a_size, const IDX b_size, const IDX src_b_stride, const IDX dst_a_stride,
    const IDX src_offset, const IDX dst_offset, const IDX row_begin, const IDX a_begin) {
  __local WORD tile[32][33];
  IDX rest = row_begin + (IDX)get_global_id(2);
  IDX src_at = src_offset;
  IDX dst_at = dst_offset;
  TENSOROP_OUTER_STEPS
  const int x = (int)get_local_id(0), y = (int)get_local_id(1);
  const IDX b0 = (IDX)get_group_id(0) * 32, a0 = a_begin + (IDX)get_group_id(1) * 32;
  // Read along a (the source's contiguous side): work-item x takes a = a0 + x.
  for (int k = 0; k < 32; k += 8) {
    const IDX a = a0 + x, b = b0 + y + k;
    if (a < a_size && b < b_size) tile[y + k][x] = src[src_at + a + b * src_b_stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  // Write along b (the destination's contiguous side): work-item x takes b = b0 + x.
  for (int k = 0; k < 32; k += 8) {
    const IDX a = a0 + y + k, b = b0 + x;
    if (a < a_size && b < b_size) dst[dst_at + a * dst_a_stride + b] = tile[x][y + k];
  }
}
