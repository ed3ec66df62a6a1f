// RETURN_IF_ERROR / ASSIGN_OR_RETURN for the client. Debian's Abseil (20220623) has
// no status_macros.h, and the client depends on nothing of core's, so it keeps its
// own copy; the guards make it harmless next to core/status_macros.h.
#ifndef TENSOROP_CLIENT_STATUS_MACROS_H_
#define TENSOROP_CLIENT_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#ifndef RETURN_IF_ERROR
// Returns the status of `expr` from the enclosing function unless it is OK.
#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)
#endif

#ifndef ASSIGN_OR_RETURN
#define TENSOROP_CLIENT_CONCAT_INNER(a, b) a##b
#define TENSOROP_CLIENT_CONCAT(a, b) TENSOROP_CLIENT_CONCAT_INNER(a, b)
// ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; returns its status
// when not OK, else moves its value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, expr) \
  TENSOROP_CLIENT_ASSIGN_OR_RETURN(TENSOROP_CLIENT_CONCAT(status_or_, __LINE__), lhs, expr)
#define TENSOROP_CLIENT_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(tmp).value()
#endif

#endif  // TENSOROP_CLIENT_STATUS_MACROS_H_
