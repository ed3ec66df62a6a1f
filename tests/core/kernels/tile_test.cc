// Tile on every backend against the naive reference: every element width, input
// layout and rank, repeats of 1 and more, requested output layouts, and a large
// tile of short rows.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using TileKernelTest = KernelMatrixTest;

TEST_P(TileKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes, repeats, output_sizes;
      for (int d = 0; d < rank; ++d) {
        sizes.push_back(1 + static_cast<int64_t>(rng() % (rank > 5 ? 2 : 4)));
        repeats.push_back(1 + static_cast<int64_t>(rng() % (rank > 5 ? 2 : 3)));
        output_sizes.push_back(sizes.back() * repeats.back());
      }
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      OpRequest request{TileAttrs{repeats},
                        {{"input", input.view()}},
                        {{{}, OutputStrides(output_sizes, trial, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], ReferenceTile(repeats, input)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(TileKernelTest);

using TileKernelLargeTest = BackendTest;

// Short rows repeated many times across many blocks, in a permuted input.
TEST_P(TileKernelLargeTest, ShortRowsRepeatedAcrossManyBlocksMatchReference) {
  std::mt19937_64 rng(29);
  OwnedTensor input = MakeTensor(DType::kUint16, {3, 5}, LayoutKind::kPermuted, rng);
  const std::vector<int64_t> repeats = {400, 300};
  OpRequest request{TileAttrs{repeats}, {{"input", input.view()}}, {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceTile(repeats, input)));
}

INSTANTIATE_BACKENDS(TileKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
