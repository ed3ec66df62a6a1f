// The Open Inference Protocol's (KServe v2) REST bodies, as Triton serves
// them, to and from the gRPC messages: an infer request's JSON (tensors as
// typed JSON data, or as binary parts after the JSON with the binary tensor
// data extension) becomes an inference::ModelInferRequest whose inputs are
// all in raw_input_contents, so the HTTP front end runs it through the same
// conversion (server/v2/inference_models.h) and pipeline as gRPC ModelInfer; the
// ModelInferResponse is rendered back as JSON data or binary parts. Tensors in
// shared memory (parameters "shared_memory_region", ...) carry no data: an
// input's parameters go to the gRPC request for ToRunRequest, an output is
// answered with its parameters only. Pure: no sockets, no server.
//
// FP16 in JSON data: numbers, rounded to the nearest half (ties to even);
// a finite number beyond FP16's range is refused. BOOL: true/false.
#ifndef TENSOROP_SERVER_V2_INFERENCE_HTTP_JSON_H_
#define TENSOROP_SERVER_V2_INFERENCE_HTTP_JSON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"
#include "server/v2/bounded_json.h"

namespace tensorop::server {

// The header of the binary tensor data extension: the JSON's length in bytes
// when binary parts follow it.
inline constexpr absl::string_view kInferenceHeaderContentLength =
    "Inference-Header-Content-Length";

struct HttpInferRequest {
  inference::ModelInferRequest request;
  // Request parameter binary_data_output: every output as binary data unless
  // its own parameters.binary_data says otherwise.
  bool binary_default = false;
  // Requested outputs' parameters.binary_data, by name.
  std::map<std::string, bool> binary_outputs;
};

// A register body is one small object.
inline constexpr size_t kMaxRegisterBodyBytes = 64 << 10;

// The request to `model` (`version` may be empty) in `body`: JSON only, or,
// with `header_length` (Inference-Header-Content-Length), that many bytes of
// JSON then the inputs' binary parts in input order. INVALID_ARGUMENT naming
// the model, the tensor and the element or field, or the depth limit;
// `reserve`'s refusal when the parse does not fit the budget.
absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(absl::string_view model,
                                                       absl::string_view version,
                                                       absl::string_view body,
                                                       std::optional<int64_t> header_length,
                                                       const JsonReserve& reserve = nullptr);

struct HttpBody {
  std::string body;
  std::string content_type;
  // Set when binary parts follow the JSON: its length, for the
  // Inference-Header-Content-Length header.
  std::optional<size_t> header_length;
};

// The answer to `asked` from `response` (raw_output_contents, one per
// output, as ToModelInferResponse builds it).
absl::StatusOr<HttpBody> RenderHttpInferResponse(const HttpInferRequest& asked,
                                                 const inference::ModelInferResponse& response);

// {"error": "<message>"}
std::string HttpErrorJson(const absl::Status& status);
// GET /v2
std::string ServerMetadataJson(const inference::ServerMetadataResponse& metadata);
// GET /v2/models/{name}[/versions/{v}]
std::string ModelMetadataJson(const inference::ModelMetadataResponse& metadata);
// GET /v2/models/{m}/config: the ModelConfig as Triton's HTTP API answers it
// (the proto's field names; data types as TYPE_ names, dims as numbers).
std::string ModelConfigJson(const inference::ModelConfig& config);
// POST /v2/repository/index
std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& index);
// GET /v2/models/{name}/stats
std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& statistics);

// POST /v2/systemsharedmemory/region/{name}/register's body {"key", "offset"
// (optional, 0), "byte_size"} as the gRPC request; INVALID_ARGUMENT naming the
// region and the field, or a body over kMaxRegisterBodyBytes or nested past
// kMaxJsonDepth.
absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> ParseSystemSharedMemoryRegister(
    absl::string_view name, absl::string_view body);
// GET /v2/systemsharedmemory[/region/{name}]/status: [{"name", "key", "offset",
// "byte_size"}, ...] by name, as Triton.
std::string SystemSharedMemoryStatusJson(const inference::SystemSharedMemoryStatusResponse& status);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_HTTP_JSON_H_
