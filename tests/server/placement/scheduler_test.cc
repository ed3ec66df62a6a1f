#include "server/placement/scheduler.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <oneapi/tbb/task_arena.h>

#include "core/operator.h"
#include "core/tsan_annotations.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "server/placement/device_pool.h"
#include "tests/server/placement/open_pool.h"
#include "tests/support/eventually.h"
#include "tests/support/gate.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::Eventually;

using ::tensorop::testing::Gate;

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

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

TEST(SchedulerTest, RunHereRunsOnTheCallingThreadCountedInFlight) {
  Scheduler scheduler({.worker_threads = 1, .max_queued_requests = 2});
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  int in_flight_inside = -1;
  ASSERT_TRUE(scheduler
                  .RunHere([&] {
                    ran_on = std::this_thread::get_id();
                    in_flight_inside = scheduler.in_flight();
                  })
                  .ok());
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(in_flight_inside, 1);
  EXPECT_EQ(scheduler.in_flight(), 0);
  // Past the queue bound it is refused like a queued task, and does not run.
  Gate gate;
  const Placement cpu;
  ASSERT_TRUE(scheduler.Submit(cpu, [&] { gate.Wait(); }).ok());
  ASSERT_TRUE(scheduler.Submit(cpu, [&] { gate.Wait(); }).ok());
  bool ran = false;
  EXPECT_THAT(scheduler.RunHere([&] { ran = true; }),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_queued_requests")));
  EXPECT_FALSE(ran);
  gate.Open();
  scheduler.Wait();
  EXPECT_EQ(scheduler.in_flight(), 0);
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

// Submits `task` as a CPU request (a sleeping thread), or with no placement
// (a oneTBB task).
using SubmitFn = absl::Status (*)(Scheduler&, std::function<void()>);
constexpr SubmitFn kSubmitCpu = [](Scheduler& scheduler, std::function<void()> task) {
  return scheduler.Submit(Placement{}, std::move(task));
};
constexpr SubmitFn kSubmitUnplaced = [](Scheduler& scheduler, std::function<void()> task) {
  return scheduler.Submit(std::move(task));
};

TEST(SchedulerTest, TasksRunOnMoreWorkersThanTheHardwareHas) {
  // Four tasks that each wait for all four to have started: only completes if
  // four workers run at once, whatever the machine's core count.
  constexpr int kThreads = 4;
  for (SubmitFn submit : {kSubmitCpu, kSubmitUnplaced}) {
    Scheduler scheduler({.worker_threads = kThreads});
    std::mutex mu;
    std::condition_variable cv;
    int started = 0;
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_TRUE(submit(scheduler, [&] {
                    std::unique_lock<std::mutex> lock(mu);
                    ++started;
                    cv.notify_all();
                    cv.wait(lock, [&] { return started == kThreads; });
                  }).ok());
    }
    scheduler.Wait();
    EXPECT_EQ(started, kThreads);
  }
}

// Where a task ran: on a oneTBB worker (its arena slot), or on none.
int ArenaSlotOfTask(SubmitFn submit, Scheduler& scheduler) {
  std::promise<int> slot;
  EXPECT_TRUE(submit(scheduler, [&] {
                slot.set_value(tbb::this_task_arena::current_thread_index());
              }).ok());
  return slot.get_future().get();
}

TEST(SchedulerTest, CpuAndAutoRequestsRunOutsideOneTbbAndTheRestOnItsWorkers) {
  Scheduler scheduler({.worker_threads = 2});
  const SubmitFn submit_auto = [](Scheduler& scheduler, std::function<void()> task) {
    return scheduler.Submit(Placement{.device = Device::kAuto}, std::move(task));
  };
  const SubmitFn submit_opencl = [](Scheduler& scheduler, std::function<void()> task) {
    return scheduler.Submit(Placement{.device = Device::kOpenCl}, std::move(task));
  };
  const int outside_one_tbb = tbb::task_arena::not_initialized;
  EXPECT_EQ(ArenaSlotOfTask(kSubmitCpu, scheduler), outside_one_tbb);
  EXPECT_EQ(ArenaSlotOfTask(submit_auto, scheduler), outside_one_tbb);
  EXPECT_GE(ArenaSlotOfTask(kSubmitUnplaced, scheduler), 0);
  EXPECT_GE(ArenaSlotOfTask(submit_opencl, scheduler), 0);
}

TEST(SchedulerTest, WaitSeesTasksThatTasksOfTheOtherKindSubmitted) {
  Scheduler scheduler({.worker_threads = 1});
  std::atomic<int> ran{0};
  ASSERT_TRUE(scheduler
                  .Submit([&] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    EXPECT_TRUE(scheduler
                                    .Submit(Placement{},
                                            [&] {
                                              std::this_thread::sleep_for(
                                                  std::chrono::milliseconds(20));
                                              ++ran;
                                            })
                                    .ok());
                    ++ran;
                  })
                  .ok());
  scheduler.Wait();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(scheduler.in_flight(), 0);
}

// --- With the real OpenCL devices (PoCL here) ------------------------------

// A uint8 slice of 64 KiB reversed: big enough to matter, checkable by value.
struct SliceJob {
  std::vector<std::byte> input;
  OpRequest request;
  ExecutionPlan plan;
  std::vector<std::byte> output;

  explicit SliceJob(int64_t bytes = 1 << 16) : input(static_cast<size_t>(bytes)) {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::byte>(i * 7 + i / 253);
    request = {SliceAttrs{{0}, {bytes}, {-1}},
               {{"input", {TensorDesc{DType::kUint8, {bytes}, {}}, input}}},
               {{{bytes}, {}}}};
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

TEST(SchedulerTest, CpuWorkOnBothSidesOfTheSerialBoundIsExactFromASleepingThread) {
  // Small work runs on the sleeping thread itself; larger work runs its
  // parallel loops as a task of the arena while that thread waits. One
  // worker, so that TSan (which cannot follow oneTBB's own steals) checks the
  // hand-off there and back.
  Scheduler scheduler({.worker_threads = 1});
  for (int64_t bytes : {int64_t{1} << 16, int64_t{4} << 20}) {
    SliceJob job(bytes);
    Placement placement;
    std::promise<absl::Status> outcome;
    ASSERT_TRUE(
        scheduler.Submit(placement, [&] { outcome.set_value(job.RunOn(scheduler, placement)); })
            .ok());
    EXPECT_TRUE(outcome.get_future().get().ok());
    EXPECT_EQ(placement.label, "cpu");
    EXPECT_TRUE(job.Reversed()) << bytes << " bytes";
  }
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
  Scheduler at_threshold(
      {.worker_threads = 1, .devices = pool.get(), .auto_opencl_min_bytes = job.plan.bytes_moved});
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

// --- OPENCL requests that find their device busy ---------------------------

// Submits `job` as an OPENCL request for device 0 and returns its outcome.
std::future<absl::Status> SubmitOpenCl(Scheduler& scheduler, SliceJob& job, Placement& placement,
                                       StopCheck stop = NeverStop) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> outcome = promise->get_future();
  absl::Status submitted =
      scheduler.Submit(placement, [&job, &placement, promise, &scheduler, stop = std::move(stop)] {
        const std::span<const std::byte> inputs[] = {job.input};
        std::byte* outputs[] = {job.output.data()};
        promise->set_value(scheduler.Execute(placement, job.plan, inputs, outputs, stop));
      });
  if (!submitted.ok()) promise->set_value(submitted);
  return outcome;
}

TEST(SchedulerDeviceTest, BusyDeviceIsWaitedForWithoutHoldingAWorker) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  // One worker: the CPU task below runs only if the waiting request let go of it.
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));  // the test holds the only slot
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  std::future<absl::Status> waiting = SubmitOpenCl(scheduler, job, placement);
  ASSERT_TRUE(Eventually([&] { return pool->waiting(0) == 1; }));

  // A task that may wait for a device itself: one of oneTBB's.
  std::promise<void> cpu_ran;
  std::shared_future<void> cpu_done = cpu_ran.get_future().share();
  ASSERT_TRUE(scheduler.Submit([&] { cpu_ran.set_value(); }).ok());
  if (Scheduler::SuspendsWaitingTasks()) {
    cpu_done.get();
    EXPECT_EQ(pool->waiting(0), 1);  // still waiting: the slot is held
    // The CPU task counts itself out just after it ran; the waiter stays counted.
    EXPECT_TRUE(Eventually([&] { return scheduler.in_flight() == 1; }));
  } else {
    // A sanitizer build: the waiter holds the only worker, so the CPU task
    // cannot have started; it runs once the slot is handed over.
    EXPECT_EQ(cpu_done.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
    EXPECT_EQ(scheduler.in_flight(), 2);
  }

  pool->Release(held);  // handed to the waiter, which runs on the device
  ASSERT_OK(waiting.get());
  cpu_done.wait();
  EXPECT_EQ(placement.label, "opencl:" + pool->Name(0));
  EXPECT_TRUE(job.Reversed());
  scheduler.Wait();
  EXPECT_EQ(pool->in_flight(0), 0);
  EXPECT_EQ(pool->waiting(0), 0);
  EXPECT_EQ(pool->wait_histogram(0).buckets.size(), std::size(kWaitBucketsUs) + 1);
}

TEST(SchedulerDeviceTest, CpuRequestsRunWhileTheOnlyOneTbbWorkerWaitsForADevice) {
  // In every build, sanitizers' included: CPU requests never queue behind a
  // task waiting for a device slot.
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob waiting_job;
  std::future<absl::Status> waiting = SubmitOpenCl(scheduler, waiting_job, placement);
  ASSERT_TRUE(Eventually([&] { return pool->waiting(0) == 1; }));

  ASSERT_OK_AND_ASSIGN(Placement cpu, scheduler.Place(v1::CPU, std::nullopt));
  SliceJob cpu_job;
  std::promise<absl::Status> cpu_outcome;
  ASSERT_TRUE(
      scheduler.Submit(cpu, [&] { cpu_outcome.set_value(cpu_job.RunOn(scheduler, cpu)); }).ok());
  ASSERT_OK(cpu_outcome.get_future().get());
  EXPECT_TRUE(cpu_job.Reversed());
  EXPECT_EQ(pool->waiting(0), 1);  // the OPENCL request still waits

  pool->Release(held);
  ASSERT_OK(waiting.get());
  EXPECT_TRUE(waiting_job.Reversed());
  scheduler.Wait();
}

TEST(SchedulerDeviceTest, WaitPastTheMaxWaitIsDeadlineExceeded) {
  std::unique_ptr<DevicePool> pool =
      OpenPool({.queue_depth = 1, .max_wait = std::chrono::milliseconds(20)});
  Scheduler scheduler({.worker_threads = 2, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  std::future<absl::Status> late = SubmitOpenCl(scheduler, job, placement);
  EXPECT_THAT(late.get(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("waited 0.02 s for a slot on OpenCL device 0 (" + pool->Name(0) +
                                 "): its 1 slots (--opencl_queue_depth) stayed "
                                 "busy for the longest wait allowed "
                                 "(--opencl_max_wait_seconds=0.02)")));
  EXPECT_EQ(pool->in_flight(0), 1);  // the test's slot, untouched
  EXPECT_EQ(pool->waiting(0), 0);
  const WaitHistogram waits = pool->wait_histogram(0);
  uint64_t count = 0;
  for (uint64_t bucket : waits.buckets) count += bucket;
  EXPECT_EQ(count, 1u);
  EXPECT_GE(waits.sum_us, 20'000u);
  pool->Release(held);
  scheduler.Wait();
}

TEST(SchedulerDeviceTest, CancelledWaiterEndsWithItsStatus) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  SliceJob job;
  std::future<absl::Status> outcome =
      SubmitOpenCl(scheduler, job, placement, [cancelled]() -> absl::Status {
        if (cancelled->load()) return absl::CancelledError("the client cancelled the call");
        return absl::OkStatus();
      });
  ASSERT_TRUE(Eventually([&] { return pool->waiting(0) == 1; }));
  *cancelled = true;
  EXPECT_THAT(outcome.get(),
              StatusIs(absl::StatusCode::kCancelled,
                       "the client cancelled the call (while waiting for a slot on OpenCL "
                       "device 0 (" +
                           pool->Name(0) + "))"));
  EXPECT_EQ(pool->waiting(0), 0);
  pool->Release(held);
  scheduler.Wait();
  EXPECT_EQ(pool->in_flight(0), 0);
}

TEST(SchedulerDeviceTest, ServerShutdownEndsTheWaitsCancelled) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  std::future<absl::Status> outcome = SubmitOpenCl(scheduler, job, placement);
  ASSERT_TRUE(Eventually([&] { return pool->waiting(0) == 1; }));
  pool->CancelWaiters(absl::CancelledError("the server is shutting down"));
  EXPECT_THAT(outcome.get(), StatusIs(absl::StatusCode::kCancelled, "the server is shutting down"));
  pool->Release(held);
  scheduler.Wait();
}

TEST(SchedulerDeviceTest, MoreOpenClRequestsThanTheQueueDepthAllRunOnTheDevice) {
  constexpr int kRequests = 24;
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 4, .devices = pool.get()});
  std::vector<std::unique_ptr<SliceJob>> jobs;
  std::vector<Placement> placements(kRequests);
  std::vector<std::future<absl::Status>> outcomes;
  for (int i = 0; i < kRequests; ++i) {
    jobs.push_back(std::make_unique<SliceJob>());
    ASSERT_OK_AND_ASSIGN(placements[i], scheduler.Place(v1::OPENCL, std::nullopt));
    outcomes.push_back(SubmitOpenCl(scheduler, *jobs[i], placements[i]));
  }
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_OK(outcomes[i].get());
    EXPECT_EQ(placements[i].label, "opencl:" + pool->Name(0)) << i;
    EXPECT_TRUE(jobs[i]->Reversed()) << i;
  }
  scheduler.Wait();
  EXPECT_EQ(pool->in_flight(0), 0);
  EXPECT_EQ(pool->waiting(0), 0);
}

TEST(SchedulerDeviceTest, AutoDoesNotWaitForABusyDevice) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  SliceJob job;
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get(), .auto_opencl_min_bytes = 0});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::AUTO, std::nullopt));
  ASSERT_OK(job.RunOn(scheduler, placement));
  EXPECT_EQ(placement.label, "cpu");
  EXPECT_TRUE(job.Reversed());
  EXPECT_EQ(pool->waiting(0), 0);
  pool->Release(held);
}

TEST(SchedulerDeviceTest, CallerOutsideATaskWaitsOnItsOwnThread) {
  std::unique_ptr<DevicePool> pool = OpenPool({.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = pool.get()});
  ASSERT_OK_AND_ASSIGN(int held, pool->Acquire(0));
  std::thread releaser([&] {
    EXPECT_TRUE(Eventually([&] { return pool->waiting(0) == 1; }));
    pool->Release(held);
  });
  ASSERT_OK_AND_ASSIGN(Placement placement, scheduler.Place(v1::OPENCL, 0));
  SliceJob job;
  ASSERT_OK(job.RunOn(scheduler, placement));  // Execute from this (non-worker) thread
  releaser.join();
  EXPECT_EQ(placement.label, "opencl:" + pool->Name(0));
  EXPECT_TRUE(job.Reversed());
  EXPECT_EQ(pool->in_flight(0), 0);
}

}  // namespace
}  // namespace tensorop::server
