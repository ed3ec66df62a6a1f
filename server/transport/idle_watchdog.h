// Cancels calls whose client stalls: an upload that sends nothing, or a reader
// that takes nothing, for --idle_timeout_seconds. A reactor arms its watch
// while it waits on the client (a read of RunChunked's upload, a write of a
// result part or answer, a unary answer being sent) and touches it on every
// step of progress; one thread looks at every armed watch a few times per
// timeout and cancels the expired calls (grpc::ServerContext::TryCancel), which
// fails their pending reads and writes so the reactors finish and free what
// they hold. Reactions never wait for the timer.
#ifndef TENSOROP_SERVER_TRANSPORT_IDLE_WATCHDOG_H_
#define TENSOROP_SERVER_TRANSPORT_IDLE_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tensorop::server {

// One call's watch. Arm/Touch/Disarm are lock-free and may be called from any
// thread; Done must be the last call (from OnDone): after it the watchdog no
// longer touches the call's context.
class IdleWatch {
 public:
  explicit IdleWatch(grpc::CallbackServerContext* context) : context_(context) {}

  // Waiting on the client from now on; a running timer keeps running.
  void Arm();
  // Progress: the timer starts again (when armed).
  void Touch();
  // Not waiting on the client (work runs, or the reactor waits for a worker).
  void Disarm() { armed_since_ns_.store(0, std::memory_order_relaxed); }
  void Done();
  // True once the watchdog cancelled the call for idleness.
  bool expired() const { return expired_.load(std::memory_order_relaxed); }

 private:
  friend class IdleWatchdog;
  // Cancels the call if it has been armed since before `cutoff_ns`.
  void CancelIfIdleSince(int64_t cutoff_ns);

  // Held while the watchdog cancels, so Done (and the context's end) waits
  // for it; recursive because TryCancel may run the call's reactions, OnDone
  // included, inline on the watchdog's thread.
  std::recursive_mutex mu_;
  grpc::CallbackServerContext* context_;    // null once Done
  std::atomic<int64_t> armed_since_ns_{0};  // steady clock; 0: not armed
  std::atomic<bool> expired_{false};
};

class IdleWatchdog {
 public:
  // `timeout` of zero: calls are never cancelled for idleness.
  explicit IdleWatchdog(absl::Duration timeout);
  ~IdleWatchdog();
  IdleWatchdog(const IdleWatchdog&) = delete;
  IdleWatchdog& operator=(const IdleWatchdog&) = delete;

  // A watch for the call of `context`, unarmed.
  std::shared_ptr<IdleWatch> Watch(grpc::CallbackServerContext* context);

  // The status a call cancelled for idleness is recorded with.
  absl::Status IdleStatus() const;

 private:
  void Loop();

  const absl::Duration timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<IdleWatch>> watches_;
  std::thread thread_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_IDLE_WATCHDOG_H_
