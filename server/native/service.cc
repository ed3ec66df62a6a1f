// TensorOpService's shared memory calls. Each Run method's reactor has its own
// file (server/native/run_reactor.cc, run_stream_reactor.cc,
// run_bidi_reactor.cc, run_chunked_reactor.cc); what runs their requests is
// the engine (server/engine/engine.h).

#include "server/native/service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/raw_unary.h"
#include "server/security/call_origin.h"
#include "server/telemetry/metrics.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {

TensorOpService::TensorOpService(Engine* engine) : engine_(*engine) {}

grpc::ServerUnaryReactor* TensorOpService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<v1::RegisterSharedMemoryRequest, v1::RegisterSharedMemoryResponse>(
      context, request, response, engine_.budget(), engine_.options().max_message_bytes,
      CallOrigin(*context, "RegisterSharedMemory"), [&](const auto& in, auto& out) {
        return RegisterSharedMemoryAnswer(engine_.options().shared_memory,
                                          SharedMemoryCallerOf(*context), in, out);
      });
}

grpc::ServerUnaryReactor* TensorOpService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<v1::UnregisterSharedMemoryRequest, v1::UnregisterSharedMemoryResponse>(
      context, request, response, engine_.budget(), engine_.options().max_message_bytes,
      CallOrigin(*context, "UnregisterSharedMemory"), [&](const auto& in, auto&) {
        return UnregisterSharedMemoryAnswer(engine_.options().shared_memory,
                                            SharedMemoryCallerOf(*context), in);
      });
}

grpc::ServerUnaryReactor* TensorOpService::SharedMemoryStatus(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return AnswerRaw<v1::SharedMemoryStatusRequest, v1::SharedMemoryStatusResponse>(
      context, request, response, engine_.budget(), engine_.options().max_message_bytes,
      CallOrigin(*context, "SharedMemoryStatus"), [&](const auto& in, auto& out) {
        return SharedMemoryStatusAnswer(engine_.options().shared_memory,
                                        SharedMemoryCallerOf(*context), in, out);
      });
}

}  // namespace tensorop::server
