// Waiting in a test for a state that another thread or process reaches.
#ifndef TENSOROP_TESTS_SUPPORT_EVENTUALLY_H_
#define TENSOROP_TESTS_SUPPORT_EVENTUALLY_H_

#include <chrono>
#include <thread>

namespace tensorop::testing {

// Polls `condition` every 10 ms until it holds: whether it did. The 60 s bound
// only keeps a broken build from hanging; it is never a speed asserted.
template <typename Condition>
bool Eventually(Condition condition) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_EVENTUALLY_H_
