// Join on every backend against the naive reference: every element width,
// input layout and rank, from one input to a hundred and thirty, and requested
// output layouts.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

// `count` inputs of `sizes` but along `axis` (1..3 there), in `kind`'s layout.
std::vector<OwnedTensor> MakeInputs(DType dtype, std::vector<int64_t> sizes, int64_t axis,
                                    int count, LayoutKind kind, std::mt19937_64& rng) {
  std::vector<OwnedTensor> inputs;
  for (int k = 0; k < count; ++k) {
    sizes[static_cast<size_t>(axis)] = 1 + static_cast<int64_t>(rng() % 3);
    inputs.push_back(MakeTensor(dtype, sizes, kind, rng));
  }
  return inputs;
}

OpRequest JoinRequest(int64_t axis, const std::vector<OwnedTensor>& inputs,
                      std::vector<OutputDesc> outputs = {}) {
  OpRequest request{JoinAttrs{axis}, {}, std::move(outputs)};
  for (size_t k = 0; k < inputs.size(); ++k) {
    request.inputs.push_back({absl::StrCat("inputs_", k), inputs[k].view()});
  }
  return request;
}

using JoinKernelTest = KernelMatrixTest;

TEST_P(JoinKernelTest, MatchesReferenceForEveryRankAndAxis) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    std::vector<int64_t> sizes;
    for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 2 : 4));
    const int64_t axis = static_cast<int64_t>(rng() % rank);
    const int count = 1 + static_cast<int>(rng() % 4);
    SCOPED_TRACE(::testing::Message()
                 << "rank " << rank << " axis " << axis << " inputs " << count);
    const std::vector<OwnedTensor> inputs = MakeInputs(dtype(), sizes, axis, count, layout(), rng);
    const Expected expected = ReferenceJoin(axis, inputs);
    ASSERT_OK_AND_ASSIGN(
        std::vector<OwnedOutput> outputs,
        Run(JoinRequest(axis, inputs, {{{}, OutputStrides(expected.sizes, rank, rng)}})));
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_TRUE(OutputMatches(outputs[0], expected));
  }
}

INSTANTIATE_KERNEL_MATRIX(JoinKernelTest);

using JoinKernelLargeTest = BackendTest;

// A hundred and thirty inputs of mixed layouts along the middle axis, and rows
// long enough for the oneTBB copies to split.
TEST_P(JoinKernelLargeTest, ManyInputsAndLongRowsMatchReference) {
  std::mt19937_64 rng(47);
  std::vector<OwnedTensor> inputs;
  for (int k = 0; k < 130; ++k) {
    const LayoutKind kind = k % 3 == 0 ? LayoutKind::kPacked : LayoutKind::kPadded;
    inputs.push_back(MakeTensor(DType::kUint16, {3, 1 + k % 4, 5}, kind, rng));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(JoinRequest(1, inputs)));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceJoin(1, inputs)));

  std::vector<OwnedTensor> rows = {MakeTensor(DType::kInt32, {64, 3000}, LayoutKind::kPacked, rng),
                                   MakeTensor(DType::kInt32, {64, 5000}, LayoutKind::kPacked, rng)};
  ASSERT_OK_AND_ASSIGN(outputs, Run(JoinRequest(1, rows)));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferenceJoin(1, rows)));
}

INSTANTIATE_BACKENDS(JoinKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
