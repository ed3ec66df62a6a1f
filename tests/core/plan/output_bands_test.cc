// Bands of a plan that finish its outputs front to back (core/plan/output_bands.h):
// where they split, when no order exists, and, run by the oneTBB kernels, that
// after each band the bytes it calls ready already equal the whole plan's.
#include "core/plan/output_bands.h"

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
using ::testing::IsEmpty;

TEST(OutputBandsTest, APackedCopySplitsIntoRowsOfAboutTheBandSize) {
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {10}), {1});
  const auto bands = SplitIntoOutputBands(plan, 4);
  ASSERT_TRUE(bands.has_value());
  ASSERT_EQ(bands->size(), 3u);
  std::vector<int64_t> ready, rows, src_offsets, dst_offsets;
  for (const OutputBand& band : *bands) {
    EXPECT_EQ(band.output, 0u);
    ASSERT_EQ(band.plan.copies.size(), 1u);
    ready.push_back(band.ready_bytes);
    rows.push_back(band.plan.copies[0].sizes[0]);
    src_offsets.push_back(band.plan.copies[0].src_offset);
    dst_offsets.push_back(band.plan.copies[0].dst_offset);
    EXPECT_EQ(band.plan.copies[0].element_count, band.plan.copies[0].sizes[0]);
    EXPECT_EQ(band.plan.bytes_moved, band.plan.copies[0].sizes[0]);
    EXPECT_EQ(band.plan.outputs.size(), 1u);
    EXPECT_THAT(band.plan.input_names, ElementsAre("input"));
  }
  EXPECT_THAT(ready, ElementsAre(4, 8, 10));
  EXPECT_THAT(rows, ElementsAre(4, 4, 2));
  EXPECT_THAT(src_offsets, ElementsAre(0, 4, 8));
  EXPECT_THAT(dst_offsets, ElementsAre(0, 4, 8));
}

TEST(OutputBandsTest, APaddedRowIsReadyUpToTheNextRowsStart) {
  // int16 [4, 3] with a pitch of 4 elements: rows of 6 bytes every 8 bytes,
  // 30 bytes in all (the last row has no padding after it).
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kInt16, {4, 3}, {4, 1}), {6, 2});
  const auto bands = SplitIntoOutputBands(plan, 12);  // two rows of 6 bytes
  ASSERT_TRUE(bands.has_value());
  ASSERT_EQ(bands->size(), 2u);
  EXPECT_EQ((*bands)[0].ready_bytes, 16);  // rows 0 and 1, and row 1's padding
  EXPECT_EQ((*bands)[1].ready_bytes, 30);
  EXPECT_THAT((*bands)[1].plan.copies[0].sizes, ElementsAre(2, 3));
  EXPECT_EQ((*bands)[1].plan.copies[0].src_offset, 12);
  EXPECT_EQ((*bands)[1].plan.copies[0].dst_offset, 16);
}

TEST(OutputBandsTest, ARowLargerThanTheBandIsABandOfItsOwn) {
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kFloat32, {3, 100}), {400, 4});
  const auto bands = SplitIntoOutputBands(plan, 16);
  ASSERT_TRUE(bands.has_value());
  ASSERT_EQ(bands->size(), 3u);
  EXPECT_EQ((*bands)[0].ready_bytes, 400);
  EXPECT_EQ((*bands)[2].ready_bytes, 1200);
}

TEST(OutputBandsTest, AnOutputHasAtMostTheMaximumNumberOfBands) {
  const int64_t rows = kMaxBandsPerOutput * 10;
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {rows, 2}), {2, 1});
  const auto bands = SplitIntoOutputBands(plan, 1);  // a row each, were it not for the cap
  ASSERT_TRUE(bands.has_value());
  EXPECT_EQ(static_cast<int64_t>(bands->size()), kMaxBandsPerOutput);
  int64_t covered = 0;
  for (const OutputBand& band : *bands) covered += band.plan.copies[0].sizes[0];
  EXPECT_EQ(covered, rows);
  EXPECT_EQ(bands->back().ready_bytes, rows * 2);
}

TEST(OutputBandsTest, ATransposedOutputHasNoOrder) {
  // Rows 4 bytes apart, but each row's elements 4 bytes apart too: row 0
  // writes past row 1's start.
  const ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {4, 4}, {1, 4}), {4, 1});
  EXPECT_EQ(SplitIntoOutputBands(plan, 4), std::nullopt);
}

TEST(OutputBandsTest, AScatterHasNoOrder) {
  ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {8}), {1});
  plan.scatters.emplace_back();
  EXPECT_EQ(SplitIntoOutputBands(plan, 4), std::nullopt);
}

TEST(OutputBandsTest, TwoCopiesIntoOneOutputHaveNoOrder) {
  ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {8}), {1});
  plan.copies.push_back(plan.copies[0]);
  EXPECT_EQ(SplitIntoOutputBands(plan, 4), std::nullopt);
}

TEST(OutputBandsTest, OutputsFollowEachOtherAndAnEmptyOneIsReadyAtOnce) {
  // A split into [2] bytes, [0] (empty, no copy) and [3] bytes.
  ExecutionPlan plan = CopyPlan(MakeLayout(DType::kUint8, {2}), {1});
  plan.outputs.push_back(MakeLayout(DType::kUint8, {0}));
  plan.outputs.push_back(MakeLayout(DType::kUint8, {3}));
  StridedCopy second = plan.copies[0];
  second.output_slot = 2;
  second.sizes = {3};
  second.element_count = 3;
  second.src_offset = 2;
  plan.copies.push_back(second);
  const auto bands = SplitIntoOutputBands(plan, 2);
  ASSERT_TRUE(bands.has_value());
  std::vector<size_t> outputs;
  std::vector<int64_t> ready;
  for (const OutputBand& band : *bands) {
    outputs.push_back(band.output);
    ready.push_back(band.ready_bytes);
  }
  EXPECT_THAT(outputs, ElementsAre(0u, 1u, 2u, 2u));
  EXPECT_THAT(ready, ElementsAre(2, 0, 2, 3));
  EXPECT_THAT((*bands)[1].plan.copies, IsEmpty());
}

// Random pitched copies (any element size, rank 1-3, padding, broadcast and
// reversed sources): run band by band, every byte a band calls ready equals
// the whole plan's result, and the last band leaves the whole output equal.
TEST(OutputBandsTest, ReadyBytesAreFinalWhenRunBandByBand) {
  std::mt19937 random(20261124);
  const auto pick = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(trial);
    const RandomCopy copy = RandomPitchedCopy(random);
    const ExecutionPlan& plan = copy.plan;
    const Layout& output = plan.outputs[0];
    const std::byte* inputs[] = {copy.input.data()};

    std::vector<std::byte> whole(static_cast<size_t>(output.buffer_bytes()));
    std::byte* whole_outputs[] = {whole.data()};
    ASSERT_TRUE(tbb_backend::Execute(plan, inputs, whole_outputs).ok());

    const auto bands = SplitIntoOutputBands(plan, pick(1, 64));
    ASSERT_TRUE(bands.has_value());
    std::vector<std::byte> banded(whole.size());
    std::byte* banded_outputs[] = {banded.data()};
    int64_t ready = 0;
    for (const OutputBand& band : *bands) {
      ASSERT_TRUE(tbb_backend::Execute(band.plan, inputs, banded_outputs).ok());
      ASSERT_GE(band.ready_bytes, ready);
      ready = band.ready_bytes;
      ASSERT_TRUE(std::equal(banded.begin(), banded.begin() + ready, whole.begin()))
          << "bytes below " << ready << " changed after their band";
    }
    EXPECT_EQ(ready, output.buffer_bytes());
    EXPECT_EQ(banded, whole);
  }
}

}  // namespace
}  // namespace tensorop
