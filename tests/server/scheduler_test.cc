#include "server/scheduler.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/operator.h"
#include "kernels/opencl/device.h"
#include "server/device_pool.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

// Blocks tasks until opened, so a test controls how many are in flight.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    open_cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    open_cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable open_cv_;
  bool open_ = false;
};

TEST(SchedulerTest, AutoAndCpuRunOnTheCpuWithoutDevices) {
  Scheduler scheduler({.worker_threads = 1});
  for (v1::Backend backend : {v1::AUTO, v1::CPU}) {
    absl::StatusOr<Placement> placement = scheduler.Place(backend, std::nullopt);
    ASSERT_TRUE(placement.ok()) << placement.status();
    EXPECT_EQ(placement->device, Device::kCpu);
    EXPECT_EQ(placement->label, "cpu");
  }
}

TEST(SchedulerTest, OpenClWithoutDevicesIsFailedPrecondition) {
  Scheduler scheduler({.worker_threads = 1});
  EXPECT_THAT(scheduler.Place(v1::OPENCL, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "backend OPENCL: no OpenCL device is enabled on this server"));
}

TEST(SchedulerTest, AutoFollowsTheServerDefault) {
  Scheduler scheduler({.worker_threads = 1, .default_backend = v1::OPENCL});
  EXPECT_THAT(scheduler.Place(v1::AUTO, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("backend OPENCL")));
  absl::StatusOr<Placement> cpu = scheduler.Place(v1::CPU, std::nullopt);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->label, "cpu");
}

TEST(SchedulerTest, ValueOutsideTheEnumIsInvalid) {
  Scheduler scheduler({.worker_threads = 1});
  EXPECT_THAT(scheduler.Place(7, std::nullopt),
              StatusIs(absl::StatusCode::kInvalidArgument, "backend: 7 is not a backend"));
}

TEST(SchedulerTest, DeviceIndexNeedsBackendOpenCl) {
  Scheduler scheduler({.worker_threads = 1});
  EXPECT_THAT(scheduler.Place(v1::CPU, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "device_index = 0 needs backend OPENCL, not CPU"));
}

TEST(SchedulerTest, SubmitPastTheQueueBoundIsRefusedAtOnce) {
  Scheduler scheduler({.worker_threads = 1, .max_queued_requests = 2});
  Gate gate;
  std::atomic<int> ran{0};
  const Placement cpu;
  auto task = [&] {
    gate.Wait();
    ++ran;
  };
  ASSERT_TRUE(scheduler.Submit(cpu, task).ok());
  ASSERT_TRUE(scheduler.Submit(cpu, task).ok());
  EXPECT_EQ(scheduler.in_flight(), 2);
  EXPECT_THAT(scheduler.Submit(cpu, task),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("2 requests are queued or running (--max_queued_requests)")));
  gate.Open();
  scheduler.Wait();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(scheduler.in_flight(), 0);
  // Room again once they finished.
  EXPECT_TRUE(scheduler.Submit(cpu, [&] { ++ran; }).ok());
  scheduler.Wait();
  EXPECT_EQ(ran.load(), 3);
}

TEST(SchedulerTest, WaitReturnsAfterEveryTaskRan) {
  Scheduler scheduler({.worker_threads = 2});
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(scheduler.Submit(Placement{}, [&] { ++ran; }).ok());
  }
  scheduler.Wait();
  EXPECT_EQ(ran.load(), 100);
}

TEST(SchedulerTest, TasksRunOnMoreWorkersThanTheHardwareHas) {
  // Four tasks that each wait for all four to have started: only completes if
  // four workers run at once, whatever the machine's core count.
  constexpr int kThreads = 4;
  Scheduler scheduler({.worker_threads = kThreads});
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(scheduler
                    .Submit(Placement{},
                            [&] {
                              std::unique_lock<std::mutex> lock(mu);
                              ++started;
                              cv.notify_all();
                              cv.wait(lock, [&] { return started == kThreads; });
                            })
                    .ok());
  }
  scheduler.Wait();
  EXPECT_EQ(started, kThreads);
}

// --- With the real OpenCL devices (PoCL here) ------------------------------

// A uint8 slice of 64 KiB reversed: big enough to matter, checkable by value.
struct SliceJob {
  std::vector<std::byte> input = std::vector<std::byte>(1 << 16);
  OpRequest request;
  ExecutionPlan plan;
  std::vector<std::byte> output;

  SliceJob() {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i * 7);
    request = {SliceAttrs{{0}, {1 << 16}, {-1}},
               {{"input", {TensorDesc{DType::kUint8, {1 << 16}, {}}, input}}},
               {{{1 << 16}, {}}}};
    plan = *PlanOperator(request, {});
    output.assign(input.size(), std::byte{0});
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

std::unique_ptr<DevicePool> OpenPool(const DevicePoolOptions& options) {
  std::vector<std::string> skipped;
  auto devices = opencl_backend::OpenAllDevices(&skipped);
  EXPECT_FALSE(devices.empty()) << "no OpenCL device: is pocl-opencl-icd installed?";
  return std::make_unique<DevicePool>(std::move(devices), options);
}

TEST(SchedulerDeviceTest, OpenClRunsOnTheDeviceAndSaysWhich) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  ASSERT_GT(pool->size(), 0u);
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "opencl:" + pool->Name(0));
  EXPECT_TRUE(job.Reversed());
  EXPECT_EQ(pool->failures(), 0);
}

TEST(SchedulerDeviceTest, DeviceIndexOutsideThePoolIsInvalid) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  EXPECT_THAT(scheduler.Place(v1::OPENCL, static_cast<int>(pool->size())),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is outside [0, " + std::to_string(pool->size()) + ")")));
}

TEST(SchedulerDeviceTest, FailedDeviceIsMarkedAndTheCpuAnswers) {
  std::unique_ptr<DevicePool> pool = OpenPool({.inject_failures = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "cpu");
  EXPECT_TRUE(job.Reversed());
  EXPECT_EQ(pool->failures(), 1);
  EXPECT_FALSE(pool->AnyHealthy());
  // While the device rests, OPENCL requests are answered by the CPU too.
  ASSERT_OK_AND_ASSIGN(Placement next, scheduler.Place(v1::OPENCL, std::nullopt));
  SliceJob again;
  ASSERT_OK(again.RunOn(scheduler, next));
  EXPECT_EQ(next.label, "cpu");
  EXPECT_TRUE(again.Reversed());
  EXPECT_EQ(pool->failures(), 1);
}

TEST(SchedulerDeviceTest, AutoSendsWorkAtTheThresholdToADevice) {
  std::unique_ptr<DevicePool> pool = OpenPool({});
  SliceJob job;
  Scheduler at_threshold({.worker_threads = 1,
                          .devices = pool.get(),
                          .auto_opencl_min_bytes = job.plan.bytes_moved});
  ASSERT_OK_AND_ASSIGN(Placement placement, at_threshold.Place(v1::AUTO, std::nullopt));
  EXPECT_EQ(placement.device, Device::kAuto);
  ASSERT_OK(job.RunOn(at_threshold, placement));
  EXPECT_EQ(placement.label, "opencl:" + pool->Name(0));
  EXPECT_TRUE(job.Reversed());

  Scheduler above({.worker_threads = 1,
                   .devices = pool.get(),
                   .auto_opencl_min_bytes = job.plan.bytes_moved + 1});
  ASSERT_OK_AND_ASSIGN(Placement small, above.Place(v1::AUTO, std::nullopt));
  SliceJob second;
  ASSERT_OK(second.RunOn(above, small));
  EXPECT_EQ(small.label, "cpu");
  EXPECT_TRUE(second.Reversed());
}

}  // namespace
}  // namespace tensorop::server
