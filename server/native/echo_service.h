// The echo baseline for load tests (`tensord --echo`): the same gRPC server,
// flags and request parsing as TensorOpService, but Run answers at once, inside
// the reaction, with zero-filled outputs shaped like the real answer's, without
// scheduling, validating, planning, executing, logging or counting anything.
// `ghz` against both servers shows what tensord's own work costs per call
// (bench/load/run.sh). Only Run is served; the other methods are UNIMPLEMENTED.
#ifndef TENSOROP_SERVER_NATIVE_ECHO_SERVICE_H_
#define TENSOROP_SERVER_NATIVE_ECHO_SERVICE_H_

#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// Fills `response` with the echo answer to `request`: its id, backend "echo",
// and per entry of `request.outputs` (one when there is none) a tensor with the
// dtype of input "input", the entry's sizes and strides (the input's sizes and
// packed strides where the entry gives none) and zeroed data spanning them.
// INVALID_ARGUMENT without an "input" of a known dtype or with a negative size
// or stride; RESOURCE_EXHAUSTED when the outputs would pass `max_output_bytes`.
absl::Status FillEchoResponse(const v1::RunRequest& request, int64_t max_output_bytes,
                              v1::RunResponse* response);

class EchoService final : public v1::TensorOp::CallbackService {
 public:
  // `max_output_bytes`: the server's message limit, which an answer must fit.
  explicit EchoService(int64_t max_output_bytes) : max_output_bytes_(max_output_bytes) {}

  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context, const v1::RunRequest* request,
                                v1::RunResponse* response) override;

 private:
  const int64_t max_output_bytes_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_NATIVE_ECHO_SERVICE_H_
