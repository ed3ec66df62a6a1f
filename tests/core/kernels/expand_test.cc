// Expand on every backend against the naive reference: every element width,
// input layout and rank, sizes longer, shorter and with 1s, requested output
// layouts, and a large broadcast.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using ExpandKernelTest = KernelMatrixTest;

TEST_P(ExpandKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 2 : 4));
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      // New leading dimensions, then per input dimension: a 1 (keep), its
      // size, or a broadcast of a size-1 dimension.
      const int leading = static_cast<int>(rng() % static_cast<uint64_t>(9 - rank));
      std::vector<int64_t> attrs_sizes, output_sizes;
      for (int d = 0; d < leading; ++d) {
        attrs_sizes.push_back(1 + static_cast<int64_t>(rng() % 3));
        output_sizes.push_back(attrs_sizes.back());
      }
      for (int64_t size : sizes) {
        const int64_t asked =
            size == 1 ? 1 + static_cast<int64_t>(rng() % 3) : (rng() % 2 == 0 ? 1 : size);
        attrs_sizes.push_back(asked);
        output_sizes.push_back(std::max(size, asked));
      }
      // Sizes shorter than the input: drop leading 1s the input side fills.
      while (leading == 0 && attrs_sizes.size() > 1 && attrs_sizes.front() == 1 && rng() % 2) {
        attrs_sizes.erase(attrs_sizes.begin());
      }
      OpRequest request{ExpandAttrs{attrs_sizes},
                        {{"input", input.view()}},
                        {{{}, OutputStrides(output_sizes, trial, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], ReferenceExpand(output_sizes, input)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(ExpandKernelTest);

using ExpandKernelLargeTest = BackendTest;

// A row broadcast to many blocks of output.
TEST_P(ExpandKernelLargeTest, RowBroadcastAcrossManyBlocksMatchesReference) {
  std::mt19937_64 rng(23);
  OwnedTensor input = MakeTensor(DType::kUint16, {1, 1500}, LayoutKind::kPacked, rng);
  const std::vector<int64_t> output_sizes = {700, 1500};
  OpRequest request{ExpandAttrs{output_sizes}, {{"input", input.view()}}, {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceExpand(output_sizes, input)));
}

INSTANTIATE_BACKENDS(ExpandKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
