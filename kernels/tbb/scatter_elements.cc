#include "kernels/tbb/scatter_elements.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/tbb/blocks.h"

namespace tensorop::tbb_backend {
namespace {

template <typename Index>
int64_t LoadIndex(const std::byte* at, int64_t axis_size) {
  Index value;
  std::memcpy(&value, at, sizeof value);
  const int64_t index = static_cast<int64_t>(value);  // range checked by validation
  return index < 0 ? index + axis_size : index;
}

// Rows [begin, end) of the outer walk; within a row, updates land in index order
// so the last of two colliding updates wins, as on every backend.
template <typename Word, typename Index>
void ScatterRowRange(const ScatterRows& rows, const std::byte* indices,
                     const std::byte* updates, std::byte* output, int64_t begin,
                     int64_t end) {
  const size_t rank = rows.outer_sizes.size();
  for (int64_t row = begin; row < end; ++row) {
    int64_t remainder = row, index_offset = 0, update_offset = 0, output_offset = 0;
    for (size_t d = rank; d-- > 0;) {
      const int64_t coord = remainder % rows.outer_sizes[d];
      remainder /= rows.outer_sizes[d];
      index_offset += coord * rows.indices_outer_strides[d];
      update_offset += coord * rows.updates_outer_strides[d];
      output_offset += coord * rows.output_outer_strides[d];
    }
    for (int64_t j = 0; j < rows.row_length; ++j) {
      const int64_t k = LoadIndex<Index>(indices + index_offset + j * rows.indices_row_stride,
                                         rows.axis_size);
      std::memcpy(output + output_offset + k * rows.output_axis_stride,
                  updates + update_offset + j * rows.updates_row_stride, sizeof(Word));
    }
  }
}

template <typename Word, typename Index>
absl::Status Run(const ScatterRows& rows, const std::byte* indices,
                 const std::byte* updates, std::byte* output, const StopCheck& stop) {
  int64_t row_count = 1;
  for (int64_t size : rows.outer_sizes) row_count *= size;
  const int64_t bytes_per_row = rows.row_length * (rows.element_size + rows.index_size);
  const int64_t rows_per_block = kBlockBytes / std::max<int64_t>(bytes_per_row, 1);
  return ForEachBlock(row_count, rows_per_block, row_count * bytes_per_row, stop,
                      [&](int64_t begin, int64_t end) {
                        ScatterRowRange<Word, Index>(rows, indices, updates, output,
                                                     begin, end);
                      });
}

template <typename Word>
absl::Status DispatchIndex(const ScatterRows& rows, const std::byte* indices,
                           const std::byte* updates, std::byte* output,
                           const StopCheck& stop) {
  if (rows.index_size == 4) {
    return rows.index_signed ? Run<Word, int32_t>(rows, indices, updates, output, stop)
                             : Run<Word, uint32_t>(rows, indices, updates, output, stop);
  }
  return rows.index_signed ? Run<Word, int64_t>(rows, indices, updates, output, stop)
                           : Run<Word, uint64_t>(rows, indices, updates, output, stop);
}

}  // namespace

absl::Status RunScatterRows(const ScatterRows& rows, const std::byte* indices,
                            const std::byte* updates, std::byte* output,
                            const StopCheck& stop) {
  switch (rows.element_size) {
    case 1: return DispatchIndex<uint8_t>(rows, indices, updates, output, stop);
    case 2: return DispatchIndex<uint16_t>(rows, indices, updates, output, stop);
    case 4: return DispatchIndex<uint32_t>(rows, indices, updates, output, stop);
    case 8: return DispatchIndex<uint64_t>(rows, indices, updates, output, stop);
  }
  return absl::InternalError("scatter: element size is not 1, 2, 4 or 8");
}

}  // namespace tensorop::tbb_backend
