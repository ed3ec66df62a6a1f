// Transpose on every backend against the naive reference: every element width,
// input layout and rank, requested output layouts, and a large matrix for the
// parallel path.
#include <algorithm>
#include <numeric>
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using TransposeKernelTest = KernelMatrixTest;

TEST_P(TransposeKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 3 : 5));
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      // Trial 0 leaves perm out: reversed, as OPERATORS.md says.
      if (trial == 0) std::sort(perm.rbegin(), perm.rend());
      const Expected expected = ReferenceTranspose(perm, input);
      OpRequest request{TransposeAttrs{trial == 0 ? std::vector<int64_t>{} : perm},
                        {{"input", input.view()}},
                        {{{}, OutputStrides(expected.sizes, trial, rng)}}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0], expected));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(TransposeKernelTest);

using TransposeKernelLargeTest = BackendTest;

// A matrix of several 256 KiB blocks: the parallel path on both cores.
TEST_P(TransposeKernelLargeTest, MatrixAcrossManyBlocksMatchesReference) {
  std::mt19937_64 rng(21);
  OwnedTensor input = MakeTensor(DType::kFloat32, {384, 1000}, LayoutKind::kPadded, rng);
  const std::vector<int64_t> perm = {1, 0};
  OpRequest request{TransposeAttrs{perm}, {{"input", input.view()}}, {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceTranspose(perm, input)));
}

// Sizes that end in partial tiles of rows and columns (oneTBB copies a
// transpose in tiles of 16 x 16, 4-byte elements by 4 x 4 in registers), for
// every element width.
TEST_P(TransposeKernelLargeTest, PartialTilesOfEveryWidthMatchReference) {
  std::mt19937_64 rng(24);
  for (DType dtype : kOneDTypePerSize) {
    SCOPED_TRACE(DTypeName(dtype));
    OwnedTensor input = MakeTensor(dtype, {70, 131}, LayoutKind::kPacked, rng);
    const std::vector<int64_t> perm = {1, 0};
    OpRequest request{TransposeAttrs{perm}, {{"input", input.view()}}, {}};
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
    EXPECT_TRUE(OutputMatches(outputs[0], ReferenceTranspose(perm, input)));
  }
}

INSTANTIATE_BACKENDS(TransposeKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
