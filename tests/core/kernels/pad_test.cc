// Pad on every backend against the naive reference: every element width, input
// layout and rank, each mode with padding narrower and wider than the input,
// requested output layouts, and a large pad of short rows.
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

using PadKernelTest = KernelMatrixTest;

TEST_P(PadKernelTest, MatchesReferenceInEveryModeAtEveryRank) {
  std::mt19937_64 rng = Rng();
  for (const std::string mode : {"constant", "edge", "reflect", "symmetric"}) {
    for (int rank = 1; rank <= 8; ++rank) {
      for (int trial = 0; trial < 3; ++trial) {
        SCOPED_TRACE(::testing::Message() << mode << " rank " << rank << " trial " << trial);
        // Few padded dimensions at high rank keep the copies (a product of runs) few.
        std::vector<int64_t> sizes, start, end, output_sizes;
        for (int d = 0; d < rank; ++d) {
          const bool padded = rank <= 3 || rng() % 3 == 0;
          sizes.push_back((mode == "reflect" ? 2 : 1) +
                          static_cast<int64_t>(rng() % (rank > 5 ? 2 : 4)));
          // Up to twice the input's size: wider pads fold back more than once.
          const int64_t widest = padded ? 2 * sizes.back() + 1 : 1;
          start.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(widest)));
          end.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(widest)));
        }
        // At most 2048 output elements where the padding decides: halve the
        // widest until so (the reference is element by element, and slow in the
        // sanitizer builds).
        const auto elements = [&] {
          int64_t count = 1;
          for (size_t d = 0; d < sizes.size(); ++d) count *= sizes[d] + start[d] + end[d];
          return count;
        };
        while (elements() > 2048) {
          size_t widest = 0;
          for (size_t d = 1; d < sizes.size(); ++d) {
            if (start[d] + end[d] > start[widest] + end[widest]) widest = d;
          }
          if (start[widest] + end[widest] == 0) break;  // the input alone is that large
          start[widest] /= 2;
          end[widest] /= 2;
        }
        for (size_t d = 0; d < sizes.size(); ++d) {
          output_sizes.push_back(sizes[d] + start[d] + end[d]);
        }
        OwnedTensor input = MakeTensor(dtype(), sizes, layout(), rng);
        // A value of every width's low bits; bool takes only 1.
        const uint64_t value = dtype() == DType::kBool ? 1 : 0x7B;
        const PadAttrs attrs{.start_padding = start,
                             .end_padding = end,
                             .mode = mode,
                             .value = std::to_string(value)};
        OpRequest request{
            attrs, {{"input", input.view()}}, {{{}, OutputStrides(output_sizes, trial, rng)}}};
        ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
        ASSERT_EQ(outputs.size(), 1u);
        // 123 as the dtype's bits: the same for every integer width; the
        // float widths' 123.0 come from the value the server parsed.
        uint64_t bits = value;
        if (dtype() == DType::kBfloat16) bits = 0x42F6;
        if (dtype() == DType::kFloat32) bits = 0x42F60000;
        EXPECT_TRUE(OutputMatches(outputs[0], ReferencePad(attrs, bits, input)));
      }
    }
  }
}

INSTANTIATE_KERNEL_MATRIX(PadKernelTest);

using PadKernelLargeTest = BackendTest;

// Short rows mirrored many times over (whole periods as repeating runs), in a
// permuted input.
TEST_P(PadKernelLargeTest, WideReflectionsOfShortRowsMatchReference) {
  std::mt19937_64 rng(31);
  OwnedTensor input = MakeTensor(DType::kUint16, {3, 5}, LayoutKind::kPermuted, rng);
  for (const std::string mode : {"reflect", "symmetric", "edge"}) {
    const PadAttrs attrs{
        .start_padding = {31, 77}, .end_padding = {25, 40}, .mode = mode, .value = ""};
    OpRequest request{attrs, {{"input", input.view()}}, {}};
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
    EXPECT_TRUE(OutputMatches(outputs[0], ReferencePad(attrs, 0, input))) << mode;
  }
}

// A constant pad of a large input: slabs of every dimension around one copy.
TEST_P(PadKernelLargeTest, ConstantAroundALargeInputMatchesReference) {
  std::mt19937_64 rng(37);
  OwnedTensor input = MakeTensor(DType::kInt64, {37, 3, 211}, LayoutKind::kPacked, rng);
  const PadAttrs attrs{.start_padding = {5, 0, 3},
                       .end_padding = {2, 4, 100},
                       .mode = "constant",
                       .value = "-9223372036854775808"};
  OpRequest request{attrs, {{"input", input.view()}}, {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> outputs, Run(request));
  EXPECT_TRUE(OutputMatches(outputs[0], ReferencePad(attrs, uint64_t{1} << 63, input)));
}

INSTANTIATE_BACKENDS(PadKernelLargeTest);

}  // namespace
}  // namespace tensorop::testing
