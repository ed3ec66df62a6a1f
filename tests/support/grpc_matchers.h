// Matchers for grpc::Status, in the spirit of tests/support/status_matchers.h:
// a test names the exact code and message it expects.
#ifndef TENSOROP_TESTS_SUPPORT_GRPC_MATCHERS_H_
#define TENSOROP_TESTS_SUPPORT_GRPC_MATCHERS_H_

#include <ostream>
#include <string>

#include <grpcpp/support/status.h>

#include "gmock/gmock.h"

// gtest finds this through ADL and prints statuses readably instead of as bytes.
namespace grpc {
inline void PrintTo(const Status& status, std::ostream* os) {
  *os << "grpc::Status(" << static_cast<int>(status.error_code()) << ", \""
      << status.error_message() << "\")";
}
}  // namespace grpc

namespace tensorop::testing {

// Prints a code as its number; gRPC has no name function in its C++ API.
MATCHER_P2(GrpcStatusIs, code, message_matcher,
           "has gRPC status " + ::testing::PrintToString(static_cast<int>(code)) +
               " and a message that " + ::testing::DescribeMatcher<std::string>(message_matcher)) {
  const grpc::Status& status = arg;
  *result_listener << "whose code is " << static_cast<int>(status.error_code()) << " and message \""
                   << status.error_message() << "\"";
  return status.error_code() == code &&
         ::testing::ExplainMatchResult(message_matcher, status.error_message(), result_listener);
}

MATCHER(GrpcOk, "is an OK gRPC status") {
  const grpc::Status& status = arg;
  if (!status.ok()) {
    *result_listener << "whose code is " << static_cast<int>(status.error_code())
                     << " and message \"" << status.error_message() << "\"";
  }
  return status.ok();
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_GRPC_MATCHERS_H_
