#include "server/transport/call_stop.h"

namespace tensorop::server {

CallStop::CallStop(grpc::CallbackServerContext* context)
    : context_(context), deadline_(context->deadline()) {}

absl::Status CallStop::operator()() const {
  const bool cancelled = context_->IsCancelled();
  if (std::chrono::system_clock::now() >= deadline_ || (cancelled && NearDeadline())) {
    return absl::DeadlineExceededError("deadline exceeded before the request finished");
  }
  if (cancelled) return absl::CancelledError("the client cancelled the call");
  return absl::OkStatus();
}

bool CallStop::NearDeadline() const {
  return deadline_ - std::chrono::system_clock::now() <= kDeadlineSlack;
}

StopCheck CallStopCheck(grpc::CallbackServerContext* context) { return CallStop(context); }

}  // namespace tensorop::server
