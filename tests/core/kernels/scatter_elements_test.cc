// ScatterElements on oneTBB against the naive reference: every dtype, layout,
// rank and index type, colliding updates (last in row-major order wins), and a
// large parallel run whose result must not depend on scheduling.
#include <random>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

struct ScatterCase {
  OwnedTensor input, indices, updates;
  int64_t axis;
};

// Index values drawn from a small range so updates often collide.
ScatterCase MakeRandomScatter(DType dtype, DType index_type, LayoutKind layout,
                              std::span<const int64_t> sizes, std::mt19937_64& rng) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  const int64_t axis = static_cast<int64_t>(rng() % rank);
  std::vector<int64_t> index_sizes(sizes.begin(), sizes.end());
  index_sizes[axis] = 1 + static_cast<int64_t>(rng() % 6);
  int64_t count = 1;
  for (int64_t s : index_sizes) count *= s;
  const bool is_signed = index_type == DType::kInt32 || index_type == DType::kInt64;
  std::vector<int64_t> values;
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = static_cast<int64_t>(rng() % sizes[axis]);
    if (is_signed && rng() % 2) k -= sizes[axis];  // the negative spelling
    values.push_back(k);
  }
  ScatterCase c{MakeTensor(dtype, std::vector<int64_t>(sizes.begin(), sizes.end()), layout, rng),
                MakeIndexTensor(index_type, index_sizes, values, layout, rng),
                MakeTensor(dtype, index_sizes, layout, rng), axis};
  return c;
}

using ScatterElementsKernelTest = KernelMatrixTest;

TEST_P(ScatterElementsKernelTest, MatchesReferenceForEveryIndexTypeAndRank) {
  std::mt19937_64 rng = Rng();
  for (int rank = 1; rank <= 8; ++rank) {
    for (DType index_type : kIndexDTypes) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " indices " << DTypeName(index_type));
      std::vector<int64_t> sizes;
      for (int d = 0; d < rank; ++d) sizes.push_back(1 + rng() % (rank > 5 ? 3 : 5));
      ScatterCase c = MakeRandomScatter(dtype(), index_type, layout(), sizes, rng);
      OpRequest request{
          ScatterElementsAttrs{c.axis},
          {{"input", c.input.view()}, {"indices", c.indices.view()}, {"updates", c.updates.view()}},
          {}};
      if (rank % 2) request.outputs = {{sizes, OutputStrides(sizes, rank, rng)}};
      ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_TRUE(OutputMatches(outputs[0],
                                ReferenceScatterElements(c.axis, c.input, c.indices, c.updates)));
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(ScatterElementsKernelTest);

using ScatterElementsKernelOrderTest = BackendTest;

TEST_P(ScatterElementsKernelOrderTest, LastUpdateInRowMajorOrderWins) {
  std::mt19937_64 rng(1);
  // Every update of a column lands on row 0: the last row's value must win.
  OwnedTensor input = MakeTensor(DType::kFloat32, {3, 2}, LayoutKind::kPacked, rng);
  const int64_t index_values[] = {0, 0, 0, 0, 0, 0, 0, 0};
  OwnedTensor indices =
      MakeIndexTensor(DType::kInt64, {4, 2}, index_values, LayoutKind::kPacked, rng);
  OwnedTensor updates = MakeTensor(DType::kFloat32, {4, 2}, LayoutKind::kPacked, rng);
  ASSERT_OK_AND_ASSIGN(
      std::vector<OwnedOutput> outputs,
      Run({ScatterElementsAttrs{0},
           {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
           {}}));
  const int64_t last_row_0[] = {3, 0}, last_row_1[] = {3, 1};
  const int64_t out_0[] = {0, 0}, out_1[] = {0, 1};
  EXPECT_EQ(ElementBits({DType::kFloat32, {3, 2}, {}}, outputs[0].bytes, out_0),
            ElementBits(updates.desc, updates.bytes, last_row_0));
  EXPECT_EQ(ElementBits({DType::kFloat32, {3, 2}, {}}, outputs[0].bytes, out_1),
            ElementBits(updates.desc, updates.bytes, last_row_1));
}

TEST_P(ScatterElementsKernelOrderTest, ParallelRunWithCollisionsIsDeterministic) {
  std::mt19937_64 rng(2);
  const std::vector<int64_t> sizes = {2048, 64};
  std::vector<int64_t> values(4096 * 64);
  for (int64_t& v : values) v = static_cast<int64_t>(rng() % 8);  // heavy collisions
  OwnedTensor input = MakeTensor(DType::kUint64, sizes, LayoutKind::kPacked, rng);
  OwnedTensor indices =
      MakeIndexTensor(DType::kUint32, {4096, 64}, values, LayoutKind::kPermuted, rng);
  OwnedTensor updates = MakeTensor(DType::kUint64, {4096, 64}, LayoutKind::kPadded, rng);
  OpRequest request{
      ScatterElementsAttrs{0},
      {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
      {}};
  Expected expected = ReferenceScatterElements(0, input, indices, updates);
  for (int run = 0; run < 3; ++run) {
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
    EXPECT_TRUE(OutputMatches(outputs[0], expected)) << "run " << run;
  }
}

INSTANTIATE_BACKENDS(ScatterElementsKernelOrderTest);

}  // namespace
}  // namespace tensorop::testing
