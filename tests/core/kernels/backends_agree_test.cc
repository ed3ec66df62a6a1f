// The CPU and OpenCL backends give the same bytes, padding included, for random
// requests of every operator, dtype and layout: compared with each other
// directly, not only each with the reference.
#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "tests/core/kernels/matrix.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

class BackendsAgreeTest : public ::testing::TestWithParam<DType> {
 protected:
  void ExpectSameBytes(const OpRequest& request) {
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> cpu, RunOn(Backend::kTbb, request));
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> opencl, RunOn(Backend::kOpenCL, request));
    ASSERT_EQ(cpu.size(), opencl.size());
    for (size_t j = 0; j < cpu.size(); ++j) {
      EXPECT_EQ(cpu[j].layout.strides, opencl[j].layout.strides);
      ASSERT_EQ(cpu[j].bytes.size(), opencl[j].bytes.size());
      EXPECT_EQ(std::memcmp(cpu[j].bytes.data(), opencl[j].bytes.data(), cpu[j].bytes.size()), 0)
          << "output " << j;
    }
  }
};

TEST_P(BackendsAgreeTest, RandomRequestsOfEveryOperatorGiveTheSameBytes) {
  const DType dtype = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(dtype));
  for (int trial = 0; trial < 24; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const LayoutKind layout = kAllLayouts[trial % 4];
    const int rank = 1 + trial % 5;
    std::vector<int64_t> sizes;
    for (int d = 0; d < rank; ++d) sizes.push_back(2 + rng() % 4);
    OwnedTensor input = MakeTensor(dtype, sizes, layout, rng);
    std::vector<int64_t> padded = MakeStrides(sizes, LayoutKind::kPadded, rng);

    // Slice: a reversed, strided window into a padded output.
    SliceAttrs slice;
    std::vector<int64_t> slice_sizes;
    for (int64_t size : sizes) {
      slice.offsets.push_back(1);
      slice.window_sizes.push_back(size - 1);
      slice.window_strides.push_back(rng() % 2 ? -1 : 2);
      slice_sizes.push_back(1 + (size - 2) / std::abs(slice.window_strides.back()));
    }
    ExpectSameBytes({slice,
                     {{"input", input.view()}},
                     {{slice_sizes, MakeStrides(slice_sizes, LayoutKind::kPadded, rng)}}});

    // StridedSlice: reverse the first dimension, add an axis, keep the rest.
    StridedSliceAttrs strided;
    strided.begin = {-1, 0};
    strided.end = {0, 0};
    strided.stride = {-1, 1};
    strided.end_mask = {1, 0};
    strided.new_axis_mask = {0, 1};
    ExpectSameBytes({strided, {{"input", input.view()}}, {}});

    // Split into two along the last axis, into padded outputs.
    std::vector<int64_t> first = sizes, second = sizes;
    first.back() = 1;
    second.back() = sizes.back() - 1;
    ExpectSameBytes({SplitAttrs{rank - 1},
                     {{"input", input.view()}},
                     {{first, MakeStrides(first, LayoutKind::kPadded, rng)}, {second, {}}}});

    // ScatterElements with colliding indices along a random axis.
    const int64_t axis = static_cast<int64_t>(rng() % rank);
    std::vector<int64_t> index_sizes = sizes;
    index_sizes[axis] = 3;
    int64_t count = 1;
    for (int64_t s : index_sizes) count *= s;
    std::vector<int64_t> values(count);
    for (int64_t& v : values) v = static_cast<int64_t>(rng() % 2);  // many collisions
    OwnedTensor indices = MakeIndexTensor(DType::kInt64, index_sizes, values, layout, rng);
    OwnedTensor updates = MakeTensor(dtype, index_sizes, layout, rng);
    ExpectSameBytes(
        {ScatterElementsAttrs{axis},
         {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
         {{sizes, padded}}});
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BackendsAgreeTest, ::testing::ValuesIn(kOneDTypePerSize),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(OpenClStopTest, StopBeforeALaunchReturnsItsStatus) {
  std::vector<std::string> skipped;
  auto devices = opencl_backend::OpenAllDevices(&skipped);
  ASSERT_FALSE(devices.empty());
  std::mt19937_64 rng(3);
  OwnedTensor input = MakeTensor(DType::kUint8, {1 << 23}, LayoutKind::kPacked, rng);
  OpRequest request{SliceAttrs{{0}, {1 << 23}, {-1}}, {{"input", input.view()}}, {{{1 << 23}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
  std::vector<std::byte> output(plan.outputs[0].buffer_bytes());
  int checks = 0;
  // The up-front check passes; the first launch of 2^22 items too; then stop.
  StopCheck stop = [&]() -> absl::Status {
    return ++checks > 2 ? absl::DeadlineExceededError("deadline passed") : absl::OkStatus();
  };
  const std::span<const std::byte> inputs[] = {input.bytes};
  std::byte* outputs[] = {output.data()};
  EXPECT_THAT(devices[0]->Execute(plan, inputs, outputs, stop),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "deadline passed"));
  EXPECT_EQ(checks, 3);
}

TEST(OpenClBufferPoolTest, BuffersAreReusedAcrossRequestsAndTheCacheIsBounded) {
  std::vector<std::string> skipped;
  auto devices = opencl_backend::OpenAllDevices(&skipped);
  ASSERT_FALSE(devices.empty());
  opencl_backend::Device& device = *devices[0];
  std::mt19937_64 rng(4);
  // 40000 bytes in, 40000 out: both round up to the 64 KiB size class.
  OwnedTensor input = MakeTensor(DType::kUint8, {40000}, LayoutKind::kPacked, rng);
  OpRequest request{SliceAttrs{{0}, {40000}, {-1}}, {{"input", input.view()}}, {{{40000}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
  std::vector<std::byte> output(40000);
  const std::span<const std::byte> inputs[] = {input.bytes};
  std::byte* outputs[] = {output.data()};
  EXPECT_EQ(device.pooled_bytes(), 0);
  ASSERT_OK(device.Execute(plan, inputs, outputs, NeverStop));
  EXPECT_EQ(device.pooled_bytes(), 2 * 65536);
  ASSERT_OK(device.Execute(plan, inputs, outputs, NeverStop));
  EXPECT_EQ(device.pooled_bytes(), 2 * 65536);  // the same two, taken and given back
  for (size_t i = 0; i < output.size(); ++i) {
    ASSERT_EQ(output[i], input.bytes[output.size() - 1 - i]) << i;
  }

  // 100 MB each way (the 128 MiB class): the first buffer back fits the 256 MiB
  // cache, the second would pass it and is released.
  OwnedTensor big = MakeTensor(DType::kUint8, {100'000'000}, LayoutKind::kPacked, rng);
  OpRequest copy{SplitAttrs{0}, {{"input", big.view()}}, {{{100'000'000}, {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan copy_plan, PlanOperator(copy, {}));
  std::vector<std::byte> big_output(100'000'000);
  const std::span<const std::byte> big_inputs[] = {big.bytes};
  std::byte* big_outputs[] = {big_output.data()};
  ASSERT_OK(device.Execute(copy_plan, big_inputs, big_outputs, NeverStop));
  EXPECT_EQ(device.pooled_bytes(), 2 * 65536 + (int64_t{1} << 27));
  EXPECT_EQ(std::memcmp(big_output.data(), big.bytes.data(), big.bytes.size()), 0);
}

}  // namespace
}  // namespace tensorop::testing
