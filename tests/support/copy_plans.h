// Hand-made copy plans for the plan tests: one copy into a layout, and random
// pitched copies with inputs to run them on.
#ifndef TENSOROP_TESTS_SUPPORT_COPY_PLANS_H_
#define TENSOROP_TESTS_SUPPORT_COPY_PLANS_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "tests/support/layout.h"

namespace tensorop::testing {

// A plan copying input slot 0 into `output` through byte `src_strides`.
inline ExecutionPlan CopyPlan(const Layout& output, std::vector<int64_t> src_strides,
                              int64_t src_offset = 0) {
  const int64_t element_size = ElementSize(output.dtype);
  ExecutionPlan plan;
  plan.op = "slice";
  plan.input_names = {"input"};
  plan.outputs = {output};
  StridedCopy copy;
  copy.element_size = static_cast<int>(element_size);
  copy.sizes = output.sizes;
  copy.src_strides = std::move(src_strides);
  for (int64_t stride : output.strides) copy.dst_strides.push_back(stride * element_size);
  copy.src_offset = src_offset;
  copy.element_count = output.element_count;
  plan.copies = {copy};
  return plan;
}

// A random copy plan and the input it reads: any element size, rank 1-3, an
// output padded between rows (rows in order), a source with any strides of up
// to 3 elements (0: broadcast; negative: reversed) after up to 2 elements it
// does not read, and random input bytes.
struct RandomCopy {
  ExecutionPlan plan;
  std::vector<std::byte> input;
};
inline RandomCopy RandomPitchedCopy(std::mt19937& random) {
  const auto pick = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  const DType dtype = std::vector<DType>{DType::kUint8, DType::kInt16, DType::kFloat32,
                                         DType::kInt64}[static_cast<size_t>(pick(0, 3))];
  const int64_t element_size = ElementSize(dtype);
  const int rank = static_cast<int>(pick(1, 3));
  std::vector<int64_t> sizes(static_cast<size_t>(rank)), strides(sizes.size());
  int64_t inner = 1;
  for (int d = rank - 1; d >= 0; --d) {
    sizes[d] = pick(1, 6);
    strides[d] = inner;
    inner = inner * sizes[d] + pick(0, 2);  // pitched: rows in order
  }
  const Layout output = MakeLayout(dtype, sizes, strides);
  std::vector<int64_t> src_strides;
  int64_t src_offset = pick(0, 2) * element_size;
  int64_t src_extent = src_offset + element_size;
  for (int d = 0; d < rank; ++d) {
    const int64_t stride = pick(-3, 3) * element_size;
    src_strides.push_back(stride);
    src_offset += stride < 0 ? -stride * (sizes[d] - 1) : 0;
    src_extent += (stride < 0 ? -stride : stride) * (sizes[d] - 1);
  }
  RandomCopy copy{.plan = CopyPlan(output, src_strides, src_offset),
                  .input = std::vector<std::byte>(static_cast<size_t>(src_extent))};
  for (std::byte& b : copy.input) b = static_cast<std::byte>(pick(0, 255));
  return copy;
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_COPY_PLANS_H_
