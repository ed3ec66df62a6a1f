#include "server/placement/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tensorop::server {
namespace {

TEST(ThreadPoolTest, WaitReturnsOnceEveryQueuedTaskRanOnce) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 1000; ++i) pool.Run([&] { ++ran; });
  pool.Wait();
  EXPECT_EQ(ran.load(), 1000);
  pool.Run([&] { ++ran; });  // and again after a wait
  pool.Wait();
  EXPECT_EQ(ran.load(), 1001);
}

TEST(ThreadPoolTest, RunsAsManyTasksAtOnceAsItHasThreadsOnAnyCoreCount) {
  // Each task waits for all to have started: only completes if every thread
  // runs one at once, however many cores the machine has.
  constexpr int kThreads = 5;
  std::mutex mutex;
  std::condition_variable cv;
  int started = 0;
  std::set<std::thread::id> threads;
  {
    ThreadPool pool(kThreads);
    for (int i = 0; i < kThreads; ++i) {
      pool.Run([&] {
        std::unique_lock<std::mutex> lock(mutex);
        ++started;
        threads.insert(std::this_thread::get_id());
        cv.notify_all();
        cv.wait(lock, [&] { return started == kThreads; });
      });
    }
    pool.Wait();
  }
  EXPECT_EQ(started, kThreads);
  EXPECT_EQ(threads.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(ThreadPoolTest, RunReturnsWhileEveryThreadIsBusyAndTheQueueRunsInOrder) {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  std::vector<int> order;
  {
    ThreadPool pool(1);
    pool.Run([&] {
      std::unique_lock<std::mutex> lock(mutex);
      opened.wait(lock, [&] { return open; });
    });
    // The only thread is held: these queue without blocking this one.
    for (int i = 0; i < 3; ++i) {
      pool.Run([&, i] {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back(i);
      });
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      EXPECT_TRUE(order.empty());
      open = true;
    }
    opened.notify_all();
  }  // the destructor runs what is queued before it joins
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(ThreadPoolTest, ZeroThreadsMeansOne) {
  ThreadPool pool(0);
  std::atomic<bool> ran{false};
  pool.Run([&] { ran = true; });
  pool.Wait();
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace tensorop::server
