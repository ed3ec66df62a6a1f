// A gate that blocks test tasks until opened, so a test controls how many are
// in flight (a scheduler's queue depth holds still while they wait).
#ifndef TENSOROP_TESTS_SUPPORT_GATE_H_
#define TENSOROP_TESTS_SUPPORT_GATE_H_

#include <condition_variable>
#include <mutex>

namespace tensorop::testing {

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

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_GATE_H_
