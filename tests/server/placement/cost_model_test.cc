// AUTO's cost model without devices: predictions from given rates, the
// choice they make, and the footprint (byte ranges) of real plans.
#include "server/placement/cost_model.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "core/operator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/byte_units.h"

namespace tensorop::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using ::tensorop::testing::kKiB;
using ::tensorop::testing::kMiB;

// A 2-core host beside a GPU behind PCIe: the CPU starts at once and copies
// at 2 GB/s; the device costs 50 us per request, moves 20 GB/s each way and
// copies at 1 TB/s.
CostModel TwoCoresAndAGpu() {
  CostModel model;
  model.cpu = {.workers = 2,
               .fixed_seconds = 2e-6,
               .copy_bytes_per_second = 2e9,
               .scatter_bytes_per_second = 0.5e9};
  model.devices = {{.fixed_seconds = 50e-6,
                    .upload_bytes_per_second = 20e9,
                    .download_bytes_per_second = 20e9,
                    .copy_bytes_per_second = 1000e9,
                    .scatter_bytes_per_second = 100e9}};
  return model;
}

// A copy reading `input` bytes (on the host) and writing `output` bytes.
RequestFootprint Copy(int64_t input, int64_t output) {
  return {.inputs = {{input, kOnHost}},
          .copy_bytes = output,
          .scatter_bytes = 0,
          .output_bytes = output};
}

TEST(CostModelTest, PredictionsAddFixedCostTransfersAndKernels) {
  const CostModel model = TwoCoresAndAGpu();
  const RequestFootprint copy = Copy(4 * kMiB, 2 * kMiB);
  EXPECT_DOUBLE_EQ(PredictSeconds(model, kCpuBackend, copy), 2e-6 + 2.0 * kMiB / 2e9);
  EXPECT_DOUBLE_EQ(PredictSeconds(model, 0, copy),
                   50e-6 + 4.0 * kMiB / 20e9 + 2.0 * kMiB / 1000e9 + 2.0 * kMiB / 20e9);
  // Queue occupancy: each request in flight there adds the fixed cost.
  EXPECT_DOUBLE_EQ(PredictSeconds(model, 0, copy, 3) - PredictSeconds(model, 0, copy), 3 * 50e-6);
}

TEST(CostModelTest, SmallRequestRunsOnTheCpu) {
  const CostModel model = TwoCoresAndAGpu();
  const RequestFootprint small = Copy(kKiB, kKiB);
  EXPECT_LT(PredictSeconds(model, kCpuBackend, small), PredictSeconds(model, 0, small));
  EXPECT_EQ(ChooseBackend(model, small, {}), kCpuBackend);
  EXPECT_THAT(FasterThanCpu(model, small, {}), IsEmpty());
}

TEST(CostModelTest, HugeTransferLightRequestGoesToTheDeviceWhenRatesSaySo) {
  // A broadcast: 4 KiB up, 64 MiB written and downloaded.
  const RequestFootprint broadcast = Copy(4 * kKiB, 64 * kMiB);
  CostModel model = TwoCoresAndAGpu();
  // CPU: 64 MiB at 2 GB/s = 34 ms; device: 50 us + 3.4 ms down + 0.07 ms.
  EXPECT_EQ(ChooseBackend(model, broadcast, {}), 0);
  EXPECT_THAT(FasterThanCpu(model, broadcast, {}), ElementsAre(0));
  // A 16-core host copying at 40 GB/s beats the download (1.7 ms against 3.4 ms).
  model.cpu.copy_bytes_per_second = 40e9;
  EXPECT_EQ(ChooseBackend(model, broadcast, {}), kCpuBackend);
}

TEST(CostModelTest, BusyDeviceThatHoldsNoDataLosesToTheCpu) {
  CostModel model = TwoCoresAndAGpu();
  const RequestFootprint copy = Copy(2 * kMiB, 2 * kMiB);
  // Idle: 50 us + 105 us up + 105 us down beats 1049 us on the CPU.
  EXPECT_EQ(ChooseBackend(model, copy, {}), 0);
  // 20 requests in flight there add 1 ms: the CPU is faster now.
  const DeviceLoad busy[] = {{.available = true, .in_flight = 20}};
  EXPECT_EQ(ChooseBackend(model, copy, busy), kCpuBackend);
  // A device that is unhealthy or full is never waited for.
  const DeviceLoad full[] = {{.available = false, .in_flight = 0}};
  EXPECT_EQ(ChooseBackend(model, copy, full), kCpuBackend);
}

TEST(CostModelTest, InputsAlreadyOnTheDeviceMoveNothing) {
  const CostModel model = TwoCoresAndAGpu();
  RequestFootprint kept = Copy(64 * kMiB, kMiB);
  const double from_host = PredictSeconds(model, 0, kept);
  kept.inputs[0].location = 0;
  EXPECT_DOUBLE_EQ(from_host - PredictSeconds(model, 0, kept), 64.0 * kMiB / 20e9);
  // ... and cost the CPU their download.
  EXPECT_DOUBLE_EQ(PredictSeconds(model, kCpuBackend, kept),
                   2e-6 + 1.0 * kMiB / 2e9 + 64.0 * kMiB / 20e9);
  EXPECT_EQ(ChooseBackend(model, kept, {}), 0);
}

TEST(CostModelTest, TheFastestOfSeveralDevicesComesFirst) {
  CostModel model = TwoCoresAndAGpu();
  DeviceRates slower = model.devices[0];
  slower.upload_bytes_per_second = 5e9;
  model.devices = {slower, model.devices[0]};
  const RequestFootprint copy = Copy(16 * kMiB, 16 * kMiB);
  EXPECT_THAT(FasterThanCpu(model, copy, {}), ElementsAre(1, 0));
  const DeviceLoad second_full[] = {{}, {.available = false, .in_flight = 0}};
  EXPECT_THAT(FasterThanCpu(model, copy, second_full), ElementsAre(0));
}

TEST(CostModelTest, AModelWithoutFiguresKeepsAutoOnTheCpu) {
  const RequestFootprint huge = Copy(4 * kKiB, 1024 * kMiB);
  // Before the calibration measured anything.
  EXPECT_EQ(ChooseBackend(CostModel{}, huge, {}), kCpuBackend);
  EXPECT_TRUE(std::isinf(PredictSeconds(CostModel{}, kCpuBackend, huge)));
  // The CPU measured, the device not (a failed or cut-short calibration).
  CostModel model = TwoCoresAndAGpu();
  model.devices[0].scatter_bytes_per_second = 0;
  EXPECT_FALSE(model.devices[0].Complete());
  EXPECT_EQ(ChooseBackend(model, huge, {}), kCpuBackend);
  // The device measured, the CPU not: nothing to compare with, so the CPU.
  model = TwoCoresAndAGpu();
  model.cpu.copy_bytes_per_second = 0;
  EXPECT_EQ(ChooseBackend(model, huge, {}), kCpuBackend);
  // An index past the model's devices.
  EXPECT_TRUE(std::isinf(PredictSeconds(TwoCoresAndAGpu(), 1, huge)));
}

TEST(CostModelTest, ScatterCostsItsCopyAndItsUpdates) {
  const CostModel model = TwoCoresAndAGpu();
  const RequestFootprint scatter{.inputs = {{kMiB, kOnHost}, {kMiB, kOnHost}, {kMiB, kOnHost}},
                                 .copy_bytes = kMiB,
                                 .scatter_bytes = kMiB,
                                 .output_bytes = kMiB};
  EXPECT_DOUBLE_EQ(PredictSeconds(model, kCpuBackend, scatter),
                   2e-6 + 1.0 * kMiB / 2e9 + 1.0 * kMiB / 0.5e9);
}

// --- Footprints of real plans ------------------------------------------------

ExecutionPlan PlanOf(const OpRequest& request) {
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(request, {});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : ExecutionPlan{};
}

TEST(CostModelFootprintTest, ASliceReadsOnlyItsWindow) {
  // uint8 [8, 16]: rows 2..4, columns 4..11 -> bytes [2*16+4, 4*16+12).
  std::vector<std::byte> input(8 * 16);
  const ExecutionPlan plan = PlanOf({SliceAttrs{{2, 4}, {3, 8}, {1, 1}},
                                     {{"input", {TensorDesc{DType::kUint8, {8, 16}, {}}, input}}},
                                     {{{3, 8}, {}}}});
  const ByteRange range = PlanReadRange(plan, 0, 8 * 16);
  EXPECT_EQ(range.begin, 2 * 16 + 4);
  EXPECT_EQ(range.end, 4 * 16 + 12);
  const std::span<const std::byte> inputs[] = {input};
  const RequestFootprint footprint = FootprintOf(plan, inputs);
  ASSERT_EQ(footprint.inputs.size(), 1u);
  EXPECT_EQ(footprint.inputs[0].bytes, 2 * 16 + 8);
  EXPECT_EQ(footprint.inputs[0].location, kOnHost);
  EXPECT_EQ(footprint.copy_bytes, 24);
  EXPECT_EQ(footprint.run_copy_bytes, 0);  // rows of 8 of 16 bytes: copied on a device
  EXPECT_EQ(footprint.output_bytes, 24);
  EXPECT_EQ(footprint.scatter_bytes, 0);
  // Without the inputs at hand the same (a valid plan reads inside them).
  EXPECT_EQ(FootprintOf(plan).inputs[0].bytes, 2 * 16 + 8);
}

TEST(CostModelFootprintTest, RunsADeviceUploadsIntoTheOutputCostItNoCopy) {
  // Whole rows 2..4 of a float32 [8, 16]: one run, uploaded straight into the
  // output on a device; a CPU still copies it.
  std::vector<std::byte> input(8 * 16 * 4);
  const ExecutionPlan plan = PlanOf({SliceAttrs{{2, 0}, {3, 16}, {1, 1}},
                                     {{"input", {TensorDesc{DType::kFloat32, {8, 16}, {}}, input}}},
                                     {{{3, 16}, {}}}});
  const RequestFootprint footprint = FootprintOf(plan);
  EXPECT_EQ(footprint.copy_bytes, 3 * 16 * 4);
  EXPECT_EQ(footprint.run_copy_bytes, 3 * 16 * 4);
  const CostModel model = TwoCoresAndAGpu();
  EXPECT_DOUBLE_EQ(PredictSeconds(model, 0, footprint), 50e-6 + 2 * (3.0 * 16 * 4) / 20e9);
  EXPECT_DOUBLE_EQ(PredictSeconds(model, kCpuBackend, footprint), 2e-6 + (3.0 * 16 * 4) / 2e9);
}

TEST(CostModelFootprintTest, AReversedSliceReadsTheSameBytes) {
  // float32 [10], elements 7 down to 3 (window of 5, stride -1 from offset 3).
  std::vector<std::byte> input(40);
  const ExecutionPlan plan = PlanOf({SliceAttrs{{3}, {5}, {-1}},
                                     {{"input", {TensorDesc{DType::kFloat32, {10}, {}}, input}}},
                                     {{{5}, {}}}});
  const ByteRange range = PlanReadRange(plan, 0, 40);
  EXPECT_EQ(range.begin, 12);
  EXPECT_EQ(range.end, 32);
}

TEST(CostModelFootprintTest, ABroadcastInputIsReadOnce) {
  // int16 [1000, 64] broadcast from one row (stride 0): 128 bytes.
  std::vector<std::byte> row(128);
  const ExecutionPlan plan =
      PlanOf({SliceAttrs{{0, 0}, {1000, 64}, {1, 1}},
              {{"input", {TensorDesc{DType::kInt16, {1000, 64}, {0, 1}}, row}}},
              {{{1000, 64}, {}}}});
  EXPECT_EQ(FootprintOf(plan).inputs[0].bytes, 128);
  EXPECT_EQ(FootprintOf(plan).output_bytes, 1000 * 64 * 2);
}

TEST(CostModelFootprintTest, ScatterReadsItsInputIndicesAndUpdates) {
  // float32 input [4, 3]; int64 indices and updates [2, 3] along axis 0.
  std::vector<std::byte> input(48), indices(48), updates(24);
  const ExecutionPlan plan =
      PlanOf({ScatterElementsAttrs{0},
              {{"input", {TensorDesc{DType::kFloat32, {4, 3}, {}}, input}},
               {"indices", {TensorDesc{DType::kInt64, {2, 3}, {}}, indices}},
               {"updates", {TensorDesc{DType::kFloat32, {2, 3}, {}}, updates}}},
              {}});
  const RequestFootprint footprint = FootprintOf(plan);
  ASSERT_EQ(footprint.inputs.size(), 3u);
  EXPECT_EQ(footprint.inputs[0].bytes, 48);
  EXPECT_EQ(footprint.inputs[1].bytes, 48);
  EXPECT_EQ(footprint.inputs[2].bytes, 24);
  EXPECT_EQ(footprint.copy_bytes, 48);
  EXPECT_EQ(footprint.run_copy_bytes, 48);  // the input goes up into the output
  EXPECT_EQ(footprint.scatter_bytes, 24);
  EXPECT_EQ(footprint.output_bytes, 48);
}

TEST(CostModelFootprintTest, AnInputThePlanDoesNotReadCostsNothing) {
  ExecutionPlan plan;
  plan.input_names = {"input"};
  EXPECT_EQ(PlanReadRange(plan, 0, 100).size(), 0);
  EXPECT_EQ(FootprintOf(plan).inputs[0].bytes, 0);
}

}  // namespace
}  // namespace tensorop::server
