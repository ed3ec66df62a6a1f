// A plan run on an input in pieces (core/plan/source_pieces.h): where copies
// are cut, when they cannot be, and, run by the oneTBB kernels with each piece
// in an allocation of its own, that the cut plan writes what the whole one does.
#include "core/plan/source_pieces.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/tbb/execute.h"
#include "tests/support/copy_plans.h"
#include "tests/support/layout.h"

namespace tensorop {
namespace {

using ::tensorop::testing::CopyPlan;
using ::tensorop::testing::MakeLayout;
using ::tensorop::testing::RandomCopy;
using ::tensorop::testing::RandomPitchedCopy;
using ::testing::ElementsAre;

// The pieces [cuts[i], cuts[i + 1]) of `bytes`, cuts from 0 to its size.
std::vector<ByteRange> Pieces(const std::vector<int64_t>& cuts) {
  std::vector<ByteRange> pieces;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) pieces.push_back({cuts[i], cuts[i + 1]});
  return pieces;
}

// Runs `plan` on `input` whole, and `cut` on `input` in `pieces` (each copied
// to an allocation of its own, so a read past a piece reads no neighbour):
// both outputs.
std::pair<std::vector<std::byte>, std::vector<std::byte>> RunBoth(
    const ExecutionPlan& plan, const ExecutionPlan& cut, const std::vector<std::byte>& input,
    const std::vector<ByteRange>& pieces) {
  std::vector<std::byte> whole(static_cast<size_t>(plan.outputs[0].buffer_bytes()));
  std::vector<std::byte> pieced(whole.size());
  const std::byte* inputs[] = {input.data()};
  std::byte* whole_outputs[] = {whole.data()};
  EXPECT_TRUE(tbb_backend::Execute(plan, inputs, whole_outputs).ok());
  std::vector<std::vector<std::byte>> held;
  std::vector<const std::byte*> cut_inputs = {nullptr};  // slot 0: read by no copy now
  for (const ByteRange& piece : pieces) {
    held.emplace_back(input.begin() + piece.begin, input.begin() + piece.end);
    cut_inputs.push_back(held.back().data());
  }
  std::byte* pieced_outputs[] = {pieced.data()};
  EXPECT_TRUE(tbb_backend::Execute(cut, cut_inputs, pieced_outputs).ok());
  return {whole, pieced};
}

std::vector<std::byte> Counting(int64_t bytes) {
  std::vector<std::byte> input(static_cast<size_t>(bytes));
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i * 7 + 3);
  return input;
}

TEST(SourcePiecesTest, APackedCopyReadsEachPieceOnce) {
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {100}), {1});
  const std::vector<ByteRange> pieces = Pieces({0, 30, 64, 100});
  const auto cut = CutCopiesAtPieces(plan, 0, pieces, 1000);
  ASSERT_TRUE(cut.has_value());
  std::vector<int64_t> slots, sizes, src_offsets, dst_offsets;
  for (const StridedCopy& copy : cut->copies) {
    slots.push_back(copy.input_slot);
    sizes.push_back(copy.sizes[0]);
    src_offsets.push_back(copy.src_offset);
    dst_offsets.push_back(copy.dst_offset);
    EXPECT_EQ(copy.element_count, copy.sizes[0]);
  }
  EXPECT_THAT(slots, ElementsAre(1, 2, 3));
  EXPECT_THAT(sizes, ElementsAre(30, 34, 36));
  EXPECT_THAT(src_offsets, ElementsAre(0, 0, 0));
  EXPECT_THAT(dst_offsets, ElementsAre(0, 30, 64));
  EXPECT_THAT(cut->input_names, ElementsAre("input", "input", "input", "input"));
  const auto [whole, pieced] = RunBoth(plan, *cut, Counting(100), pieces);
  EXPECT_EQ(pieced, whole);
}

TEST(SourcePiecesTest, AReversedCopyReadsThePiecesBackwards) {
  // int16 [50] read from the end: element i from byte 98 - 2i.
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kInt16, {50}), {-2}, 98);
  const std::vector<ByteRange> pieces = Pieces({0, 40, 42, 100});
  const auto cut = CutCopiesAtPieces(plan, 0, pieces, 1000);
  ASSERT_TRUE(cut.has_value());
  // From the last elements (the first piece) to the first (the last piece).
  std::vector<int64_t> slots, sizes;
  for (const StridedCopy& copy : cut->copies) {
    slots.push_back(copy.input_slot);
    sizes.push_back(copy.sizes[0]);
  }
  EXPECT_THAT(slots, ElementsAre(1, 2, 3));
  EXPECT_THAT(sizes, ElementsAre(20, 1, 29));
  const auto [whole, pieced] = RunBoth(plan, *cut, Counting(100), pieces);
  EXPECT_EQ(pieced, whole);
}

TEST(SourcePiecesTest, AnElementAcrossTwoPiecesIsNotCut) {
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kFloat32, {4}), {4});
  EXPECT_FALSE(CutCopiesAtPieces(plan, 0, Pieces({0, 6, 16}), 1000).has_value());
  // An element nothing reads may straddle.
  const ExecutionPlan second = CopyPlan(MakeLayout(DType::kFloat32, {2}), {4}, 8);
  EXPECT_TRUE(CutCopiesAtPieces(second, 0, Pieces({0, 6, 16}), 1000).has_value());
}

TEST(SourcePiecesTest, ReadsJumpingBetweenPiecesStopAtTheMaximumCopies) {
  // A transpose of uint8 [8, 8] over pieces of 8 bytes: every element is a
  // copy of its own.
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {8, 8}), {1, 8});
  const std::vector<ByteRange> pieces = Pieces({0, 8, 16, 24, 32, 40, 48, 56, 64});
  EXPECT_FALSE(CutCopiesAtPieces(plan, 0, pieces, 63).has_value());
  const auto cut = CutCopiesAtPieces(plan, 0, pieces, 64);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->copies.size(), 64u);
  const auto [whole, pieced] = RunBoth(plan, *cut, Counting(64), pieces);
  EXPECT_EQ(pieced, whole);
}

TEST(SourcePiecesTest, AScatterReadingTheSlotIsNotCut) {
  ExecutionPlan plan = CopyPlan(MakeLayout(DType::kInt32, {4}), {4});
  plan.input_names = {"input", "indices", "updates"};
  plan.scatters.push_back(ScatterWalk{});
  EXPECT_TRUE(CutCopiesAtPieces(plan, 0, Pieces({0, 8, 16}), 1000).has_value());
  EXPECT_FALSE(CutCopiesAtPieces(plan, 1, Pieces({0, 8, 16}), 1000).has_value());
  EXPECT_FALSE(CutCopiesAtPieces(plan, 2, Pieces({0, 8, 16}), 1000).has_value());
}

// Random pitched copies (any element size, rank 1-3, padding, broadcast and
// reversed sources) over inputs cut at random element boundaries: the cut
// plan writes what the whole one writes.
TEST(SourcePiecesTest, CutPlansWriteWhatTheWholeOneWrites) {
  std::mt19937 random(20261124);
  const auto pick = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  for (int trial = 0; trial < 500; ++trial) {
    SCOPED_TRACE(trial);
    const RandomCopy copy = RandomPitchedCopy(random);
    const int64_t element_size = copy.plan.copies[0].element_size;
    const int64_t src_extent = static_cast<int64_t>(copy.input.size());
    std::vector<int64_t> cuts = {0, src_extent};
    for (int64_t i = pick(0, 6); i > 0; --i) {
      cuts.push_back(pick(1, src_extent / element_size) * element_size);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const std::vector<ByteRange> pieces = Pieces(cuts);
    const ExecutionPlan& plan = copy.plan;
    const auto cut = CutCopiesAtPieces(plan, 0, pieces, 100000);
    ASSERT_TRUE(cut.has_value());
    EXPECT_EQ(cut->input_names.size(), 1 + pieces.size());
    for (const StridedCopy& piece_copy : cut->copies) ASSERT_GE(piece_copy.input_slot, 1);
    const auto [whole, pieced] = RunBoth(plan, *cut, copy.input, pieces);
    EXPECT_EQ(pieced, whole);
  }
}

}  // namespace
}  // namespace tensorop
