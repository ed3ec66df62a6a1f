// The placement room's series (AddServerSeries): the CPU queue and each
// OpenCL device's queue, failures, waiters and wait histogram, as /metrics
// shows them.
#include "server/placement/placement_series.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/placement/device_pool.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/metrics.h"
#include "tests/server/placement/open_pool.h"
#include "tests/support/gate.h"
#include "tests/support/text_lines.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::Gate;
using ::tensorop::testing::LinesStartingWith;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ServerSeriesTest, CpuQueueDepthFollowsTheScheduler) {
  DevicePool no_devices({}, {});
  Scheduler scheduler({.worker_threads = 1});
  Metrics metrics;
  AddServerSeries(metrics, scheduler, no_devices);
  EXPECT_THAT(LinesStartingWith(metrics.Exposition(), "tensorop_queue_depth"),
              ElementsAre("tensorop_queue_depth{backend=\"cpu\"} 0"));
  EXPECT_THAT(LinesStartingWith(metrics.Exposition(), "tensorop_device_failures_total"), IsEmpty());

  // Both tasks wait at the gate: TBB's enqueue is not FIFO, so an ungated
  // second task could run (and leave the count) before the gated first one.
  Gate gate;
  ASSERT_TRUE(scheduler.Submit(Placement{}, [&gate] { gate.Wait(); }).ok());
  ASSERT_TRUE(scheduler.Submit(Placement{}, [&gate] { gate.Wait(); }).ok());
  EXPECT_THAT(LinesStartingWith(metrics.Exposition(), "tensorop_queue_depth"),
              ElementsAre("tensorop_queue_depth{backend=\"cpu\"} 2"));
  gate.Open();
  scheduler.Wait();
  EXPECT_THAT(LinesStartingWith(metrics.Exposition(), "tensorop_queue_depth"),
              ElementsAre("tensorop_queue_depth{backend=\"cpu\"} 0"));
}

TEST(ServerSeriesTest, EachDeviceHasItsQueueDepthAndFailures) {
  auto opened = OpenDevices();
  ASSERT_FALSE(opened.empty());
  DevicePool devices(std::move(opened), {});
  Scheduler scheduler({.worker_threads = 1, .devices = &devices});
  Metrics metrics;
  AddServerSeries(metrics, scheduler, devices);

  absl::StatusOr<int> slot = devices.Acquire(0);
  ASSERT_TRUE(slot.ok()) << slot.status();
  devices.MarkFailed(0);
  devices.MarkFailed(0);
  const std::string text = metrics.Exposition();
  const std::string name = EscapeLabelValue(devices.Name(0));
  std::vector<std::string> depth_lines = LinesStartingWith(text, "tensorop_queue_depth");
  ASSERT_EQ(depth_lines.size(), devices.size() + 1);
  EXPECT_EQ(depth_lines[0], "tensorop_queue_depth{backend=\"cpu\"} 0");
  EXPECT_EQ(depth_lines[1],
            "tensorop_queue_depth{backend=\"opencl\",device=\"" + name + "\",index=\"0\"} 1");
  std::vector<std::string> failure_lines =
      LinesStartingWith(text, "tensorop_device_failures_total{");
  ASSERT_EQ(failure_lines.size(), devices.size());
  EXPECT_EQ(failure_lines[0],
            "tensorop_device_failures_total{device=\"" + name + "\",index=\"0\"} 2");
  devices.Release(0);
  EXPECT_EQ(LinesStartingWith(metrics.Exposition(), "tensorop_queue_depth")[1],
            "tensorop_queue_depth{backend=\"opencl\",device=\"" + name + "\",index=\"0\"} 0");
}

TEST(ServerSeriesTest, EachDeviceHasItsWaitingRequestsAndWaitHistogram) {
  auto opened = OpenDevices();
  ASSERT_FALSE(opened.empty());
  DevicePool devices(std::move(opened), {.queue_depth = 1});
  Scheduler scheduler({.worker_threads = 1, .devices = &devices});
  Metrics metrics;
  AddServerSeries(metrics, scheduler, devices);
  const std::string name = EscapeLabelValue(devices.Name(0));
  const std::string labels = "device=\"" + name + "\",index=\"0\"";

  absl::StatusOr<int> slot = devices.Acquire(0);
  ASSERT_TRUE(slot.ok()) << slot.status();
  absl::StatusOr<int> granted = absl::UnknownError("not yet");
  devices.Wait(0, NeverStop, [&granted](absl::StatusOr<int> result) { granted = result; });
  std::string text = metrics.Exposition();
  EXPECT_THAT(
      text, ::testing::HasSubstr("# TYPE tensorop_opencl_waiting gauge\ntensorop_opencl_waiting{" +
                                 labels + "} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE tensorop_opencl_wait_seconds histogram\n"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_opencl_wait_seconds_count{" + labels),
              ElementsAre("tensorop_opencl_wait_seconds_count{" + labels + "} 0"));

  devices.Release(0);  // the waiter takes the slot
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(*granted, 0);
  text = metrics.Exposition();
  EXPECT_THAT(LinesStartingWith(text, "tensorop_opencl_waiting{" + labels),
              ElementsAre("tensorop_opencl_waiting{" + labels + "} 0"));
  // One wait counted, in some bucket (its length is the machine's); +Inf has it.
  EXPECT_THAT(LinesStartingWith(text, "tensorop_opencl_wait_seconds_count{" + labels),
              ElementsAre("tensorop_opencl_wait_seconds_count{" + labels + "} 1"));
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_opencl_wait_seconds_bucket{" + labels + ",le=\"+Inf\"}"),
      ElementsAre("tensorop_opencl_wait_seconds_bucket{" + labels + ",le=\"+Inf\"} 1"));
  EXPECT_THAT(LinesStartingWith(text, "tensorop_opencl_wait_seconds_bucket{" + labels),
              ::testing::SizeIs(std::size(kWaitBucketsUs) + 1));
  EXPECT_THAT(
      LinesStartingWith(text, "tensorop_opencl_wait_seconds_bucket{" + labels)[0],
      ::testing::StartsWith("tensorop_opencl_wait_seconds_bucket{" + labels + ",le=\"0.0001\"} "));
  devices.Release(0);
}

}  // namespace
}  // namespace tensorop::server
