// StridedCopy: dst[dst_offset + dot(c, dst_strides)] = src[src_offset + dot(c, src_strides)]
// for every coordinate c of `sizes` (row-major, outermost first). One work-item per
// element. WORD is uchar, ushort, uint or ulong (set with -DWORD=...): the bits are
// moved, never interpreted, so every dtype works without cl_khr_fp16/fp64.
//
// `layout` holds 3*rank longs: sizes, then source strides, then destination
// strides, all in elements (offsets are in elements too).

__kernel void strided_copy(__global const WORD* src, __global WORD* dst,
                           __global const long* layout, const int rank,
                           const long src_offset, const long dst_offset,
                           const long count) {
  const long id = (long)get_global_id(0);
  if (id >= count) return;
  long rest = id;
  long src_at = src_offset;
  long dst_at = dst_offset;
  for (int d = rank - 1; d >= 0; --d) {
    const long size = layout[d];
    const long coord = rest % size;
    rest /= size;
    src_at += coord * layout[rank + d];
    dst_at += coord * layout[2 * rank + d];
  }
  dst[dst_at] = src[src_at];
}
