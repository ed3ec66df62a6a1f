// A fixed set of threads taking tasks from one FIFO, each asleep on a
// condition variable the moment the FIFO is empty.
//
// Why not oneTBB's arena for everything: its idle workers spin and yield for a
// while after each task before they sleep. With a request every millisecond
// (1 MiB calls) that spinning is a quarter of the server's CPU on a machine it
// shares with its clients (bench/NOTES.md, "Bulk data"). oneTBB stays for the
// parallel loops of large copies and for tasks that suspend while waiting for
// a device (server/placement/scheduler.h).
#ifndef TENSOROP_SERVER_PLACEMENT_THREAD_POOL_H_
#define TENSOROP_SERVER_PLACEMENT_THREAD_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tensorop::server {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  // Runs every task queued so far, then joins the threads.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`; the first idle thread runs it. Never blocks on running
  // tasks. Tasks must not throw (the server's are Guarded).
  void Run(std::function<void()> task);

  // Blocks until every task queued so far has finished.
  void Wait();

 private:
  void Work();

  std::mutex mutex_;
  std::condition_variable queued_;  // a task was queued, or stopping_
  std::condition_variable idle_;    // unfinished_ reached 0
  std::deque<std::function<void()>> tasks_;
  int unfinished_ = 0;  // queued or running
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_THREAD_POOL_H_
