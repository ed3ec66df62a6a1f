#include "core/plan/source_pieces.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tensorop {
namespace {

// Rounds toward negative infinity (divisor > 0).
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0)); }

// Rows [first, first + count) of `copy` along dimension `d`.
StridedCopy Rows(const StridedCopy& copy, size_t d, int64_t first, int64_t count) {
  StridedCopy rows = copy;
  rows.sizes[d] = count;
  rows.src_offset += first * copy.src_strides[d];
  rows.dst_offset += first * copy.dst_strides[d];
  rows.element_count = copy.element_count / copy.sizes[d] * count;
  return rows;
}

class Cutter {
 public:
  Cutter(std::span<const ByteRange> pieces, int first_slot, int64_t max_copies,
         std::vector<StridedCopy>* out)
      : pieces_(pieces), first_slot_(first_slot), max_copies_(max_copies), out_(out) {}

  // Emits `copy` as copies that each read one piece; false when it cannot.
  bool Cut(const StridedCopy& copy) {
    const ByteRange read = ReadByteRange(copy);
    const std::ptrdiff_t piece = PieceAt(read.begin);
    if (piece < 0) return false;
    if (read.end <= pieces_[piece].end) return Emit(copy, piece);
    // Cut along the outermost dimension that moves the source; with none, one
    // element (or a broadcast of it) straddles two pieces.
    size_t d = 0;
    while (d < copy.sizes.size() && (copy.sizes[d] == 1 || copy.src_strides[d] == 0)) ++d;
    if (d == copy.sizes.size()) return false;
    const int64_t rows = copy.sizes[d];
    const int64_t stride = copy.src_strides[d];
    // Row j reads `row` moved by j * stride.
    const ByteRange row = ReadByteRange(Rows(copy, d, 0, 1));
    if (stride > 0) {
      // Rows in ascending addresses: as many as fit in the piece where the
      // first of them starts, or that row cut finer.
      for (int64_t j = 0; j < rows;) {
        const std::ptrdiff_t p = PieceAt(row.begin + j * stride);
        if (p < 0) return false;
        const int64_t fit = std::min(rows, FloorDiv(pieces_[p].end - row.end, stride) + 1);
        const bool ok = fit > j ? Emit(Rows(copy, d, j, fit - j), p) : Cut(Rows(copy, d, j, 1));
        if (!ok) return false;
        j = std::max(fit, j + 1);
      }
      return true;
    }
    // Rows in descending addresses: the same from the last row back.
    const int64_t step = -stride;
    for (int64_t end = rows; end > 0;) {
      const std::ptrdiff_t p = PieceAt(row.begin - (end - 1) * step);
      if (p < 0) return false;
      // Rows [first, end) fit when row.end - first * step <= the piece's end.
      const int64_t first = std::max<int64_t>(0, -FloorDiv(pieces_[p].end - row.end, step));
      const bool ok =
          first < end ? Emit(Rows(copy, d, first, end - first), p) : Cut(Rows(copy, d, end - 1, 1));
      if (!ok) return false;
      end = std::min(first, end - 1);
    }
    return true;
  }

 private:
  // The piece holding byte `at`, or -1.
  std::ptrdiff_t PieceAt(int64_t at) const {
    auto after =
        std::upper_bound(pieces_.begin(), pieces_.end(), at,
                         [](int64_t x, const ByteRange& piece) { return x < piece.begin; });
    if (after == pieces_.begin()) return -1;
    const std::ptrdiff_t index = (after - pieces_.begin()) - 1;
    return at < pieces_[index].end ? index : -1;
  }

  bool Emit(StridedCopy copy, std::ptrdiff_t piece) {
    if (static_cast<int64_t>(out_->size()) >= max_copies_) return false;
    copy.input_slot = first_slot_ + static_cast<int>(piece);
    copy.src_offset -= pieces_[piece].begin;
    out_->push_back(std::move(copy));
    return true;
  }

  std::span<const ByteRange> pieces_;
  int first_slot_;
  int64_t max_copies_;
  std::vector<StridedCopy>* out_;
};

}  // namespace

std::optional<ExecutionPlan> CutCopiesAtPieces(const ExecutionPlan& plan, int slot,
                                               std::span<const ByteRange> pieces,
                                               int64_t max_copies) {
  // A walk reads where its indices say: its inputs stay whole.
  for (const ScatterWalk& walk : plan.scatters) {
    if (walk.indices_slot == slot || walk.updates_slot == slot) return std::nullopt;
  }
  for (const GatherWalk& walk : plan.gathers) {
    if (walk.input_slot == slot || walk.indices_slot == slot) return std::nullopt;
  }
  ExecutionPlan cut = plan;
  cut.copies.clear();
  const int first_slot = static_cast<int>(plan.input_names.size());
  Cutter cutter(pieces, first_slot, max_copies, &cut.copies);
  for (const StridedCopy& copy : plan.copies) {
    if (copy.input_slot != slot || copy.element_count == 0) {
      cut.copies.push_back(copy);
    } else if (!cutter.Cut(copy)) {
      return std::nullopt;
    }
  }
  cut.input_names.insert(cut.input_names.end(), pieces.size(), plan.input_names[slot]);
  return cut;
}

}  // namespace tensorop
