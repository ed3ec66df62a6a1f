// Split on oneTBB against the naive reference: every dtype, layout and rank,
// any number of outputs, requested output layouts.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using SplitKernelTest = KernelMatrixTest;

TEST_P(SplitKernelTest, MatchesReferenceAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (int trial = 0; trial < 6; ++trial) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " trial " << trial);
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 3 : 6));
      const int64_t axis = static_cast<int64_t>(rng() % rank);
      OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
      // Cut the axis into random consecutive pieces.
      std::vector<std::vector<int64_t>> output_sizes;
      for (int64_t left = sizes[axis]; left > 0;) {
        const int64_t piece = 1 + static_cast<int64_t>(rng() % left);
        output_sizes.push_back(sizes);
        output_sizes.back()[axis] = piece;
        left -= piece;
      }
      OpRequest request{SplitAttrs{axis}, {{"input", input.view()}}, {}};
      for (const std::vector<int64_t>& out : output_sizes) {
        request.outputs.push_back({out, OutputStrides(out, trial, rng)});
      }
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      std::vector<Expected> expected = ReferenceSplit(axis, input, output_sizes);
      ASSERT_EQ(outputs.size(), expected.size());
      for (size_t j = 0; j < outputs.size(); ++j) {
        EXPECT_TRUE(OutputMatches(outputs[j], expected[j])) << "output " << j;
      }
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(SplitKernelTest);

using SplitKernelLargeTest = BackendTest;

TEST_P(SplitKernelLargeTest, ThreeOutputsAlongRowsOfABigTensor) {
  std::mt19937_64 rng(5);
  OwnedTensor input = MakeTensor(DType::kFloat32, {300, 1024}, LayoutKind::kPermuted, rng);
  std::vector<std::vector<int64_t>> sizes = {{100, 1024}, {1, 1024}, {199, 1024}};
  OpRequest request{SplitAttrs{0}, {{"input", input.view()}}, {}};
  for (const auto& s : sizes) request.outputs.push_back({s, {}});
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  std::vector<Expected> expected = ReferenceSplit(0, input, sizes);
  for (size_t j = 0; j < 3; ++j) EXPECT_TRUE(OutputMatches(outputs[j], expected[j]));
}

INSTANTIATE_BACKENDS(SplitKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
