#include "server/v2/inference_service.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/dtype.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "core/version.h"
#include "server/data/shared_memory.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/raw_unary.h"
#include "server/pipeline/response_writer.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/metrics.h"
#include "server/telemetry/request_log.h"
#include "server/transport/call_stop.h"
#include "server/v2/inference_models.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "server/wire/status_map.h"

namespace tensorop::server {
namespace {

constexpr absl::string_view kServerName = "tensord";

}  // namespace

inference::ServerMetadataResponse ServerMetadataAnswer(bool system_shared_memory) {
  inference::ServerMetadataResponse response;
  response.set_name(std::string(kServerName));
  response.set_version(std::string(Version()));
  // Of the protocol's optional extensions, system shared memory where it is
  // served; not model_repository, statistics as Triton defines them, CUDA
  // shared memory, ...
  if (system_shared_memory) response.add_extensions("system_shared_memory");
  return response;
}

inference::RepositoryIndexResponse RepositoryIndexAnswer() {
  inference::RepositoryIndexResponse response;
  for (const std::string& name : InferenceModelNames()) {
    auto* model = response.add_models();
    model->set_name(name);
    model->set_version(std::string(kModelVersion));
    model->set_state("READY");
  }
  return response;
}

absl::StatusOr<inference::ModelStatisticsResponse> ModelStatisticsAnswer(
    const Metrics* metrics, absl::string_view name, absl::string_view version) {
  inference::ModelStatisticsResponse response;
  if (!name.empty()) RETURN_IF_ERROR(CheckModel(name, version));
  for (const std::string& model : InferenceModelNames()) {
    if (!name.empty() && name != model) continue;
    inference::ModelStatistics* stats = response.add_model_stats();
    stats->set_name(model);
    stats->set_version(std::string(kModelVersion));
    // The counts tensord keeps (server/telemetry/metrics.h): calls of the operator
    // through either API that ended OK or not, and their time from arrival to
    // answer. Its parts (queue, input, compute, output) are not kept apart:
    // those `ns` stay 0, and execution is counted as the successes.
    const Metrics::OpCounts counts =
        metrics != nullptr ? metrics->CallCounts(model) : Metrics::OpCounts{};
    stats->set_inference_count(counts.success);
    stats->set_execution_count(counts.success);
    stats->mutable_inference_stats()->mutable_success()->set_count(counts.success);
    stats->mutable_inference_stats()->mutable_success()->set_ns(counts.success_ns);
    stats->mutable_inference_stats()->mutable_fail()->set_count(counts.fail);
    stats->mutable_inference_stats()->mutable_fail()->set_ns(counts.fail_ns);
  }
  return response;
}

// ---------------------------------------------------------------------------
// Health and metadata: small, answered in the reaction.

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ServerLive"), [](const auto&, auto& out) {
        out.set_live(true);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ServerReady"), [this](const auto&, auto& out) {
        out.set_ready(ready_.load(std::memory_order_acquire));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ModelReady"), [this](const auto& in, auto& out) {
        absl::Status status = CheckModel(in.name(), in.version());
        if (status.ok()) out.set_ready(ready_.load(std::memory_order_acquire));
        return status;
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ServerMetadata"), [this](const auto&, auto& out) {
        out = ServerMetadataAnswer(
            /*system_shared_memory=*/engine_->options().shared_memory != nullptr);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ModelMetadata"), [](const auto& in, auto& out) -> absl::Status {
        ASSIGN_OR_RETURN(out, server::ModelMetadata(in.name(), in.version()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ModelConfigRequest, inference::ModelConfigResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ModelConfig"), [](const auto& in, auto& out) -> absl::Status {
        ASSIGN_OR_RETURN(out, server::ModelConfig(in.name(), in.version()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return AnswerRaw<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "ModelStatistics"), [this](const auto& in, auto& out) -> absl::Status {
        ASSIGN_OR_RETURN(out, ModelStatisticsAnswer(metrics_, in.name(), in.version()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return AnswerRaw<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "RepositoryIndex"), [](const auto&, auto& out) {
        out = RepositoryIndexAnswer();
        return absl::OkStatus();
      });
}

// ---------------------------------------------------------------------------
// The shared memory extension: small, answered in the reaction.

namespace {

absl::Status NoSharedMemory() {
  return absl::FailedPreconditionError("this server has no shared memory");
}

// `value` (a uint64 field of the protocol) as an int64; INVALID_ARGUMENT
// naming `field` past 2^63 - 1.
absl::StatusOr<int64_t> ToInt64(uint64_t value, absl::string_view field) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value, " is more than 2^63 - 1 bytes"));
  }
  return static_cast<int64_t>(value);
}

}  // namespace

absl::Status CudaSharedMemoryUnimplemented(absl::string_view method) {
  return absl::UnimplementedError(
      absl::StrCat(method,
                   ": tensord serves no CUDA shared memory; only system shared memory "
                   "(SystemSharedMemoryRegister)"));
}

absl::StatusOr<inference::SystemSharedMemoryStatusResponse> SystemSharedMemoryStatusAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryStatusRequest& request,
    const SharedMemoryCaller& caller) {
  if (registry == nullptr) return NoSharedMemory();
  ASSIGN_OR_RETURN(std::vector<SharedMemoryRegistry::RegionInfo> infos,
                   registry->Status(request.name(), caller.owner));
  inference::SystemSharedMemoryStatusResponse response;
  for (const SharedMemoryRegistry::RegionInfo& info : infos) {
    auto& region = (*response.mutable_regions())[info.name];
    region.set_name(info.name);
    region.set_key(info.key);
    region.set_offset(static_cast<uint64_t>(info.offset));
    region.set_byte_size(static_cast<uint64_t>(info.byte_size));
  }
  return response;
}

absl::StatusOr<inference::SystemSharedMemoryRegisterResponse> SystemSharedMemoryRegisterAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryRegisterRequest& request,
    const SharedMemoryCaller& caller) {
  if (registry == nullptr) return NoSharedMemory();
  // The protocol calls the region's name `name` (tensorop.v1: `region`).
  RETURN_IF_ERROR(CheckRegionName(request.name(), "name"));
  ASSIGN_OR_RETURN(const int64_t offset, ToInt64(request.offset(), "offset"));
  ASSIGN_OR_RETURN(const int64_t byte_size, ToInt64(request.byte_size(), "byte_size"));
  RETURN_IF_ERROR(
      registry->Register(request.name(), request.key(), byte_size, offset, caller).status());
  return inference::SystemSharedMemoryRegisterResponse();
}

absl::StatusOr<inference::SystemSharedMemoryUnregisterResponse> SystemSharedMemoryUnregisterAnswer(
    SharedMemoryRegistry* registry, const inference::SystemSharedMemoryUnregisterRequest& request,
    const SharedMemoryCaller& caller) {
  if (registry == nullptr) return NoSharedMemory();
  if (!request.name().empty()) {
    RETURN_IF_ERROR(registry->Unregister(request.name(), caller.owner));
    return inference::SystemSharedMemoryUnregisterResponse();
  }
  // Every region: those in use stay (FAILED_PRECONDITION naming them), the
  // rest go; one gone meanwhile is not an error.
  ASSIGN_OR_RETURN(std::vector<SharedMemoryRegistry::RegionInfo> infos,
                   registry->Status("", caller.owner));
  std::vector<std::string> busy;
  for (const SharedMemoryRegistry::RegionInfo& info : infos) {
    absl::Status status = registry->Unregister(info.name, caller.owner);
    if (status.code() == absl::StatusCode::kFailedPrecondition) busy.push_back(info.name);
  }
  if (!busy.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory regions in use by requests were not unregistered: ",
                     absl::StrJoin(busy, ", "), "; unregister them once they finish"));
  }
  return inference::SystemSharedMemoryUnregisterResponse();
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::SystemSharedMemoryStatusRequest,
                   inference::SystemSharedMemoryStatusResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "SystemSharedMemoryStatus"),
      [&](const auto& in, auto& out) -> absl::Status {
        ASSIGN_OR_RETURN(out, SystemSharedMemoryStatusAnswer(engine_->options().shared_memory, in,
                                                             SharedMemoryCallerOf(*context)));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::SystemSharedMemoryRegisterRequest,
                   inference::SystemSharedMemoryRegisterResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "SystemSharedMemoryRegister"), [&](const auto& in, auto&) {
        return SystemSharedMemoryRegisterAnswer(engine_->options().shared_memory, in,
                                                SharedMemoryCallerOf(*context))
            .status();
      });
}

grpc::ServerUnaryReactor* InferenceService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::SystemSharedMemoryUnregisterRequest,
                   inference::SystemSharedMemoryUnregisterResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "SystemSharedMemoryUnregister"), [&](const auto& in, auto&) {
        return SystemSharedMemoryUnregisterAnswer(engine_->options().shared_memory, in,
                                                  SharedMemoryCallerOf(*context))
            .status();
      });
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::CudaSharedMemoryStatusRequest,
                   inference::CudaSharedMemoryStatusResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "CudaSharedMemoryStatus"),
      [](const auto&, auto&) { return CudaSharedMemoryUnimplemented("CudaSharedMemoryStatus"); });
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryRegister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::CudaSharedMemoryRegisterRequest,
                   inference::CudaSharedMemoryRegisterResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "CudaSharedMemoryRegister"),
      [](const auto&, auto&) { return CudaSharedMemoryUnimplemented("CudaSharedMemoryRegister"); });
}

grpc::ServerUnaryReactor* InferenceService::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerRaw<inference::CudaSharedMemoryUnregisterRequest,
                   inference::CudaSharedMemoryUnregisterResponse>(
      context, request, response, engine_->budget(), engine_->options().max_message_bytes,
      CallOrigin(*context, "CudaSharedMemoryUnregister"), [](const auto&, auto&) {
        return CudaSharedMemoryUnimplemented("CudaSharedMemoryUnregister");
      });
}

}  // namespace tensorop::server
