// The calibration on this host's real devices (PoCL here), its bounds, and
// AUTO placing requests by a cost model in the scheduler.
#include "server/placement/calibration.h"

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/operator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "server/placement/device_pool.h"
#include "server/placement/scheduler.h"
#include "tests/server/placement/open_pool.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<opencl_backend::Device*> Pointers(
    const std::vector<std::unique_ptr<opencl_backend::Device>>& devices) {
  std::vector<opencl_backend::Device*> pointers;
  for (const auto& device : devices) pointers.push_back(device.get());
  return pointers;
}

TEST(CalibrationTest, MeasuresPositiveRatesForTheCpuAndEveryDevice) {
  auto devices = OpenDevices();
  ASSERT_FALSE(devices.empty());
  const CalibrationOptions options{.worker_threads = 2, .budget_seconds = 2.0};
  const CalibrationReport report = Calibrate(Pointers(devices), options);
  EXPECT_TRUE(report.complete) << ::testing::PrintToString(report.problems);
  EXPECT_THAT(report.problems, ::testing::IsEmpty());
  EXPECT_EQ(report.model.cpu.workers, 2);
  EXPECT_GT(report.model.cpu.fixed_seconds, 0);
  EXPECT_GT(report.model.cpu.copy_bytes_per_second, 0);
  EXPECT_GT(report.model.cpu.scatter_bytes_per_second, 0);
  ASSERT_EQ(report.model.devices.size(), devices.size());
  for (const DeviceRates& rates : report.model.devices) {
    EXPECT_GT(rates.fixed_seconds, 0);
    EXPECT_GT(rates.upload_bytes_per_second, 0);
    EXPECT_GT(rates.download_bytes_per_second, 0);
    EXPECT_GT(rates.copy_bytes_per_second, 0);
    EXPECT_GT(rates.scatter_bytes_per_second, 0);
  }
  // The bound holds by construction: a run starts only while the budget has room.
  EXPECT_GT(report.measuring_seconds, 0);
  EXPECT_LE(report.measuring_seconds, options.budget_seconds + report.longest_step_seconds);

  std::vector<std::string> labels;
  for (const auto& device : devices) labels.push_back("opencl:" + device->name());
  const std::string line = DescribeCalibration(report, labels);
  EXPECT_THAT(line, HasSubstr("calibration: cpu (2 workers): fixed "));
  EXPECT_THAT(line, HasSubstr("0 " + labels[0] + ": fixed "));
  EXPECT_THAT(line, HasSubstr(" GB/s"));
  EXPECT_THAT(line, Not(HasSubstr("not measured")));
  EXPECT_THAT(line, Not(HasSubstr("incomplete")));
}

TEST(CalibrationTest, ShortBudgetStopsMeasuringInTime) {
  auto devices = OpenDevices();
  const CalibrationOptions options{.worker_threads = 1, .budget_seconds = 0.02};
  const CalibrationReport report = Calibrate(Pointers(devices), options);
  EXPECT_LE(report.measuring_seconds, options.budget_seconds + report.longest_step_seconds);
}

TEST(CalibrationTest, NoBudgetMeasuresNothingAndKeepsAutoOnTheCpu) {
  auto devices = OpenDevices();
  const CalibrationReport report =
      Calibrate(Pointers(devices), {.worker_threads = 1, .budget_seconds = 0});
  EXPECT_FALSE(report.complete);
  EXPECT_EQ(report.measuring_seconds, 0);
  EXPECT_EQ(report.model.cpu.fixed_seconds, 0);
  EXPECT_EQ(report.model.cpu.copy_bytes_per_second, 0);
  ASSERT_EQ(report.model.devices.size(), devices.size());
  for (const DeviceRates& rates : report.model.devices) EXPECT_FALSE(rates.Complete());
  EXPECT_THAT(report.problems,
              ::testing::ElementsAre(HasSubstr("budget ended before every figure")));
  const RequestFootprint huge{.inputs = {{4096, kOnHost}},
                              .copy_bytes = int64_t{1} << 30,
                              .scatter_bytes = 0,
                              .output_bytes = int64_t{1} << 30};
  EXPECT_EQ(ChooseBackend(report.model, huge, {}), kCpuBackend);
  EXPECT_THAT(DescribeCalibration(report, {}), HasSubstr("not measured"));
  EXPECT_THAT(DescribeCalibration(report, {}), HasSubstr("(incomplete)"));
}

TEST(CalibrationTest, AStopRequestEndsIt) {
  auto devices = OpenDevices();
  std::stop_source stop;
  stop.request_stop();
  const CalibrationReport report =
      Calibrate(Pointers(devices), {.worker_threads = 1, .budget_seconds = 2}, stop.get_token());
  EXPECT_EQ(report.measuring_seconds, 0);
  EXPECT_FALSE(report.complete);
  EXPECT_THAT(report.problems, ::testing::Contains(HasSubstr("stopped before the end")));
}

TEST(CalibrationTest, WithoutDevicesTheCpuAloneIsMeasured) {
  const CalibrationReport report = Calibrate({}, {.worker_threads = 1, .budget_seconds = 1});
  EXPECT_TRUE(report.complete) << ::testing::PrintToString(report.problems);
  EXPECT_TRUE(report.model.CpuComplete());
  EXPECT_TRUE(report.model.devices.empty());
}

// --- AUTO in the scheduler, by a given model -------------------------------

// A uint8 slice of 64 KiB reversed, checkable by value.
struct Job {
  std::vector<std::byte> input = std::vector<std::byte>(1 << 16);
  ExecutionPlan plan;
  std::vector<std::byte> output = std::vector<std::byte>(1 << 16);
  Job() {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i * 7);
    plan = *PlanOperator({SliceAttrs{{0}, {1 << 16}, {-1}},
                          {{"input", {TensorDesc{DType::kUint8, {1 << 16}, {}}, input}}},
                          {{{1 << 16}, {}}}},
                         {});
  }
  absl::Status RunOn(Scheduler& scheduler, Placement& placement) {
    const std::span<const std::byte> inputs[] = {input};
    std::byte* outputs[] = {output.data()};
    return scheduler.Execute(placement, plan, inputs, outputs, NeverStop);
  }
  bool Reversed() const {
    for (size_t i = 0; i < input.size(); ++i) {
      if (output[i] != input[input.size() - 1 - i]) return false;
    }
    return true;
  }
};

// Rates that make device 0 win every request, or lose every one.
CostModel DeviceWins(size_t devices) {
  CostModel model;
  model.cpu = {
      .workers = 1, .fixed_seconds = 1, .copy_bytes_per_second = 1, .scatter_bytes_per_second = 1};
  model.devices.assign(devices, DeviceRates{.fixed_seconds = 1e-9,
                                            .upload_bytes_per_second = 1e15,
                                            .download_bytes_per_second = 1e15,
                                            .copy_bytes_per_second = 1e15,
                                            .scatter_bytes_per_second = 1e15});
  return model;
}

CostModel CpuWins(size_t devices) {
  CostModel model = DeviceWins(devices);
  model.cpu = {.workers = 1,
               .fixed_seconds = 1e-9,
               .copy_bytes_per_second = 1e15,
               .scatter_bytes_per_second = 1e15};
  for (DeviceRates& rates : model.devices) rates.fixed_seconds = 1;
  return model;
}

TEST(SchedulerCostModelTest, UntilAModelIsSetAutoRunsOnTheCpu) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  EXPECT_EQ(scheduler.cost_model(), nullptr);
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::AUTO, std::nullopt));
  EXPECT_EQ(placement.device, Device::kAuto);
  Job job;
  EXPECT_FALSE(scheduler.MayRunOnDevice(placement, job.plan));
  // A model set after the request was placed does not move it.
  scheduler.SetCostModel(DeviceWins(pool->size()));
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "cpu");
  EXPECT_TRUE(job.Reversed());
}

TEST(SchedulerCostModelTest, AutoRunsWhereTheModelPredictsLeastTime) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  ASSERT_GT(pool->size(), 0u);
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  scheduler.SetCostModel(DeviceWins(pool->size()));
  ASSERT_OK_AND_ASSIGN(Placement on_device, scheduler.Place(v1::AUTO, std::nullopt));
  Job job;
  EXPECT_TRUE(scheduler.MayRunOnDevice(on_device, job.plan));
  ASSERT_OK(job.RunOn(scheduler, on_device));
  EXPECT_EQ(on_device.label, "opencl:" + pool->Name(0));
  EXPECT_TRUE(job.Reversed());
  EXPECT_EQ(pool->in_flight(0), 0);

  scheduler.SetCostModel(CpuWins(pool->size()));
  ASSERT_OK_AND_ASSIGN(Placement on_cpu, scheduler.Place(v1::AUTO, std::nullopt));
  Job second;
  EXPECT_FALSE(scheduler.MayRunOnDevice(on_cpu, second.plan));
  ASSERT_OK(second.RunOn(scheduler, on_cpu));
  EXPECT_EQ(on_cpu.label, "cpu");
  EXPECT_TRUE(second.Reversed());
}

TEST(SchedulerCostModelTest, AutoNeverWaitsForAFullDevice) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  ASSERT_GT(pool->size(), 0u);
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  scheduler.SetCostModel(DeviceWins(pool->size()));
  // Every device's one slot is taken.
  for (size_t i = 0; i < pool->size(); ++i) ASSERT_OK(pool->Acquire(static_cast<int>(i)).status());
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::AUTO, std::nullopt));
  Job job;
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "cpu");
  EXPECT_TRUE(job.Reversed());
  for (size_t i = 0; i < pool->size(); ++i) {
    EXPECT_EQ(pool->in_flight(static_cast<int>(i)), 1);
    pool->Release(static_cast<int>(i));
  }
}

TEST(SchedulerCostModelTest, TheThresholdReplacesTheModel) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  Job job;
  Scheduler scheduler({.worker_threads = 1,
                       .devices = pool.get(),
                       .auto_opencl_min_bytes = job.plan.bytes_moved + 1});
  scheduler.SetCostModel(DeviceWins(pool->size()));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::AUTO, std::nullopt));
  EXPECT_EQ(placement.cost_model, nullptr);
  EXPECT_FALSE(scheduler.MayRunOnDevice(placement, job.plan));
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "cpu");
  // The model is still there for the figures (/metrics).
  EXPECT_NE(scheduler.cost_model(), nullptr);
}

}  // namespace
}  // namespace tensorop::server
