#include "server/scheduler.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

TEST(SchedulerTest, AutoAndCpuRunOnTheCpu) {
  Scheduler scheduler({.worker_threads = 1});
  for (v1::Backend backend : {v1::AUTO, v1::CPU}) {
    absl::StatusOr<Placement> placement = scheduler.Place(backend);
    ASSERT_TRUE(placement.ok()) << placement.status();
    EXPECT_EQ(placement->device, Device::kCpu);
    EXPECT_EQ(placement->label, "cpu");
  }
}

TEST(SchedulerTest, OpenClIsUnavailableWithoutDevices) {
  Scheduler scheduler({.worker_threads = 1});
  EXPECT_THAT(scheduler.Place(v1::OPENCL),
              StatusIs(absl::StatusCode::kUnavailable,
                       "backend OPENCL: no OpenCL device is enabled on this server"));
}

TEST(SchedulerTest, AutoFollowsTheServerDefault) {
  Scheduler scheduler({.worker_threads = 1, .default_backend = v1::OPENCL});
  EXPECT_THAT(scheduler.Place(v1::AUTO),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("backend OPENCL")));
  absl::StatusOr<Placement> cpu = scheduler.Place(v1::CPU);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->label, "cpu");
}

TEST(SchedulerTest, ValueOutsideTheEnumIsInvalid) {
  Scheduler scheduler({.worker_threads = 1});
  EXPECT_THAT(scheduler.Place(7),
              StatusIs(absl::StatusCode::kInvalidArgument, "backend: 7 is not a backend"));
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

TEST(SchedulerTest, OpenClPlacementIsNotQueued) {
  Scheduler scheduler({.worker_threads = 1});
  Placement opencl{.device = Device::kOpenCl, .label = "opencl:none"};
  EXPECT_THAT(scheduler.Submit(opencl, [] {}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no OpenCL device")));
  EXPECT_EQ(scheduler.in_flight(), 0);
}

}  // namespace
}  // namespace tensorop::server
