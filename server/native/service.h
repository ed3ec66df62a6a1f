// The tensorop.v1.TensorOp gRPC service on the callback API, a front end of
// the engine (server/engine/engine.h): it reads and writes the wire.
// Reactions never block: every request is planned and executed by a scheduler
// task, which also finishes the call (or starts its writes).
#ifndef TENSOROP_SERVER_NATIVE_SERVICE_H_
#define TENSOROP_SERVER_NATIVE_SERVICE_H_

#include <cstdint>
#include <memory>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/limits.h"
#include "server/data/shared_memory.h"
#include "server/engine/engine.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/response_writer.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/request_log.h"
#include "server/transport/call_stop.h"
#include "server/transport/idle_watchdog.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// Every method reads raw bytes and parses them here (unary ones answered at
// once through server/pipeline/raw_unary.h): with typed reads gRPC reports a message
// that does not parse exactly like the client's half-close (streams), or
// answers UNIMPLEMENTED with no message (unary), and it parses before the
// memory budget can be asked.
using ServiceBase =
    v1::TensorOp::WithRawCallbackMethod_Run<v1::TensorOp::WithRawCallbackMethod_RunStream<
        v1::TensorOp::WithRawCallbackMethod_RunBidi<v1::TensorOp::WithRawCallbackMethod_RunChunked<
            v1::TensorOp::WithRawCallbackMethod_RegisterSharedMemory<
                v1::TensorOp::WithRawCallbackMethod_UnregisterSharedMemory<
                    v1::TensorOp::WithRawCallbackMethod_SharedMemoryStatus<
                        v1::TensorOp::WithRawCallbackMethod_Put<
                            v1::TensorOp::WithRawCallbackMethod_Fetch<
                                v1::TensorOp::WithRawCallbackMethod_Release<
                                    v1::TensorOp::WithRawCallbackMethod_ListHandles<
                                        v1::TensorOp::WithRawCallbackMethod_RunChain<
                                            v1::TensorOp::Service>>>>>>>>>>>>;

class TensorOpService final : public ServiceBase {
 public:
  // `engine` runs every request and must outlive the service and every call
  // it started.
  explicit TensorOpService(Engine* engine);

  // One request, every output inline.
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  // One request, each output as a header then data chunks.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* RunStream(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;
  // RunRequests in, RunResponses out in completion order.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RunBidi(
      grpc::CallbackServerContext* context) override;
  // A RequestPart stream (request, then input chunks) answered like RunStream.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RunChunked(
      grpc::CallbackServerContext* context) override;
  // Shared memory regions (server/data/shared_memory.h), answered at once
  // (server/pipeline/raw_unary.h).
  grpc::ServerUnaryReactor* RegisterSharedMemory(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SharedMemoryStatus(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;

  // Handles (server/data/handle_store.h): a tensor uploaded to stay (a header, then
  // chunks), streamed back like RunStream, released, listed.
  grpc::ServerReadReactor<grpc::ByteBuffer>* Put(grpc::CallbackServerContext* context,
                                                 grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Fetch(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListHandles(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Steps run in order on one backend (server/engine/chain.h), the results streamed
  // back like RunStream.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* RunChain(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;

 private:
  class UnaryReactor;
  class StreamReactor;
  class RunStreamReactor;
  class RunChainReactor;
  class FetchReactor;
  class BidiReactor;
  class ChunkedReactor;
  class PutReactor;

  Engine& engine_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_NATIVE_SERVICE_H_
