// How long-running work learns it should stop, without knowing about gRPC.
#ifndef TENSOROP_CORE_CANCELLATION_H_
#define TENSOROP_CORE_CANCELLATION_H_

#include <functional>

#include "absl/status/status.h"

namespace tensorop {

// Called between blocks of work: OK to go on, or the status to stop with
// (CANCELLED, DEADLINE_EXCEEDED). Must be cheap and thread-safe.
using StopCheck = std::function<absl::Status()>;

inline absl::Status NeverStop() { return absl::OkStatus(); }

}  // namespace tensorop

#endif  // TENSOROP_CORE_CANCELLATION_H_
