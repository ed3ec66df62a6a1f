// The OpenCL kernels on large and colliding shapes, byte for byte against
// oneTBB: tens of thousands of elements, odd byte offsets, runs that go to
// clEnqueueCopyBuffer(Rect), 16-byte words or the kernel, more dimensions than
// the kernel's vector arguments hold, ScatterElements with no, half or every
// update colliding; each on the 32-bit index path and, with the device's limit
// lowered to 0, the 64-bit one. Also rows stored as vectors, tiled transposes,
// a launch table of tiny launches and fixed work-groups, and the profiled
// kernel phase.
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "tests/core/kernels/reference.h"
#include "tests/support/status_matchers.h"

namespace tensorop::testing {
namespace {

// One of each element size.
constexpr DType kWidths[] = {DType::kUint8, DType::kFloat16, DType::kFloat32, DType::kInt64};

opencl_backend::Device& TestDevice() {
  static std::vector<std::unique_ptr<opencl_backend::Device>>* devices =
      new std::vector<std::unique_ptr<opencl_backend::Device>>(
          opencl_backend::OpenAllDevices(nullptr));
  EXPECT_FALSE(devices->empty()) << "no OpenCL device";
  return *devices->front();
}

absl::StatusOr<std::vector<std::vector<std::byte>>> RunOnDevice(opencl_backend::Device& device,
                                                                const OpRequest& request) {
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(request, {});
  if (!plan.ok()) return plan.status();
  std::vector<std::span<const std::byte>> inputs;
  for (absl::string_view name : plan->input_names) {
    for (const NamedTensor& input : request.inputs) {
      if (input.name == name) inputs.push_back(input.tensor.data);
    }
  }
  std::vector<std::vector<std::byte>> outputs;
  std::vector<std::byte*> pointers;
  for (const Layout& layout : plan->outputs) outputs.emplace_back(layout.buffer_bytes());
  for (auto& output : outputs) pointers.push_back(output.data());
  absl::Status status = device.Execute(*plan, inputs, pointers, NeverStop);
  if (!status.ok()) return status;
  return outputs;
}

// Parameter: whether the device's 32-bit index limit is lowered to 0, so that
// every kernel takes its 64-bit variant.
class OpenClKernelsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    TestDevice().set_index32_limit(GetParam() ? 0 : opencl_backend::Device::kDefaultIndex32Limit);
  }
  void TearDown() override {
    TestDevice().set_index32_limit(opencl_backend::Device::kDefaultIndex32Limit);
  }
  // The same bytes as oneTBB, padding included.
  static void ExpectSameBytes(const OpRequest& request) {
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> cpu, RunOnTbb(request));
    ASSERT_OK_AND_ASSIGN(std::vector<std::vector<std::byte>> opencl,
                         RunOnDevice(TestDevice(), request));
    ASSERT_EQ(cpu.size(), opencl.size());
    for (size_t j = 0; j < cpu.size(); ++j) {
      ASSERT_EQ(cpu[j].bytes.size(), opencl[j].size());
      size_t first_difference = 0;
      while (first_difference < opencl[j].size() &&
             cpu[j].bytes[first_difference] == opencl[j][first_difference]) {
        ++first_difference;
      }
      EXPECT_EQ(first_difference, opencl[j].size())
          << "output " << j << " of " << opencl[j].size() << " bytes differs first at byte "
          << first_difference;
    }
  }
};

struct SliceCase {
  const char* name;
  std::vector<int64_t> input_sizes;
  std::vector<int64_t> input_strides;  // empty: packed
  SliceAttrs attrs;
  bool padded_output;
};

std::vector<int64_t> SliceSizes(const SliceAttrs& attrs) {
  std::vector<int64_t> sizes;
  for (size_t d = 0; d < attrs.window_sizes.size(); ++d) {
    sizes.push_back(1 + (attrs.window_sizes[d] - 1) / std::abs(attrs.window_strides[d]));
  }
  return sizes;
}

TEST_P(OpenClKernelsTest, LargeSlicesOfEveryKindAndWidth) {
  const SliceCase cases[] = {
      // One run from an odd offset: clEnqueueCopyBuffer.
      {"rows", {150, 301}, {}, {{3, 0}, {140, 301}, {1, 1}}, false},
      // Rows of 299 elements from an odd column: clEnqueueCopyBufferRect.
      {"window", {150, 301}, {}, {{1, 1}, {140, 299}, {1, 1}}, false},
      {"window into padding", {150, 304}, {}, {{1, 0}, {140, 300}, {1, 1}}, true},
      // Three dimensions, none merged: a 3-D rect.
      {"box", {20, 30, 300}, {}, {{1, 2, 1}, {18, 26, 298}, {1, 1, 1}}, false},
      // Short runs: the kernel, on words as wide as the offsets allow.
      {"short runs", {150, 301}, {}, {{0, 1}, {150, 7}, {1, 1}}, false},
      {"aligned short runs", {150, 304}, {}, {{0, 16}, {150, 16}, {1, 1}}, false},
      {"four dimensions", {6, 7, 8, 300}, {}, {{1, 1, 1, 2}, {5, 6, 7, 296}, {1, 1, 1, 1}}, false},
      // Broadcast rows (source stride 0): 16-byte words when the row allows.
      {"broadcast", {150, 301}, {0, 1}, {{0, 0}, {150, 301}, {1, 1}}, false},
      {"broadcast 16", {150, 304}, {0, 1}, {{0, 0}, {150, 304}, {1, 1}}, true},
      {"reversed", {150, 301}, {}, {{0, 0}, {150, 301}, {-1, -1}}, false},
      {"stride 2", {150, 301}, {}, {{0, 1}, {150, 300}, {1, 2}}, true},
      {"transposed", {301, 150}, {1, 301}, {{0, 0}, {301, 150}, {1, 1}}, false},
      // Rows the destination takes in vectors: read backwards as vectors
      // (aligned), two and three apart word by word.
      {"reversed aligned", {150, 304}, {}, {{0, 0}, {150, 304}, {1, -1}}, false},
      {"stride 2 aligned", {150, 608}, {}, {{0, 0}, {150, 608}, {1, 2}}, false},
      {"stride 3 odd offset", {150, 913}, {}, {{0, 1}, {150, 912}, {1, 3}}, false},
      // Tiles of a transposing copy under an outer dimension, a window of it.
      {"transposed box", {5, 70, 40}, {2800, 1, 70}, {{0, 0, 0}, {5, 70, 40}, {1, 1, 1}}, false},
      {"transposed window", {5, 70, 40}, {2800, 1, 70}, {{1, 3, 2}, {4, 66, 37}, {1, 1, 1}}, true},
      // One long reversed line: several launches of the kernel.
      {"long line", {1 << 23}, {}, {{1}, {(1 << 23) - 2}, {-1}}, false},
  };
  std::mt19937_64 rng(7);
  for (DType dtype : kWidths) {
    for (const SliceCase& c : cases) {
      if (c.input_sizes.size() == 1 && dtype != DType::kUint8) continue;  // 8 MiB is enough
      SCOPED_TRACE(::testing::Message() << c.name << " " << DTypeName(dtype));
      OwnedTensor input = MakeTensor(dtype, c.input_sizes, LayoutKind::kPacked, rng);
      if (!c.input_strides.empty()) {
        int64_t elements = 1;
        for (size_t d = 0; d < c.input_sizes.size(); ++d) {
          elements += (c.input_sizes[d] - 1) * c.input_strides[d];
        }
        input.desc.strides = c.input_strides;
        input.bytes.resize(elements * ElementSize(dtype));
      }
      const std::vector<int64_t> sizes = SliceSizes(c.attrs);
      std::vector<int64_t> strides;
      if (c.padded_output) strides = MakeStrides(sizes, LayoutKind::kPadded, rng);
      ExpectSameBytes({c.attrs, {{"input", input.view()}}, {{sizes, strides}}});
    }
  }
}

TEST_P(OpenClKernelsTest, ManyDimensionsPassTheOuterOnesInABuffer) {
  // Rank 12 with permuted strides: no two dimensions merge, so the copy has
  // more dimensions outside its rows than the kernel's 8 vector components.
  std::mt19937_64 rng(8);
  for (DType dtype : kWidths) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<int64_t> sizes(12, 2);
    sizes[3] = sizes[7] = 3;
    OwnedTensor input = MakeTensor(dtype, sizes, LayoutKind::kPermuted, rng);
    StridedSliceAttrs attrs;
    attrs.begin.assign(12, 0);
    attrs.end.assign(12, 0);
    attrs.end_mask.assign(12, 1);
    attrs.stride.assign(12, 1);
    attrs.stride[0] = -1;
    attrs.begin[0] = -1;
    OpRequest request{attrs, {{"input", input.view()}}, {}};
    ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
    ASSERT_EQ(plan.copies.size(), 1u);
    EXPECT_GT(plan.copies[0].sizes.size(), 9u);
    ExpectSameBytes(request);
  }
}

enum class Collisions { kNone, kHalf, kEvery };

// indices[r][c] along axis 0 of a [rows, columns] output: a permutation of the
// rows (no update collides), rows paired below the middle (half of them
// collide), or every update of a column on one row.
std::vector<int64_t> RowIndices(int64_t rows, int64_t columns, Collisions collisions, bool negative,
                                std::mt19937_64& rng) {
  std::vector<int64_t> permutation(rows);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), rng);
  std::vector<int64_t> values;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t k = permutation[r];
    if (collisions == Collisions::kEvery) k = 7;
    if (collisions == Collisions::kHalf && r < rows / 2) k = permutation[r & ~int64_t{1}];
    for (int64_t c = 0; c < columns; ++c) values.push_back(negative && (r + c) % 2 ? k - rows : k);
  }
  return values;
}

TEST_P(OpenClKernelsTest, LargeScattersWithNoneHalfOrEveryUpdateColliding) {
  std::mt19937_64 rng(9);
  const int64_t rows = 200, columns = 250;
  for (DType dtype : kWidths) {
    for (DType index_type : kIndexDTypes) {
      const bool is_signed = index_type == DType::kInt32 || index_type == DType::kInt64;
      for (Collisions collisions : {Collisions::kNone, Collisions::kHalf, Collisions::kEvery}) {
        SCOPED_TRACE(::testing::Message()
                     << DTypeName(dtype) << " indices " << DTypeName(index_type) << " collisions "
                     << static_cast<int>(collisions));
        OwnedTensor input = MakeTensor(dtype, {rows, columns}, LayoutKind::kPacked, rng);
        std::vector<int64_t> values = RowIndices(rows, columns, collisions, is_signed, rng);
        // Axis 0, the updates and indices in other layouts, a padded output.
        OwnedTensor indices =
            MakeIndexTensor(index_type, {rows, columns}, values, LayoutKind::kPermuted, rng);
        OwnedTensor updates = MakeTensor(dtype, {rows, columns}, LayoutKind::kPadded, rng);
        ExpectSameBytes(
            {ScatterElementsAttrs{0},
             {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
             {{{rows, columns},
               MakeStrides(std::vector<int64_t>{rows, columns}, LayoutKind::kPadded, rng)}}});
        // Axis 1, the innermost: the same values transposed, fewer indices
        // than the axis holds.
        const int64_t kept = columns - 50;
        std::vector<int64_t> inner;
        for (int64_t c = 0; c < rows; ++c) {
          for (int64_t r = 0; r < kept; ++r) {
            int64_t k = values[(r % rows) * columns + c] % rows;
            if (k < 0 && !is_signed) k += rows;
            inner.push_back(k);
          }
        }
        OwnedTensor input_t = MakeTensor(dtype, {rows, columns}, LayoutKind::kPadded, rng);
        OwnedTensor indices_t =
            MakeIndexTensor(index_type, {rows, kept}, inner, LayoutKind::kPacked, rng);
        OwnedTensor updates_t = MakeTensor(dtype, {rows, kept}, LayoutKind::kPacked, rng);
        ExpectSameBytes({ScatterElementsAttrs{1},
                         {{"input", input_t.view()},
                          {"indices", indices_t.view()},
                          {"updates", updates_t.view()}},
                         {}});
      }
    }
  }
}

TEST_P(OpenClKernelsTest, ScatterAlongASizeOneAxisAndIntoThreeDimensions) {
  std::mt19937_64 rng(10);
  for (DType dtype : kWidths) {
    SCOPED_TRACE(DTypeName(dtype));
    // Indices of size 1 along the axis: every index is 0, nothing collides.
    OwnedTensor input = MakeTensor(dtype, {120, 3, 170}, LayoutKind::kPacked, rng);
    std::vector<int64_t> zeros(120 * 170, 0);
    OwnedTensor indices =
        MakeIndexTensor(DType::kInt64, {120, 1, 170}, zeros, LayoutKind::kPacked, rng);
    OwnedTensor updates = MakeTensor(dtype, {120, 1, 170}, LayoutKind::kPermuted, rng);
    ExpectSameBytes(
        {ScatterElementsAttrs{1},
         {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
         {}});
    // The middle axis with heavy collisions, in a broadcast-free permuted layout.
    std::vector<int64_t> values(120 * 3 * 170);
    for (int64_t& v : values) v = static_cast<int64_t>(rng() % 2);
    OwnedTensor middle =
        MakeIndexTensor(DType::kUint32, {120, 3, 170}, values, LayoutKind::kPermuted, rng);
    OwnedTensor middle_updates = MakeTensor(dtype, {120, 3, 170}, LayoutKind::kPadded, rng);
    ExpectSameBytes(
        {ScatterElementsAttrs{1},
         {{"input", input.view()}, {"indices", middle.view()}, {"updates", middle_updates.view()}},
         {}});
  }
}

TEST_P(OpenClKernelsTest, ConcurrentRequestsShareTheCachedKernels) {
  // Four threads, each its own shapes, on one device: kernel objects are lent
  // to one launcher at a time, so no launch sees another's arguments.
  std::mt19937_64 rng(11);
  std::vector<OwnedTensor> inputs;
  std::vector<OpRequest> requests;
  std::vector<std::vector<OwnedOutput>> expected;
  for (int t = 0; t < 4; ++t)
    inputs.push_back(MakeTensor(DType::kFloat32, {90 + t, 301}, LayoutKind::kPacked, rng));
  for (int t = 0; t < 4; ++t) {
    const int64_t step = t % 2 ? -1 : 2;
    requests.push_back({SliceAttrs{{t, 1}, {80, 290 - t}, {1, step}},
                        {{"input", inputs[t].view()}},
                        {{{80, 1 + (289 - t) / std::abs(step)}, {}}}});
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> cpu, RunOnTbb(requests.back()));
    expected.push_back(std::move(cpu));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 25; ++run) {
        absl::StatusOr<std::vector<std::vector<std::byte>>> out =
            RunOnDevice(TestDevice(), requests[t]);
        if (!out.ok() || (*out)[0] != expected[t][0].bytes) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// Every row of the launch table gives the same bytes: a device opened with
// tiny launches, runs copied by the kernel and fixed work-groups, against
// oneTBB, on copies of each path and a colliding scatter.
TEST_P(OpenClKernelsTest, EveryLaunchTableRowGivesTheSameBytes) {
  opencl_backend::LaunchTable table;
  table.items_per_launch = 1 << 12;
  table.bytes_per_command = 1 << 14;
  table.group_width = 64;
  table.runs_by_kernel = true;
  opencl_backend::DeviceOptions options;
  options.launch_table = table;
  std::vector<std::unique_ptr<opencl_backend::Device>> devices =
      opencl_backend::OpenAllDevices(nullptr, options);
  ASSERT_FALSE(devices.empty());
  opencl_backend::Device& device = *devices.front();
  device.set_index32_limit(GetParam() ? 0 : opencl_backend::Device::kDefaultIndex32Limit);
  std::mt19937_64 rng(12);
  OwnedTensor input = MakeTensor(DType::kFloat32, {150, 608}, LayoutKind::kPacked, rng);
  OwnedTensor square = MakeTensor(DType::kUint8, {300, 200}, LayoutKind::kPacked, rng);
  square.desc.strides = {1, 300};
  const auto slice = [](const OwnedTensor& tensor, SliceAttrs attrs) -> OpRequest {
    return {attrs, {{"input", tensor.view()}}, {{SliceSizes(attrs), {}}}};
  };
  const std::vector<OpRequest> requests = {
      slice(input, {{3, 0}, {140, 608}, {1, 1}}),  slice(input, {{1, 8}, {140, 512}, {1, 1}}),
      slice(input, {{0, 0}, {150, 608}, {-1, 2}}), slice(input, {{0, 0}, {150, 608}, {1, -1}}),
      slice(square, {{0, 0}, {300, 200}, {1, 1}}),
  };
  for (const OpRequest& request : requests) {
    ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> cpu, RunOnTbb(request));
    ASSERT_OK_AND_ASSIGN(std::vector<std::vector<std::byte>> opencl, RunOnDevice(device, request));
    ASSERT_EQ(opencl.size(), 1u);
    EXPECT_TRUE(cpu[0].bytes == opencl[0]);
  }
  std::vector<int64_t> values = RowIndices(120, 90, Collisions::kHalf, true, rng);
  OwnedTensor target = MakeTensor(DType::kFloat32, {120, 90}, LayoutKind::kPacked, rng);
  OwnedTensor indices = MakeIndexTensor(DType::kInt64, {120, 90}, values, LayoutKind::kPacked, rng);
  OwnedTensor updates = MakeTensor(DType::kFloat32, {120, 90}, LayoutKind::kPacked, rng);
  const OpRequest scatter{
      ScatterElementsAttrs{0},
      {{"input", target.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
      {}};
  ASSERT_OK_AND_ASSIGN(std::vector<OwnedOutput> cpu, RunOnTbb(scatter));
  ASSERT_OK_AND_ASSIGN(std::vector<std::vector<std::byte>> opencl, RunOnDevice(device, scatter));
  EXPECT_TRUE(cpu[0].bytes == opencl[0]);
}

// A device opened to profile its kernels says what the kernel phase took on
// it: every command of a copy and of a scatter's phases, each START..END.
TEST(OpenClProfilingTest, TimingsCountTheKernelPhasesCommands) {
  opencl_backend::DeviceOptions options;
  options.profile_kernels = true;
  std::vector<std::unique_ptr<opencl_backend::Device>> devices =
      opencl_backend::OpenAllDevices(nullptr, options);
  ASSERT_FALSE(devices.empty());
  std::mt19937_64 rng(13);
  OwnedTensor input = MakeTensor(DType::kFloat32, {64, 300}, LayoutKind::kPacked, rng);
  const SliceAttrs attrs{{0, 0}, {64, 300}, {1, -1}};
  const OpRequest request{attrs, {{"input", input.view()}}, {{SliceSizes(attrs), {}}}};
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan, PlanOperator(request, {}));
  std::vector<std::byte> output(plan.outputs[0].buffer_bytes());
  std::byte* outputs[] = {output.data()};
  const std::span<const std::byte> inputs[] = {input.bytes};
  opencl_backend::DeviceTimings timings;
  ASSERT_OK(devices.front()->Execute(plan, inputs, outputs, NeverStop, &timings));
  EXPECT_EQ(timings.kernel_commands, 1);  // one launch of strided_copy
  EXPECT_GT(timings.kernel_device_ns, 0);
  EXPECT_GT(timings.kernel_ns, 0);
  // Without timings asked for, nothing is read; with a device not profiling,
  // no command is counted.
  ASSERT_OK(devices.front()->Execute(plan, inputs, outputs, NeverStop));
  opencl_backend::DeviceTimings plain;
  ASSERT_OK(TestDevice().Execute(plan, inputs, outputs, NeverStop, &plain));
  EXPECT_EQ(plain.kernel_commands, 0);
  EXPECT_EQ(plain.kernel_device_ns, 0);
}

INSTANTIATE_TEST_SUITE_P(IndexPaths, OpenClKernelsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Index64" : "Index32");
                         });

}  // namespace
}  // namespace tensorop::testing
