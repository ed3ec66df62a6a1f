#include "core/plan/output_bands.h"

#include <algorithm>
#include <utility>

namespace tensorop {
namespace {

// Whether every row of `copy`'s outermost dimension writes below the start of
// the next row: rows then finish the destination front to back.
bool RowsInOrder(const StridedCopy& copy) {
  // Each term is at most the output's buffer size (the layout was validated).
  int64_t inner_extent = copy.element_size;
  for (size_t d = 1; d < copy.sizes.size(); ++d) {
    inner_extent += (copy.sizes[d] - 1) * copy.dst_strides[d];
  }
  return inner_extent <= copy.dst_strides[0];
}

// Rows [first, first + rows) of `copy`'s outermost dimension.
StridedCopy Rows(const StridedCopy& copy, int64_t first, int64_t rows) {
  StridedCopy band = copy;
  band.sizes[0] = rows;
  band.src_offset += first * copy.src_strides[0];
  band.dst_offset += first * copy.dst_strides[0];
  band.element_count = copy.element_count / copy.sizes[0] * rows;
  return band;
}

}  // namespace

std::optional<std::vector<OutputBand>> SplitIntoOutputBands(const ExecutionPlan& plan,
                                                            int64_t band_bytes) {
  // A walk writes wherever its indices say: only copies are cut into bands,
  // each output written by one (a pad's fills and copies are many).
  if (!plan.scatters.empty() || !plan.gathers.empty() || !plan.fills.empty()) return std::nullopt;
  std::vector<const StridedCopy*> copy_of(plan.outputs.size(), nullptr);
  for (const StridedCopy& copy : plan.copies) {
    const size_t output = static_cast<size_t>(copy.output_slot);
    if (output >= copy_of.size() || copy_of[output] != nullptr) return std::nullopt;
    if (copy.element_count > 0 && !copy.sizes.empty() && !RowsInOrder(copy)) return std::nullopt;
    copy_of[output] = &copy;
  }
  ExecutionPlan empty = plan;
  empty.copies.clear();
  empty.bytes_moved = 0;
  std::vector<OutputBand> bands;
  const auto add = [&](size_t output, int64_t ready_bytes) -> ExecutionPlan& {
    bands.push_back(OutputBand{.plan = empty, .output = output, .ready_bytes = ready_bytes});
    return bands.back().plan;
  };
  for (size_t output = 0; output < plan.outputs.size(); ++output) {
    const int64_t buffer_bytes = plan.outputs[output].buffer_bytes();
    const StridedCopy* copy = copy_of[output];
    if (copy == nullptr || copy->element_count == 0 || copy->sizes.empty()) {
      // Nothing to write, or a single element: one band.
      ExecutionPlan& band = add(output, buffer_bytes);
      if (copy != nullptr) {
        band.copies.push_back(*copy);
        band.bytes_moved = copy->element_count * copy->element_size;
      }
      continue;
    }
    const int64_t rows = copy->sizes[0];
    const int64_t row_bytes = copy->element_count / rows * copy->element_size;
    const int64_t rows_per_band =
        std::max({int64_t{1}, band_bytes / std::max<int64_t>(1, row_bytes),
                  (rows + kMaxBandsPerOutput - 1) / kMaxBandsPerOutput});
    for (int64_t first = 0; first < rows; first += rows_per_band) {
      const int64_t count = std::min(rows_per_band, rows - first);
      const int64_t end = first + count;
      // Past the last row the rest is padding (zeroed already): final too.
      ExecutionPlan& band =
          add(output, end == rows ? buffer_bytes : copy->dst_offset + end * copy->dst_strides[0]);
      band.copies.push_back(Rows(*copy, first, count));
      band.bytes_moved = count * row_bytes;
    }
  }
  return bands;
}

}  // namespace tensorop
