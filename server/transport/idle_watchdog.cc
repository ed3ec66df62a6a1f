#include "server/transport/idle_watchdog.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

int64_t NowNs() {
  // Never 0, which means "not armed".
  return std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
}

}  // namespace

void IdleWatch::Arm() {
  int64_t unarmed = 0;
  armed_since_ns_.compare_exchange_strong(unarmed, NowNs(), std::memory_order_relaxed);
}

void IdleWatch::Touch() {
  int64_t since = armed_since_ns_.load(std::memory_order_relaxed);
  if (since != 0)
    armed_since_ns_.compare_exchange_strong(since, NowNs(), std::memory_order_relaxed);
}

void IdleWatch::Done() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  context_ = nullptr;
  armed_since_ns_.store(0, std::memory_order_relaxed);
}

void IdleWatch::CancelIfIdleSince(int64_t cutoff_ns) {
  const int64_t since = armed_since_ns_.load(std::memory_order_relaxed);
  if (since == 0 || since > cutoff_ns || expired_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (context_ == nullptr) return;
  expired_.store(true, std::memory_order_relaxed);
  context_->TryCancel();
}

IdleWatchdog::IdleWatchdog(absl::Duration timeout) : timeout_(timeout) {
  if (timeout_ > absl::ZeroDuration()) thread_ = std::thread([this] { Loop(); });
}

IdleWatchdog::~IdleWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<IdleWatch> IdleWatchdog::Watch(grpc::CallbackServerContext* context) {
  auto watch = std::make_shared<IdleWatch>(context);
  if (timeout_ > absl::ZeroDuration()) {
    std::lock_guard<std::mutex> lock(mu_);
    watches_.push_back(watch);
  }
  return watch;
}

absl::Status IdleWatchdog::IdleStatus() const {
  return absl::CancelledError(
      absl::StrCat("the client took or sent nothing for ", absl::FormatDuration(timeout_),
                   " (--idle_timeout_seconds); the call was cancelled and its memory freed"));
}

void IdleWatchdog::Loop() {
  // A few looks per timeout: a stalled call ends within 1.25 timeouts.
  const auto period = std::chrono::nanoseconds(
      std::clamp<int64_t>(absl::ToInt64Nanoseconds(timeout_ / 4), 10'000'000, 1'000'000'000));
  const int64_t timeout_ns = absl::ToInt64Nanoseconds(timeout_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period);
    if (stopping_) break;
    // Finished calls leave the list; the rest are looked at without mu_, so
    // Watch() never waits for a cancellation.
    std::erase_if(watches_, [](const std::shared_ptr<IdleWatch>& watch) {
      std::lock_guard<std::recursive_mutex> watch_lock(watch->mu_);
      return watch->context_ == nullptr;
    });
    std::vector<std::shared_ptr<IdleWatch>> watches = watches_;
    lock.unlock();
    const int64_t cutoff = NowNs() - timeout_ns;
    for (const std::shared_ptr<IdleWatch>& watch : watches) watch->CancelIfIdleSince(cutoff);
    lock.lock();
  }
}

}  // namespace tensorop::server
