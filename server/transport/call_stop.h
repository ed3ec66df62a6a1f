// A gRPC call's liveness as a stop check: its deadline and its cancellation,
// asked by long work (core/cancellation.h's StopCheck) and by the writers of
// a failing call's status.
#ifndef TENSOROP_SERVER_TRANSPORT_CALL_STOP_H_
#define TENSOROP_SERVER_TRANSPORT_CALL_STOP_H_

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "core/cancellation.h"

namespace tensorop::server {

// A call's stop check: DEADLINE_EXCEEDED once the call's deadline passed,
// CANCELLED once the client cancelled (gRPC marks a call cancelled at its
// deadline too, so the deadline is asked first). `context` must outlive every
// use: until the call finished.
class CallStop {
 public:
  // A client whose deadline passes resets the call on its own clock, which
  // started before ours (ours when the headers arrived): a client gone this
  // close to our deadline went at its own.
  static constexpr std::chrono::milliseconds kDeadlineSlack{100};

  explicit CallStop(grpc::CallbackServerContext* context);
  absl::Status operator()() const;
  // Whether the deadline is at most kDeadlineSlack away, or passed.
  bool NearDeadline() const;

 private:
  grpc::CallbackServerContext* context_;
  std::chrono::system_clock::time_point deadline_;
};

// A CallStop for `context`, as a StopCheck (WriteFailure finds the CallStop in it).
StopCheck CallStopCheck(grpc::CallbackServerContext* context);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_CALL_STOP_H_
