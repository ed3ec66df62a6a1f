// Gather on every backend against the naive reference: every element width,
// input layout, rank and index type, negative indices, requested output
// layouts; whole rows along the outermost axis and single elements along the
// innermost.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using GatherKernelTest = KernelMatrixTest;

TEST_P(GatherKernelTest, MatchesReferenceForEveryIndexTypeAndRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (DType index_type : kIndexDTypes) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " indices " << DTypeName(index_type));
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 2 : 4));
      const int64_t axis = static_cast<int64_t>(rng() % rank);
      std::vector<int64_t> index_sizes;
      const int index_rank = 1 + static_cast<int>(rng() % (9 - rank < 3 ? 9 - rank : 3));
      for (int d = 0; d < index_rank; ++d) index_sizes.push_back(1 + rng() % 3);
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      const std::vector<int64_t> values =
          RandomIndices(ElementCount(index_sizes), sizes[axis], index_type, rng);
      OwnedTensor indices = MakeIndexTensor(index_type, index_sizes, values, layout(), rng);
      const Expected expected = ReferenceGather(axis, input, indices);
      OpRequest request{GatherAttrs{axis},
                        {{"input", input.view()}, {"indices", indices.view()}},
                        {{{}, OutputStrides(expected.sizes, rank, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], expected));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(GatherKernelTest);

using GatherKernelLargeTest = BackendTest;

// Whole rows along the outermost axis (each row one copy) and single elements
// along the innermost, over many blocks, in a padded input.
TEST_P(GatherKernelLargeTest, RowsAndColumnsAcrossManyBlocksMatchReference) {
  std::mt19937_64 rng(45);
  OwnedTensor input = MakeTensor(DType::kFloat32, {300, 257}, LayoutKind::kPadded, rng);
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "axis " << axis);
    const std::vector<int64_t> index_sizes = {700};
    OwnedTensor indices = MakeIndexTensor(
        DType::kInt64, index_sizes, RandomIndices(700, input.desc.sizes[axis], DType::kInt64, rng),
        LayoutKind::kPacked, rng);
    ASSERT_OK_AND_ASSIGN(
        std::vector<OwnedOutput> outputs,
        Run({GatherAttrs{axis}, {{"input", input.view()}, {"indices", indices.view()}}, {}}));
    EXPECT_TRUE(OutputMatches(outputs[0], ReferenceGather(axis, input, indices)));
  }
}

INSTANTIATE_BACKENDS(GatherKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
