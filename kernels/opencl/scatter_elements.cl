// ScatterWalk, in parallel over the updates, after the output holds the copy of
// the input. The spec's rule is that the last update in row-major order wins.
// Two updates collide only within one line (every coordinate but the axis
// equal), where row-major order is axis order, so the winner of an output
// element is the update with the largest axis position j among those aimed at it.
//
// `map` holds a collision flag (map[0]) and one uint per output element an
// update can reach (from map[1]). The host runs phase 0 over every update:
// write the update and j + 1 into the target's uint, plain stores (when
// updates collide, any one of them lands). Then phase 3: an update whose
// target's uint is not its own j + 1 met another and raises the flag. No
// atomics and no fill of the map: every uint phase 3 reads, phase 0 wrote.
// Only when the flag is up does the host zero the map and run phase 1
// (atomic_max of j + 1 per target) and phase 2 (the update whose j + 1 is its
// target's maximum writes again). Every targeted element then holds its
// winner; untouched elements keep the input's copy. 32-bit atomics of OpenCL
// 1.2 suffice (j + 1 < 2^32: a tensor holds fewer than 2^32 elements).
//
// Build options: WORD, the element word (uchar/ushort/uint/ulong); IDX/IDX8
// the index math (int/int8 when every offset fits in 31 bits, else long/long8).
// Indices are read as uints: index_mode bit 0 means 8-byte indices (two uints,
// little-endian), bit 1 signed; strides of indices count uints, the others
// elements.
//
// Work-items take updates as strided_copy.cl takes words: a row is the
// innermost dimension, each work-item finds its row's start once and takes
// ITEMS columns get_global_size(0) apart; the dimensions outside the row are
// s0..s7 (innermost first) and `more` (sizes, then indices, updates and output
// strides). axis_at says where the axis is: a component (0..7), 8 + its
// place in `more`, -1 the innermost dimension, -2 dropped (size 1: j is 0).

#define ITEMS 4

#define TENSOROP_SCATTER_STEP(c)                  \
  if (outer_rank > c) {                           \
    const IDX size = sizes.s##c;                  \
    const IDX coord = rest % size;                \
    rest /= size;                                 \
    index_at += coord * index_strides.s##c;       \
    update_at += coord * update_strides.s##c;     \
    output_at += coord * output_strides.s##c;     \
    if (axis_at == c) j = coord;                  \
  }

__kernel void scatter_elements(__global const uint* indices, __global const WORD* updates,
                               __global WORD* output, __global uint* map, const int phase,
                               const IDX8 sizes, const IDX8 index_strides,
                               const IDX8 update_strides, const IDX8 output_strides,
                               const int outer_rank, __global const IDX* more,
                               const int more_rank, const int axis_at, const IDX index_step,
                               const IDX update_step, const IDX output_step,
                               const IDX output_axis_stride, const IDX axis_size,
                               const int index_mode, const IDX row_begin,
                               const IDX column_begin, const IDX column_end) {
  IDX rest = row_begin + (IDX)get_global_id(1);
  IDX index_at = 0, update_at = 0, output_at = 0, j = 0;
  TENSOROP_SCATTER_STEP(0)
  TENSOROP_SCATTER_STEP(1)
  TENSOROP_SCATTER_STEP(2)
  TENSOROP_SCATTER_STEP(3)
  TENSOROP_SCATTER_STEP(4)
  TENSOROP_SCATTER_STEP(5)
  TENSOROP_SCATTER_STEP(6)
  TENSOROP_SCATTER_STEP(7)
  for (int d = 0; d < more_rank; ++d) {
    const IDX size = more[d];
    const IDX coord = rest % size;
    rest /= size;
    index_at += coord * more[more_rank + d];
    update_at += coord * more[2 * more_rank + d];
    output_at += coord * more[3 * more_rank + d];
    if (axis_at == 8 + d) j = coord;
  }
  const IDX stride = (IDX)get_global_size(0);
  IDX column = column_begin + (IDX)get_global_id(0);
  for (int item = 0; item < ITEMS; ++item, column += stride) {
    if (column >= column_end) break;
    if (axis_at == -1) j = column;
    const uint low = indices[index_at + column * index_step];
    IDX k;
    if (sizeof(IDX) == 4 || (index_mode & 1) == 0) {
      // 4-byte indices; or any index in the 32-bit variant, where the range
      // check on the host leaves |k| < 2^31, which the low word holds.
      k = (index_mode & 2) != 0 || sizeof(IDX) == 4 ? (IDX)(int)low : (IDX)low;
    } else {
      const uint high = indices[index_at + column * index_step + 1];
      k = (IDX)(((ulong)high << 32) | (ulong)low);
    }
    if (k < 0) k += axis_size;  // range checked on the host
    const IDX target = output_at + column * output_step + k * output_axis_stride;
    const IDX update = update_at + column * update_step;
    volatile __global uint* flag = map;
    __global uint* rank = map + 1;
    if (phase == 0) {
      output[target] = updates[update];
      rank[target] = (uint)j + 1u;
    } else if (phase == 3) {
      // Another update of this line aimed here too; the flag is only ever set.
      if (rank[target] != (uint)j + 1u && flag[0] == 0) flag[0] = 1u;
    } else if (phase == 1) {
      // A plain read first skips read-modify-writes that cannot change
      // anything (ranks only grow), so updates that all aim at one element
      // do not fight over its cache line.
      if (((volatile __global uint*)rank)[target] < (uint)j + 1u) {
        atomic_max(&rank[target], (uint)j + 1u);
      }
    } else if (rank[target] == (uint)j + 1u) {
      output[target] = updates[update];
    }
  }
}
