// ResultProgress (server/pipeline/result_progress.h): a writer waits for bytes a worker
// has not computed yet and is resumed exactly once when they are; errors and
// a writer that gives up end the call only after the worker finished.
#include "server/pipeline/result_progress.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ResultProgressTest, AWriterWaitsForUnreadyBytesAndIsResumedOnce) {
  int resumed = 0;
  ResultProgress progress([&] { ++resumed; });
  ASSERT_OK_AND_ASSIGN(bool ready, progress.Await(0, 4));
  EXPECT_FALSE(ready);
  progress.Advance(0, 2);  // not enough, but the writer waited: it looks again
  EXPECT_EQ(resumed, 1);
  progress.Advance(0, 3);  // nobody waits now
  EXPECT_EQ(resumed, 1);
  ASSERT_OK_AND_ASSIGN(ready, progress.Await(0, 3));
  EXPECT_TRUE(ready);
  ASSERT_OK_AND_ASSIGN(ready, progress.Await(0, 4));
  EXPECT_FALSE(ready);
  progress.Advance(1, 0);  // output 0 is whole once output 1 began
  EXPECT_EQ(resumed, 2);
  ASSERT_OK_AND_ASSIGN(ready, progress.Await(0, 1000));
  EXPECT_TRUE(ready);
  ASSERT_OK_AND_ASSIGN(ready, progress.Await(1, 1));
  EXPECT_FALSE(ready);
}

TEST(ResultProgressTest, TheEndWaitsForFinishEvenWhenEveryByteIsReady) {
  int resumed = 0;
  ResultProgress progress([&] { ++resumed; });
  progress.Advance(0, 8);
  ASSERT_OK_AND_ASSIGN(bool ended, progress.AwaitEnd());
  EXPECT_FALSE(ended);
  EXPECT_FALSE(progress.ended());
  progress.Finish(absl::OkStatus());
  EXPECT_EQ(resumed, 1);
  EXPECT_TRUE(progress.ended());
  ASSERT_OK_AND_ASSIGN(ended, progress.AwaitEnd());
  EXPECT_TRUE(ended);
}

TEST(ResultProgressTest, TheWorksErrorIsTheWritersNextAnswer) {
  int resumed = 0;
  ResultProgress progress([&] { ++resumed; });
  ASSERT_OK_AND_ASSIGN(bool ready, progress.Await(0, 1));
  EXPECT_FALSE(ready);
  progress.Finish(absl::CancelledError("the client cancelled the call"));
  EXPECT_EQ(resumed, 1);
  EXPECT_THAT(progress.Await(0, 1),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled the call")));
  EXPECT_THAT(progress.AwaitEnd(), StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
}

TEST(ResultProgressTest, AWriterThatGivesUpWaitsForTheWorkerAndKeepsItsReason) {
  int resumed = 0;
  ResultProgress progress([&] { ++resumed; });
  EXPECT_FALSE(progress.abandoned());
  EXPECT_TRUE(progress.Abandon(absl::CancelledError("the client stopped receiving")));
  EXPECT_TRUE(progress.abandoned());  // the worker stops between bands
  EXPECT_EQ(resumed, 0);
  progress.Finish(absl::OkStatus());  // the worker's own status does not replace the reason
  EXPECT_EQ(resumed, 1);
  EXPECT_THAT(progress.AwaitEnd(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("stopped receiving")));
}

TEST(ResultProgressTest, GivingUpAfterTheWorkEndedEndsTheCallAtOnce) {
  int resumed = 0;
  ResultProgress progress([&] { ++resumed; });
  progress.Finish(absl::OkStatus());
  EXPECT_FALSE(progress.Abandon(absl::CancelledError("late")));
  EXPECT_EQ(resumed, 0);
}

// A worker advancing band by band on its thread while the writer is driven
// by its own "write completions" and by the worker's resumes: every part is
// written once, in order, only when ready, and the end comes after Finish.
TEST(ResultProgressTest, NoResumeIsLostBetweenAWorkerAndAWriter) {
  constexpr int kBands = 2000;
  constexpr int64_t kBandBytes = 3;
  constexpr int64_t kChunk = 2;      // parts and bands do not line up
  std::atomic<int64_t> computed{0};  // what the worker has really finished
  std::atomic<int> writes_in_flight{0};
  std::vector<int64_t> written;
  std::atomic<bool> ended{false};
  int64_t next = 0;
  std::function<void()> write_next;
  ResultProgress progress([&] { write_next(); });
  // The writer: one write at a time, each completed by a thread of its own
  // (as gRPC's completion would), the next started from there.
  std::vector<std::thread> completions;
  std::mutex completions_mutex;
  write_next = [&] {
    ASSERT_EQ(writes_in_flight.fetch_add(1), 0) << "two writers at once";
    if (next >= kBands * kBandBytes) {
      absl::StatusOr<bool> end = progress.AwaitEnd();
      ASSERT_TRUE(end.ok());
      writes_in_flight.fetch_sub(1);
      if (*end) ended = true;
      return;
    }
    absl::StatusOr<bool> ready = progress.Await(0, next + kChunk);
    ASSERT_TRUE(ready.ok());
    if (!*ready) {
      writes_in_flight.fetch_sub(1);
      return;
    }
    ASSERT_LE(next + kChunk, computed.load()) << "a part went out before its bytes";
    written.push_back(next);
    next += kChunk;
    writes_in_flight.fetch_sub(1);
    std::lock_guard<std::mutex> lock(completions_mutex);
    completions.emplace_back([&] { write_next(); });
  };
  write_next();
  std::thread worker([&] {
    for (int band = 1; band <= kBands; ++band) {
      computed = band * kBandBytes;
      progress.Advance(0, band * kBandBytes);
    }
    progress.Finish(absl::OkStatus());
  });
  worker.join();
  // Completion threads may start more; join until none is left.
  for (size_t joined = 0;;) {
    std::thread thread;
    {
      std::lock_guard<std::mutex> lock(completions_mutex);
      if (joined == completions.size()) break;
      thread = std::move(completions[joined++]);
    }
    thread.join();
  }
  EXPECT_TRUE(ended.load());
  ASSERT_EQ(written.size(), static_cast<size_t>(kBands * kBandBytes / kChunk));
  for (size_t i = 0; i < written.size(); ++i)
    ASSERT_EQ(written[i], static_cast<int64_t>(i) * kChunk);
}

}  // namespace
}  // namespace tensorop::server
