// inference.GRPCInferenceService, the Open Inference Protocol (KServe v2) over
// gRPC, on the callback API next to tensorop.v1.TensorOp. The operators are
// models (server/v2/inference_models.h); every inference goes through the engine
// (server/engine/engine.h, Engine::ExecuteOnWorker): the same budgeted parse, limits,
// validation, placement, request log and metrics.
#ifndef TENSOROP_SERVER_V2_INFERENCE_SERVICE_H_
#define TENSOROP_SERVER_V2_INFERENCE_SERVICE_H_

#include <atomic>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.grpc.pb.h"
#include "inference/grpc_service.pb.h"
#include "server/data/shared_memory.h"
#include "server/engine/engine.h"

namespace tensorop::server {

class Metrics;
class SharedMemoryRegistry;

// The shared memory extension's six calls (system and CUDA).
using InferenceSharedMemoryBase =
    inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryStatus<
        inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryRegister<
            inference::GRPCInferenceService::WithRawCallbackMethod_SystemSharedMemoryUnregister<
                inference::GRPCInferenceService::WithRawCallbackMethod_CudaSharedMemoryStatus<
                    inference::GRPCInferenceService::WithRawCallbackMethod_CudaSharedMemoryRegister<
                        inference::GRPCInferenceService::
                            WithRawCallbackMethod_CudaSharedMemoryUnregister<
                                inference::GRPCInferenceService::Service>>>>>>;

// Every method reads raw bytes, like TensorOpService's (server/native/service.h): ModelInfer and
// ModelStreamInfer reserve the request in the memory budget before it is
// parsed; the others parse it themselves (server/pipeline/raw_unary.h), so bytes that
// are no request are INVALID_ARGUMENT naming the message, not UNIMPLEMENTED.
using InferenceServiceBase = inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
        inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                            inference::GRPCInferenceService::WithRawCallbackMethod_ModelConfig<
                                inference::GRPCInferenceService::
                                    WithRawCallbackMethod_ModelStatistics<
                                        inference::GRPCInferenceService::
                                            WithRawCallbackMethod_RepositoryIndex<
                                                InferenceSharedMemoryBase>>>>>>>>>>;

// The answers of ServerMetadata, RepositoryIndex and ModelStatistics (from
// `metrics`' counts; may be null), shared with the HTTP front end
// (server/v2/inference_http.h). `system_shared_memory`: whether the caller's
// protocol binding serves the system shared memory extension's calls.
inference::ServerMetadataResponse ServerMetadataAnswer(bool system_shared_memory);
inference::RepositoryIndexResponse RepositoryIndexAnswer();
absl::StatusOr<inference::ModelStatisticsResponse> ModelStatisticsAnswer(const Metrics* metrics,
                                                                         absl::string_view name,
                                                                         absl::string_view version);

// The system shared memory extension's answers on `registry` (the native
// registry, server/data/shared_memory.h; null: FAILED_PRECONDITION), shared with
// the HTTP front end so both bindings have one implementation and the same
// messages. The protocol calls the region `name`; empty in Status and
// Unregister: every region of `caller`'s.
absl::StatusOr<inference::SystemSharedMemoryStatusResponse> SystemSharedMemoryStatusAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryStatusRequest& request,
    const SharedMemoryCaller& caller);
absl::StatusOr<inference::SystemSharedMemoryRegisterResponse> SystemSharedMemoryRegisterAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryRegisterRequest& request,
    const SharedMemoryCaller& caller);
absl::StatusOr<inference::SystemSharedMemoryUnregisterResponse> SystemSharedMemoryUnregisterAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryUnregisterRequest& request,
    const SharedMemoryCaller& caller);
// UNIMPLEMENTED for the CUDA shared memory call `method`
// ("CudaSharedMemoryRegister"): only system shared memory is served.
absl::Status CudaSharedMemoryUnimplemented(absl::string_view method);

class InferenceService final : public InferenceServiceBase {
 public:
  // `engine` runs every inference and must outlive the service; `metrics`
  // (may be null) gives ModelStatistics its counts.
  InferenceService(Engine* engine, const Metrics* metrics) : engine_(engine), metrics_(metrics) {}

  // ServerReady's answer: true once the server serves, false from the moment
  // it starts draining (as the health service's status).
  void SetReady(bool ready) { ready_.store(ready, std::memory_order_release); }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;

  // The system shared memory extension, on the registry of tensorop.v1's
  // RegisterSharedMemory (the same regions, leases and budget): answered at
  // once. Without a registry, FAILED_PRECONDITION.
  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) override;
  // UNIMPLEMENTED: only system shared memory is served.
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) override;

 private:
  class InferReactor;
  class StreamReactor;

  Engine* const engine_;
  const Metrics* const metrics_;
  std::atomic<bool> ready_{false};
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_SERVICE_H_
