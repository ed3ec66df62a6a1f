// ScatterWalk: one work-item per line of the indices, a line being every
// coordinate that differs only along the axis. Updates collide only within a
// line, and each work-item applies its line in ascending axis order, so the last
// update in row-major order wins, exactly as on the CPU.
//
// WORD: the element word (uchar/ushort/uint/ulong). INDEX: the index type
// (int, uint, long, ulong). `layout` holds 4*rank longs: sizes, indices strides,
// updates strides, output strides (output stride 0 along the axis), elements.
// axis_dim is the axis's position in `sizes`, or -1 when the indices have
// size 1 along it (each line is then one element). One launch applies the
// axis positions [axis_begin, axis_end) of its lines: the host splits a long
// walk into launches, in order, and checks the call's stop condition between.

__kernel void scatter_elements(__global const INDEX* indices, __global const WORD* updates,
                               __global WORD* output, __global const long* layout,
                               const int rank, const int axis_dim, const long axis_size,
                               const long output_axis_stride, const long lines,
                               const long axis_begin, const long axis_end) {
  const long id = (long)get_global_id(0);
  if (id >= lines) return;
  long rest = id;
  long index_at = 0, update_at = 0, output_at = 0;
  for (int d = rank - 1; d >= 0; --d) {
    if (d == axis_dim) continue;
    const long size = layout[d];
    const long coord = rest % size;
    rest /= size;
    index_at += coord * layout[rank + d];
    update_at += coord * layout[2 * rank + d];
    output_at += coord * layout[3 * rank + d];
  }
  const long length = axis_dim >= 0 ? min(layout[axis_dim], axis_end) : 1;
  const long index_step = axis_dim >= 0 ? layout[rank + axis_dim] : 0;
  const long update_step = axis_dim >= 0 ? layout[2 * rank + axis_dim] : 0;
  for (long j = axis_dim >= 0 ? axis_begin : 0; j < length; ++j) {
    long k = (long)indices[index_at + j * index_step];  // range checked on the host
    if (k < 0) k += axis_size;
    output[output_at + k * output_axis_stride] = updates[update_at + j * update_step];
  }
}
