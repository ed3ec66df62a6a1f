// What a request costs the memory budget besides its tensors: the one model
// that every front end (the native reactors, v2's gRPC and HTTP) reserves by,
// so that a small request naming many outputs cannot amplify.
#ifndef TENSOROP_SERVER_MEMORY_REQUEST_COST_H_
#define TENSOROP_SERVER_MEMORY_REQUEST_COST_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/memory/memory_budget.h"

namespace tensorop::server {

// What one request holds besides its tensors, reserved before it is parsed
// (the request, its log record) and per output before it is planned (the
// output's layout, its plan step, its header in the answer).
inline constexpr int64_t kRequestOverheadBytes = 16 << 10;
inline constexpr int64_t kOutputOverheadBytes = 4 << 10;

// Reserves what parsing takes, `bound` (the parsed message's bound) and the
// request's fixed overhead, for `what`, made only when refused.
inline absl::Status ReserveParsing(int64_t bound, absl::FunctionRef<std::string()> what,
                                   MemoryBudget::Reservation& reservation) {
  return reservation.Grow(bound + kRequestOverheadBytes, what);
}
inline absl::Status ReserveParsing(int64_t bound, absl::string_view what,
                                   MemoryBudget::Reservation& reservation) {
  return reservation.Grow(bound + kRequestOverheadBytes, what);
}
// Holds what a parsed request takes from here, its `request_bytes` and the
// fixed overhead, and gives back what parsing took beside them.
inline void HoldParsedRequest(int64_t request_bytes, MemoryBudget::Reservation& reservation) {
  reservation.ShrinkTo(request_bytes + kRequestOverheadBytes);
}
// Reserves the overhead of planning `outputs` outputs (at least one), for
// `what`, made only when refused.
inline absl::Status ReserveOutputOverhead(int outputs, absl::FunctionRef<std::string()> what,
                                          MemoryBudget::Reservation& reservation) {
  return reservation.Grow(kOutputOverheadBytes * std::max(1, outputs), what);
}

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_REQUEST_COST_H_
