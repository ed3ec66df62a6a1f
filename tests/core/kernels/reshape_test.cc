// Reshape on every backend against the naive reference: every element width,
// input layout and rank, requested output layouts (so the view, the walk of
// either side and the stretches all run), and a large copy.
#include <algorithm>
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

// Random sizes of `count` elements: its prime factors shuffled into 1..8
// dimensions, with some 1s.
std::vector<int64_t> RandomSizesOf(int64_t count, std::mt19937_64& rng) {
  std::vector<int64_t> factors;
  for (int64_t p = 2; count > 1; ++p) {
    while (count % p == 0) {
      factors.push_back(p);
      count /= p;
    }
  }
  std::shuffle(factors.begin(), factors.end(), rng);
  std::vector<int64_t> sizes;
  for (int64_t factor : factors) {
    if (!sizes.empty() && (sizes.size() == 8 || rng() % 2 == 0)) {
      sizes.back() *= factor;
    } else {
      sizes.push_back(factor);
    }
  }
  while (sizes.size() < 8 && rng() % 3 == 0) {
    sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(rng() % (sizes.size() + 1)), 1);
  }
  if (sizes.empty()) sizes.push_back(1);
  return sizes;
}

using ReshapeKernelTest = KernelMatrixTest;

TEST_P(ReshapeKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      // At most 4096 elements: within the copies a tangled reshape may take.
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 6 ? 2 : 4));
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      int64_t count = 1;
      for (int64_t size : sizes) count *= size;
      std::vector<int64_t> output_sizes = RandomSizesOf(count, rng);
      ReshapeAttrs attrs{output_sizes};
      if (trial % 2 == 1) attrs.sizes[rng() % attrs.sizes.size()] = -1;
      OpRequest request{
          attrs, {{"input", input.view()}}, {{{}, OutputStrides(output_sizes, trial, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], ReferenceReshape(output_sizes, input)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(ReshapeKernelTest);

using ReshapeKernelLargeTest = BackendTest;

// A column-major input is no window of the output: one copy in the input's
// order, across many blocks.
TEST_P(ReshapeKernelLargeTest, ColumnMajorInputAcrossManyBlocksMatchesReference) {
  std::mt19937_64 rng(22);
  OwnedTensor input = MakeTensor(DType::kInt64, {300, 512}, LayoutKind::kPacked, rng);
  input.desc.strides = {1, 300};
  const std::vector<int64_t> output_sizes = {512, 300};
  OpRequest request{ReshapeAttrs{output_sizes}, {{"input", input.view()}}, {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceReshape(output_sizes, input)));
}

INSTANTIATE_BACKENDS(ReshapeKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
