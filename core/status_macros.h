// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Debian's Abseil (20220623) has no
// status_macros.h, so these are the two we need.
#ifndef TENSOROP_CORE_STATUS_MACROS_H_
#define TENSOROP_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TENSOROP_CONCAT_INNER(a, b) a##b
#define TENSOROP_CONCAT(a, b) TENSOROP_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function unless it is OK.
#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    if (absl::Status status_ = (expr); !status_.ok()) { \
      return status_;                                   \
    }                                                   \
  } while (false)

// ASSIGN_OR_RETURN(lhs, expr): evaluates the StatusOr `expr`; returns its status
// when not OK, else moves its value into `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TENSOROP_CONCAT(status_or_, __LINE__), lhs, expr)

// lhs may be a declaration and tmp is a name, so neither is parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)    \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // TENSOROP_CORE_STATUS_MACROS_H_
