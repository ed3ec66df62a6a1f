// absl::Status -> grpc::Status (and HTTP status) at the service boundary.
#ifndef TENSOROP_SERVER_WIRE_STATUS_MAP_H_
#define TENSOROP_SERVER_WIRE_STATUS_MAP_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tensorop::server {

// The gRPC code for an absl code. Both follow google.rpc.Code, but the mapping is
// spelled out (as in Triton's grpc_utils.cc) so that neither side's numbering is
// assumed; a code this switch does not know becomes UNKNOWN.
grpc::StatusCode ToGrpcCode(absl::StatusCode code);

// The same status for gRPC, message preserved.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Finishes a unary callback call at once with `status` (calls answered in the
// reaction: small, no work); its reactor, to return to gRPC.
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status);

// The HTTP status for an absl code, for the v2 REST API (server/v2/inference_http.h),
// spelled out as Triton's HTTP front end maps its errors.
int ToHttpStatus(absl::StatusCode code);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_STATUS_MAP_H_
