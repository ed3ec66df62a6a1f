// StatusIs(code, message_matcher) for absl::Status and absl::StatusOr<T>.
// Deliberately no IsOk()/NotOk(): a test names the exact outcome it expects.
#ifndef TENSOROP_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define TENSOROP_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace tensorop::testing {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER_P2(StatusIs, code, message_matcher,
           "has status " + absl::StatusCodeToString(code) + " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher)) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(status.message()),
                                       result_listener);
}

// The value of an OK StatusOr, failing the test with the status otherwise.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(TENSOROP_TEST_CONCAT(status_or_, __LINE__), lhs, expr)
#define TENSOROP_TEST_CONCAT_INNER(a, b) a##b
#define TENSOROP_TEST_CONCAT(a, b) TENSOROP_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  ASSERT_TRUE(tmp.ok()) << tmp.status();          \
  lhs = std::move(tmp).value()

#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (false)

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_STATUS_MATCHERS_H_
