#include "server/wire/status_map.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tensorop::server {
namespace {

TEST(StatusMapTest, EveryCodeMapsToTheGrpcCodeOfTheSameName) {
  struct Pair {
    absl::StatusCode absl_code;
    grpc::StatusCode grpc_code;
  };
  const Pair pairs[] = {
      {absl::StatusCode::kOk, grpc::StatusCode::OK},
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const Pair& pair : pairs) {
    EXPECT_EQ(ToGrpcCode(pair.absl_code), pair.grpc_code)
        << absl::StatusCodeToString(pair.absl_code);
  }
}

TEST(StatusMapTest, CodeOutsideTheEnumIsUnknown) {
  EXPECT_EQ(ToGrpcCode(static_cast<absl::StatusCode>(99)), grpc::StatusCode::UNKNOWN);
}

TEST(StatusMapTest, MessageIsPreserved) {
  grpc::Status status =
      ToGrpcStatus(absl::InvalidArgumentError("slice.window_strides[2] must not be 0"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "slice.window_strides[2] must not be 0");
}

TEST(StatusMapTest, OkIsOk) {
  grpc::Status status = ToGrpcStatus(absl::OkStatus());
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.error_message(), "");
}

}  // namespace
}  // namespace tensorop::server
