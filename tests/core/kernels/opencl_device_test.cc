// The OpenCL device's transfers (kernels/opencl/device.h): chunked staging
// smaller than the tensors, only the bytes a plan reads uploaded, several
// Executes at once on one device, stops mid-transfer. Every result is compared
// byte for byte with the oneTBB backend's.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/attrs.h"
#include "core/dtype.h"
#include "core/limits.h"
#include "core/operator.h"
#include "core/plan/byte_range.h"
#include "core/plan/plan.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "kernels/tbb/execute.h"
#include "tests/support/status_matchers.h"

namespace tensorop::opencl_backend {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Device> OpenFirst(int64_t staging_bytes, bool profile_kernels = false) {
  std::vector<std::string> skipped;
  std::vector<std::unique_ptr<Device>> devices = OpenAllDevices(
      &skipped, DeviceOptions{.staging_bytes = staging_bytes, .profile_kernels = profile_kernels});
  if (devices.empty()) return nullptr;
  return std::move(devices.front());
}

// A packed tensor whose bytes follow `seed`, so every request's data differs.
struct Owned {
  TensorDesc desc;
  std::vector<std::byte> bytes;
  TensorView view() const { return TensorView{desc, bytes}; }
};

Owned Pattern(DType dtype, std::vector<int64_t> sizes, uint32_t seed) {
  int64_t elements = 1;
  for (int64_t size : sizes) elements *= size;
  Owned tensor{TensorDesc{dtype, std::move(sizes), {}},
               std::vector<std::byte>(static_cast<size_t>(elements * ElementSize(dtype)))};
  uint32_t x = seed * 2654435761u + 1;
  for (std::byte& b : tensor.bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return tensor;
}

// Indices in [0, n) as int64, colliding often.
Owned Indices(std::vector<int64_t> sizes, int64_t n, uint32_t seed) {
  Owned tensor = Pattern(DType::kInt64, std::move(sizes), seed);
  auto* values = reinterpret_cast<int64_t*>(tensor.bytes.data());
  for (size_t i = 0; i < tensor.bytes.size() / 8; ++i) {
    values[i] = static_cast<int64_t>((static_cast<uint64_t>(values[i]) >> 1) % n);
  }
  return tensor;
}

struct Result {
  absl::Status status;
  std::vector<std::vector<std::byte>> outputs;
};

Result RunRequest(const OpRequest& request, Device* device, const StopCheck& stop = NeverStop,
                  DeviceTimings* timings = nullptr) {
  Result result;
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(request, Limits{});
  if (!plan.ok()) {
    result.status = plan.status();
    return result;
  }
  std::vector<std::span<const std::byte>> inputs;
  std::vector<const std::byte*> pointers;
  for (absl::string_view name : plan->input_names) {
    for (const NamedTensor& input : request.inputs) {
      if (input.name == name) {
        inputs.push_back(input.tensor.data);
        pointers.push_back(input.tensor.data.data());
      }
    }
  }
  std::vector<std::byte*> outputs;
  for (const Layout& layout : plan->outputs) {
    result.outputs.emplace_back(static_cast<size_t>(layout.buffer_bytes()), std::byte{0});
  }
  for (std::vector<std::byte>& output : result.outputs) outputs.push_back(output.data());
  result.status = device == nullptr ? tbb_backend::Execute(*plan, pointers, outputs)
                                    : device->Execute(*plan, inputs, outputs, stop, timings);
  return result;
}

// The device's answer equals the oneTBB backend's, byte for byte.
void ExpectSameAsTbb(const OpRequest& request, Device* device) {
  const Result expected = RunRequest(request, nullptr);
  ASSERT_OK(expected.status);
  const Result actual = RunRequest(request, device);
  ASSERT_OK(actual.status);
  ASSERT_EQ(actual.outputs.size(), expected.outputs.size());
  for (size_t j = 0; j < expected.outputs.size(); ++j) {
    EXPECT_TRUE(actual.outputs[j] == expected.outputs[j]) << "output " << j;
  }
}

class OpenClDeviceTest : public ::testing::Test {
 protected:
  void Open(int64_t staging_bytes, bool profile_kernels = false) {
    device_ = OpenFirst(staging_bytes, profile_kernels);
    ASSERT_NE(device_, nullptr) << "no OpenCL device (is pocl-opencl-icd installed?)";
  }
  std::unique_ptr<Device> device_;
};

TEST_F(OpenClDeviceTest, TensorsLargerThanStagingGoThroughInChunks) {
  // 4 KiB of staging (chunks of 512 bytes) for a 384 KiB input and a 96 KiB
  // reversed, strided output.
  Open(4096);
  EXPECT_EQ(device_->staging_bytes(), 4096);
  const Owned input = Pattern(DType::kFloat32, {96, 1024}, 1);
  OpRequest request{SliceAttrs{{0, 1}, {96, 1022}, {-2, 4}},
                    {{"input", input.view()}},
                    {OutputDesc{{48, 256}, {}}}};
  ExpectSameAsTbb(request, device_.get());
  EXPECT_GT(device_->staging_allocated_bytes(), 0);
  EXPECT_LE(device_->staging_allocated_bytes(), 4096);
}

TEST_F(OpenClDeviceTest, ScatterThroughSmallStagingIsByteExact) {
  Open(1000);  // chunks of 125 bytes: no chunk holds a whole number of elements
  const Owned input = Pattern(DType::kFloat64, {64, 300}, 2);
  const Owned indices = Indices({64, 200}, 300, 3);
  const Owned updates = Pattern(DType::kFloat64, {64, 200}, 4);
  OpRequest request{
      ScatterElementsAttrs{1},
      {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
      {}};
  ExpectSameAsTbb(request, device_.get());
  EXPECT_LE(device_->staging_allocated_bytes(), 1000);
}

TEST_F(OpenClDeviceTest, OnlyTheRowsASliceReadsAreUploaded) {
  Open(int64_t{1} << 20);
  // Rows 10 and 11 of a [1000, 256] float32 input (1 MB): 2 KiB uploaded.
  const Owned input = Pattern(DType::kFloat32, {1000, 256}, 5);
  OpRequest request{
      SliceAttrs{{10, 0}, {2, 256}, {1, 1}}, {{"input", input.view()}}, {OutputDesc{{2, 256}, {}}}};
  const int64_t before = device_->uploaded_bytes();
  ExpectSameAsTbb(request, device_.get());
  EXPECT_EQ(device_->uploaded_bytes() - before, 2 * 256 * 4);

  // A window from an unaligned byte: the upload starts at the multiple of 256
  // below it and the kernel's offset is rebased; still byte-exact.
  OpRequest odd{
      SliceAttrs{{500, 3}, {7, 5}, {-1, 1}}, {{"input", input.view()}}, {OutputDesc{{7, 5}, {}}}};
  const int64_t start = (500 * 256 + 3) * 4;
  const int64_t end = (506 * 256 + 8) * 4;
  const int64_t middle = device_->uploaded_bytes();
  ExpectSameAsTbb(odd, device_.get());
  EXPECT_EQ(device_->uploaded_bytes() - middle, end - (start - start % 256));
}

TEST_F(OpenClDeviceTest, RunsOfAHostInputGoStraightIntoTheOutputsWithNoCopyThere) {
  // Staging of 1000 bytes: each run goes up in pieces of 125, into its output
  // from an offset no piece divides.
  Open(1000, /*profile_kernels=*/true);
  const Owned first = Pattern(DType::kInt16, {3, 7}, 11);
  const Owned second = Pattern(DType::kInt16, {5, 7}, 12);
  const Owned third = Pattern(DType::kInt16, {1, 7}, 13);
  const Owned bytes = Pattern(DType::kUint8, {10, 33}, 14);
  const std::vector<OpRequest> requests = {
      // three inputs one after another: runs at output bytes 0, 42 and 112
      {JoinAttrs{0},
       {{"inputs_0", first.view()}, {"inputs_1", second.view()}, {"inputs_2", third.view()}},
       {}},
      {SliceAttrs{{4, 0}, {5, 33}, {1, 1}}, {{"input", bytes.view()}}, {OutputDesc{{5, 33}, {}}}},
  };
  const int64_t run_bytes[] = {(3 + 5 + 1) * 7 * 2, 5 * 33};
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    const Result expected = RunRequest(requests[i], nullptr);
    ASSERT_OK(expected.status);
    const int64_t before = device_->uploaded_bytes();
    DeviceTimings timings;
    const Result actual = RunRequest(requests[i], device_.get(), NeverStop, &timings);
    ASSERT_OK(actual.status);
    EXPECT_TRUE(actual.outputs == expected.outputs);
    EXPECT_EQ(device_->uploaded_bytes() - before, run_bytes[i]);
    EXPECT_EQ(timings.kernel_commands, 0);  // no copy on the device
  }
  // A scatter's input goes straight into its output, and the walk writes
  // over it there, colliding updates included.
  const Owned input = Pattern(DType::kFloat32, {64, 300}, 15);
  const Owned indices = Indices({64, 200}, 300, 16);
  const Owned updates = Pattern(DType::kFloat32, {64, 200}, 17);
  const int64_t before = device_->uploaded_bytes();
  ExpectSameAsTbb(
      {ScatterElementsAttrs{1},
       {{"input", input.view()}, {"indices", indices.view()}, {"updates", updates.view()}},
       {}},
      device_.get());
  EXPECT_EQ(device_->uploaded_bytes() - before,
            static_cast<int64_t>(input.bytes.size() + indices.bytes.size() + updates.bytes.size()));
}

TEST_F(OpenClDeviceTest, SeveralRunsGoUpOneByOneOnlyWhenEachIsLarge) {
  Open(4 << 20, /*profile_kernels=*/true);
  // Two outputs of kSeveralRunsMinBytes each go up into the outputs; sixteen
  // of 4 KiB go up as one input and are copied there, one command each.
  const Owned large = Pattern(DType::kUint8, {2, kSeveralRunsMinBytes}, 18);
  const Owned small = Pattern(DType::kUint8, {16, 4096}, 19);
  const OpRequest halves{
      SplitAttrs{0},
      {{"input", large.view()}},
      {OutputDesc{{1, kSeveralRunsMinBytes}, {}}, OutputDesc{{1, kSeveralRunsMinBytes}, {}}}};
  OpRequest sixteenths{SplitAttrs{0}, {{"input", small.view()}}, {}};
  for (int k = 0; k < 16; ++k) sixteenths.outputs.push_back(OutputDesc{{1, 4096}, {}});
  const std::pair<const OpRequest*, int64_t> cases[] = {{&halves, 0}, {&sixteenths, 16}};
  for (const auto& [request, commands] : cases) {
    SCOPED_TRACE(commands);
    const Result expected = RunRequest(*request, nullptr);
    ASSERT_OK(expected.status);
    DeviceTimings timings;
    const Result actual = RunRequest(*request, device_.get(), NeverStop, &timings);
    ASSERT_OK(actual.status);
    EXPECT_TRUE(actual.outputs == expected.outputs);
    EXPECT_EQ(timings.kernel_commands, commands);
  }
}

TEST_F(OpenClDeviceTest, ConcurrentExecutesOnOneDeviceAreByteExact) {
  // 64 KiB of staging shared by 8 threads, most moving more than that.
  Open(64 << 10);
  constexpr int kThreads = 8;
  constexpr int kRounds = 6;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const uint32_t seed = static_cast<uint32_t>(t * 100 + round);
        std::vector<Owned> tensors;
        OpRequest request;
        switch ((t + round) % 4) {
          case 0:
            tensors.push_back(Pattern(DType::kUint16, {128, 300 + t}, seed));
            request = {SliceAttrs{{1, 2}, {120, 290}, {-3, 2}},
                       {{"input", tensors[0].view()}},
                       {OutputDesc{{40, 145}, {}}}};
            break;
          case 1:
            tensors.push_back(Pattern(DType::kInt32, {60, 250}, seed));
            request = {SplitAttrs{1},
                       {{"input", tensors[0].view()}},
                       {OutputDesc{{60, 100}, {}}, OutputDesc{{60, 150}, {210, 1}}}};
            break;
          case 2:  // small: stays on the compute queue
            tensors.push_back(Pattern(DType::kFloat32, {16, 33}, seed));
            request = {SliceAttrs{{1, 0}, {15, 33}, {2, -4}},
                       {{"input", tensors[0].view()}},
                       {OutputDesc{{8, 9}, {}}}};
            break;
          default:
            tensors.push_back(Pattern(DType::kInt8, {50, 400}, seed));
            tensors.push_back(Indices({50, 300}, 400, seed + 1));
            tensors.push_back(Pattern(DType::kInt8, {50, 300}, seed + 2));
            request = {ScatterElementsAttrs{1},
                       {{"input", tensors[0].view()},
                        {"indices", tensors[1].view()},
                        {"updates", tensors[2].view()}},
                       {}};
            break;
        }
        const Result expected = RunRequest(request, nullptr);
        const Result actual = RunRequest(request, device_.get());
        if (!expected.status.ok() || !actual.status.ok()) {
          ADD_FAILURE() << expected.status << " / " << actual.status;
          ++failures;
          continue;
        }
        if (actual.outputs != expected.outputs) ++mismatches;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_LE(device_->staging_allocated_bytes(), 64 << 10);
}

TEST_F(OpenClDeviceTest, StopDuringTheUploadReturnsItsStatusAndTheDeviceStaysUsable) {
  Open(4096);
  const Owned input = Pattern(DType::kUint8, {256, 1024}, 6);
  OpRequest request{SliceAttrs{{0, 0}, {256, 1024}, {1, 1}},
                    {{"input", input.view()}},
                    {OutputDesc{{256, 1024}, {}}}};
  int asked = 0;
  const StopCheck stop_later = [&asked]() -> absl::Status {
    return ++asked > 20 ? absl::CancelledError("stopped by the test") : absl::OkStatus();
  };
  const Result stopped = RunRequest(request, device_.get(), stop_later);
  EXPECT_THAT(stopped.status, StatusIs(absl::StatusCode::kCancelled, HasSubstr("by the test")));
  EXPECT_GT(asked, 20);
  ExpectSameAsTbb(request, device_.get());
}

TEST_F(OpenClDeviceTest, TimingsAreFilledOnOneQueueAndOnThree) {
  Open(64 << 10);
  // 1 KiB moved (the compute queue alone) and 512 KiB moved (three queues).
  for (const int64_t rows : {1, 256}) {
    SCOPED_TRACE(rows);
    const Owned input = Pattern(DType::kFloat32, {rows, 256}, 8);
    OpRequest request{SliceAttrs{{0, 0}, {rows, 256}, {1, 1}},
                      {{"input", input.view()}},
                      {OutputDesc{{rows, 256}, {}}}};
    DeviceTimings timings;
    const Result expected = RunRequest(request, nullptr);
    const Result actual = RunRequest(request, device_.get(), NeverStop, &timings);
    ASSERT_OK(actual.status);
    EXPECT_TRUE(actual.outputs == expected.outputs);
    EXPECT_GE(timings.upload_ns, 0);
    EXPECT_GE(timings.kernel_ns, 0);
    EXPECT_GE(timings.download_ns, 0);
    EXPECT_GT(timings.upload_ns + timings.kernel_ns + timings.download_ns, 0);
  }
}

TEST_F(OpenClDeviceTest, WithoutStagingTransfersGoStraightAndStayByteExact) {
  Open(0);
  const Owned input = Pattern(DType::kFloat32, {64, 512}, 7);
  OpRequest request{SliceAttrs{{3, 0}, {60, 512}, {2, -3}},
                    {{"input", input.view()}},
                    {OutputDesc{{30, 171}, {}}}};
  ExpectSameAsTbb(request, device_.get());
  EXPECT_EQ(device_->staging_allocated_bytes(), 0);
  EXPECT_THAT(device_->StagingDma(1024, true),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no staging")));
}

TEST_F(OpenClDeviceTest, TransferProbesMoveTheirBytes) {
  Open(64 << 10);
  std::vector<std::byte> host(300 << 10, std::byte{7});
  ASSERT_OK(device_->StagingDma(static_cast<int64_t>(host.size()), true));
  ASSERT_OK(device_->StagingDma(static_cast<int64_t>(host.size()), false));
  ASSERT_OK(device_->Upload(host));
  ASSERT_OK(device_->Download(host));
  EXPECT_LE(device_->staging_allocated_bytes(), 64 << 10);
}

}  // namespace
}  // namespace tensorop::opencl_backend
