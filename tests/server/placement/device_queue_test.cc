// The FIFO of requests waiting for a busy device's slot: order, hand-off,
// expiry and cancellation, with the clock passed in (no sleeping, no timing).
#include "server/placement/device_queue.h"

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using std::chrono::milliseconds;
using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using Clock = DeviceQueue::Clock;

constexpr milliseconds kMaxWait{50};

// Records what each named waiter was told, in the order it was told.
struct Outcomes {
  std::vector<std::string> order;
  std::vector<absl::Status> statuses;

  DeviceQueue::Granted For(std::string name) {
    return [this, name](absl::Status status) {
      order.push_back(name);
      statuses.push_back(std::move(status));
    };
  }
};

TEST(DeviceQueueTest, FreeSlotsAreTakenAtOnceThenRequestsWait) {
  DeviceQueue queue(2, "OpenCL device 0 (test-device)", kMaxWait);
  EXPECT_TRUE(queue.TryAcquire());
  Outcomes outcomes;
  queue.Wait(NeverStop, outcomes.For("second"));  // a free slot: granted on this thread
  EXPECT_THAT(outcomes.order, ElementsAre("second"));
  EXPECT_TRUE(outcomes.statuses[0].ok()) << outcomes.statuses[0];
  EXPECT_EQ(queue.in_flight(), 2);
  EXPECT_FALSE(queue.TryAcquire());
  queue.Wait(NeverStop, outcomes.For("third"));
  EXPECT_THAT(outcomes.order, ElementsAre("second"));
  EXPECT_EQ(queue.waiting(), 1);
  EXPECT_EQ(queue.in_flight(), 2);
  queue.CancelAll(absl::UnavailableError("test over"));
}

TEST(DeviceQueueTest, FreedSlotsGoToWaitersInArrivalOrder) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", kMaxWait);
  ASSERT_TRUE(queue.TryAcquire());
  Outcomes outcomes;
  for (const std::string name : {"a", "b", "c"}) queue.Wait(NeverStop, outcomes.For(name));
  EXPECT_EQ(queue.waiting(), 3);
  EXPECT_THAT(outcomes.order, IsEmpty());

  queue.Release();  // the slot passes to "a": it stays taken
  EXPECT_THAT(outcomes.order, ElementsAre("a"));
  EXPECT_EQ(queue.in_flight(), 1);
  EXPECT_EQ(queue.waiting(), 2);
  // Waiters keep their turn: a newcomer does not take the slot ahead of them.
  EXPECT_FALSE(queue.TryAcquire());

  queue.Release();
  queue.Release();
  EXPECT_THAT(outcomes.order, ElementsAre("a", "b", "c"));
  for (const absl::Status& status : outcomes.statuses) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(queue.in_flight(), 1);
  EXPECT_EQ(queue.waiting(), 0);
  queue.Release();
  EXPECT_EQ(queue.in_flight(), 0);
  EXPECT_TRUE(queue.TryAcquire());
}

TEST(DeviceQueueTest, WaitEndsDeadlineExceededAtTheMaxWait) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", kMaxWait);
  ASSERT_TRUE(queue.TryAcquire());
  const Clock::time_point start = Clock::now();
  Outcomes outcomes;
  queue.Wait(NeverStop, outcomes.For("late"), start);

  // One millisecond before the limit it still waits; the sweep says when next.
  EXPECT_EQ(queue.Sweep(start + kMaxWait - milliseconds(1)), start + kMaxWait);
  EXPECT_THAT(outcomes.order, IsEmpty());

  EXPECT_EQ(queue.Sweep(start + kMaxWait), std::nullopt);
  ASSERT_THAT(outcomes.order, ElementsAre("late"));
  EXPECT_THAT(outcomes.statuses[0],
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("waited 0.05 s for a slot on OpenCL device 0 (test-device)"),
                             HasSubstr("its 1 slots (--opencl_queue_depth)"),
                             HasSubstr("(--opencl_max_wait_seconds=0.05)"))));
  EXPECT_EQ(queue.waiting(), 0);
  EXPECT_EQ(queue.in_flight(), 1);  // still the holder's

  // The wait is in the histogram: 50 ms falls in the (10 ms, 100 ms] bucket.
  const WaitHistogram waits = queue.wait_histogram();
  ASSERT_EQ(waits.buckets.size(), std::size(kWaitBucketsUs) + 1);
  EXPECT_EQ(waits.buckets[3], 1u);
  EXPECT_EQ(waits.sum_us, 50'000u);
  queue.Release();
  EXPECT_EQ(queue.in_flight(), 0);
}

TEST(DeviceQueueTest, ZeroMaxWaitRefusesABusyDeviceAtOnce) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", milliseconds(0));
  ASSERT_TRUE(queue.TryAcquire());
  Outcomes outcomes;
  queue.Wait(NeverStop, outcomes.For("impatient"));
  ASSERT_THAT(outcomes.order, ElementsAre("impatient"));
  EXPECT_THAT(outcomes.statuses[0], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                             HasSubstr("--opencl_max_wait_seconds=0")));
  EXPECT_EQ(queue.waiting(), 0);
}

TEST(DeviceQueueTest, StoppedWaiterLeavesAndTheNextGetsTheSlot) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", kMaxWait);
  ASSERT_TRUE(queue.TryAcquire());
  std::atomic<bool> cancelled{false};
  const StopCheck stop = [&cancelled]() -> absl::Status {
    if (cancelled.load()) return absl::CancelledError("the client cancelled the call");
    return absl::OkStatus();
  };
  const Clock::time_point start = Clock::now();
  Outcomes outcomes;
  queue.Wait(stop, outcomes.For("cancelled"), start);
  queue.Wait(NeverStop, outcomes.For("patient"), start);

  queue.Sweep(start + milliseconds(1));
  EXPECT_THAT(outcomes.order, IsEmpty());
  cancelled = true;
  queue.Sweep(start + milliseconds(2));
  ASSERT_THAT(outcomes.order, ElementsAre("cancelled"));
  EXPECT_THAT(outcomes.statuses[0],
              StatusIs(absl::StatusCode::kCancelled,
                       "the client cancelled the call (while waiting for a slot on OpenCL "
                       "device 0 (test-device))"));
  EXPECT_EQ(queue.waiting(), 1);

  queue.Release();
  EXPECT_THAT(outcomes.order, ElementsAre("cancelled", "patient"));
  EXPECT_TRUE(outcomes.statuses[1].ok()) << outcomes.statuses[1];
  EXPECT_EQ(queue.in_flight(), 1);
  queue.Release();
}

TEST(DeviceQueueTest, ADeadlineSaidByTheStopCheckEndsTheWaitWithItsStatus) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", kMaxWait);
  ASSERT_TRUE(queue.TryAcquire());
  Outcomes outcomes;
  queue.Wait(
      [] {
        return absl::DeadlineExceededError(
            "deadline exceeded before the request "
            "finished");
      },
      outcomes.For("expired"));
  queue.Sweep();
  ASSERT_THAT(outcomes.order, ElementsAre("expired"));
  EXPECT_THAT(outcomes.statuses[0],
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("deadline exceeded before the request finished (while "
                                 "waiting for a slot on OpenCL device 0 (test-device))")));
  queue.Release();
}

TEST(DeviceQueueTest, CancelAllEndsEveryWaitAndKeepsTheHeldSlots) {
  DeviceQueue queue(1, "OpenCL device 0 (test-device)", kMaxWait);
  ASSERT_TRUE(queue.TryAcquire());
  Outcomes outcomes;
  queue.Wait(NeverStop, outcomes.For("a"));
  queue.Wait(NeverStop, outcomes.For("b"));
  queue.CancelAll(absl::CancelledError("the server is shutting down"));
  EXPECT_THAT(outcomes.order, ElementsAre("a", "b"));
  for (const absl::Status& status : outcomes.statuses) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled, "the server is shutting down"));
  }
  EXPECT_EQ(queue.waiting(), 0);
  EXPECT_EQ(queue.Sweep(), std::nullopt);
  queue.Release();
  EXPECT_EQ(queue.in_flight(), 0);
}

}  // namespace
}  // namespace tensorop::server
