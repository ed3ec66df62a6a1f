// GatherElements on every backend against the naive reference: every element
// width, input layout, rank and index type, negative indices, requested output
// layouts, and a 1-D walk long enough to be split across blocks.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using GatherElementsKernelTest = KernelMatrixTest;

TEST_P(GatherElementsKernelTest, MatchesReferenceForEveryIndexTypeAndRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (DType index_type : kIndexDTypes) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " indices " << DTypeName(index_type));
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 2 : 4));
      const int64_t axis = static_cast<int64_t>(rng() % rank);
      std::vector<int64_t> index_sizes = sizes;
      index_sizes[axis] = 1 + static_cast<int64_t>(rng() % 5);
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      const std::vector<int64_t> values =
          RandomIndices(ElementCount(index_sizes), sizes[axis], index_type, rng);
      OwnedTensor indices = MakeIndexTensor(index_type, index_sizes, values, layout(), rng);
      OpRequest request{GatherElementsAttrs{axis},
                        {{"input", input.view()}, {"indices", indices.view()}},
                        {{{}, OutputStrides(index_sizes, rank, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], ReferenceGatherElements(axis, input, indices)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(GatherElementsKernelTest);

using GatherElementsKernelLargeTest = BackendTest;

// One long row: the oneTBB walk splits its columns across blocks.
TEST_P(GatherElementsKernelLargeTest, OneLongRowMatchesReference) {
  std::mt19937_64 rng(46);
  OwnedTensor input = MakeTensor(DType::kUint16, {5000}, LayoutKind::kPacked, rng);
  const std::vector<int64_t> index_sizes = {400000};
  OwnedTensor indices =
      MakeIndexTensor(DType::kUint32, index_sizes, RandomIndices(400000, 5000, DType::kUint32, rng),
                      LayoutKind::kPacked, rng);
  ASSERT_OK_AND_ASSIGN(
      std::vector<OwnedOutput> outputs,
      Run({GatherElementsAttrs{0}, {{"input", input.view()}, {"indices", indices.view()}}, {}}));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceGatherElements(0, input, indices)));
}

INSTANTIATE_BACKENDS(GatherElementsKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
