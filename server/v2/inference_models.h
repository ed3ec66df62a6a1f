// tensorop's operators as Open Inference Protocol (KServe v2) models: one model
// per operator, version "1", with fixed tensor names (docs/kserve-v2.md), each
// made from the operator's row in core (kOperators) and its attributes message
// (inference_model_specs.h). Pure functions: a ModelInferRequest becomes a
// v1::RunRequest for the native pipeline, and its RunResponse becomes a
// ModelInferResponse. Today's models:
//
//   slice             input, offsets, window_sizes, window_strides -> output
//   strided_slice     input, begin, end, [stride, begin_mask, end_mask,
//                     new_axis_mask, shrink_axis_mask, ellipsis_mask] -> output
//   split             input, axis ([1]), split -> output_0 ... output_{k-1}
//   scatter_elements  input, indices, updates, axis ([1]) -> output
//
// Parameter tensors are INT64 or INT32 (1-D; a scalar attribute such as axis
// has shape [1]). Tensors are row-major contiguous; their bytes come from
// raw_input_contents or typed contents.
#ifndef TENSOROP_SERVER_V2_INFERENCE_MODELS_H_
#define TENSOROP_SERVER_V2_INFERENCE_MODELS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"
#include "inference/grpc_service.pb.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// The one version every model has.
inline constexpr absl::string_view kModelVersion = "1";
// The request and response parameter naming the backend.
inline constexpr absl::string_view kBackendParameter = "backend";
// What an answer over the message limit is told to use instead.
inline constexpr absl::string_view kAnswerTooBigHint =
    "tensorop.v1.TensorOp/RunStream streams results of any size";

// Tensor parameters of the system shared memory extension: an input's bytes,
// or where an output is written, in a region registered with
// SystemSharedMemoryRegister (or tensorop.v1's RegisterSharedMemory).
// byte_size is an input's exact bytes, the room an output may take.
inline constexpr absl::string_view kSharedMemoryRegionParameter = "shared_memory_region";
inline constexpr absl::string_view kSharedMemoryOffsetParameter = "shared_memory_offset";
inline constexpr absl::string_view kSharedMemoryByteSizeParameter = "shared_memory_byte_size";

// The models, in the order RepositoryIndex lists them.
const std::vector<std::string>& InferenceModelNames();

// OK when `name` is a model and `version` is empty or "1"; else NOT_FOUND
// naming the model (and version).
absl::Status CheckModel(absl::string_view name, absl::string_view version);

// ModelMetadata's answer for a model (NOT_FOUND as CheckModel). The input's
// datatype is listed as "FP32" for lack of a way to say "any" (the protocol
// has one datatype per tensor); every v2 datatype below is accepted.
absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(absl::string_view name,
                                                               absl::string_view version);

// ModelConfig's answer for a model (NOT_FOUND as CheckModel), as Triton's
// model_config.proto describes one: platform and backend "tensorop", no batch
// dimension (max_batch_size 0), the inputs and outputs of ModelMetadata with
// Triton's data types and dims (-1: variable; an optional attribute marked
// optional). A tensor that takes more than one datatype shows FP32 (data) or
// INT64 (indices, attributes), the one a tool may send, and the config's
// parameters say the whole truth: "NAME.datatypes" lists every datatype it
// takes, "NAME.dims" its rank, and split's "outputs" how many it has.
absl::StatusOr<inference::ModelConfigResponse> ModelConfig(absl::string_view name,
                                                           absl::string_view version);

// The v2 datatype name of a core dtype ("FP32", "BF16", "BOOL", ...), and
// back (nullopt: not a datatype tensord takes). Every other place reads a
// tensor's datatype through these, once, at the edge.
absl::string_view V2DatatypeName(DType dtype);
std::optional<DType> DTypeFromV2Datatype(absl::string_view datatype);
// Every v2 datatype tensord takes, comma-separated ("BOOL, UINT8, ..."): what
// an error about a datatype and the model config list.
const std::string& V2DatatypeNames();

// At most the bytes ToRunRequest makes from `request`'s typed contents (8 per
// element), to reserve before converting them.
int64_t TypedContentsBound(const inference::ModelInferRequest& request);

// `request` as a native RunRequest: its tensors' bytes are moved out of
// `request`'s raw_input_contents (typed contents are converted). Data inputs
// and outputs with the shared memory parameters become the native
// shared-memory references (v1::SharedMemoryRef), which the native pipeline
// resolves (regions pinned, spans checked against the region, outputs
// against the inputs); parameter tensors (offsets, axis, ...) must come
// inline. An input's shared_memory_byte_size must be its shape's bytes. Errors are
// INVALID_ARGUMENT naming the model, tensor, index and values, NOT_FOUND for
// an unknown model. The operator's own rules are left to the native
// validation, whose messages name the native fields
// ("slice.window_strides[2] must not be 0"). `held_input_bytes`: input
// "input"'s raw_input_contents entry, left empty in `request`, has that many
// bytes held apart (RequestDataView::OfRepeatedBytes); the native input then
// has no data, which the caller supplies (UploadedInputs).
absl::StatusOr<v1::RunRequest> ToRunRequest(inference::ModelInferRequest& request,
                                            std::optional<int64_t> held_input_bytes = std::nullopt);

// The answer to `request` (as ToRunRequest left it) from the native
// `response`'s output layouts (its data is not read), without its
// raw_output_contents: `contents[j]` is the native output whose bytes are
// raw_output_contents[j] (ToModelInferResponse's order). That field comes
// last in the message, so `head` serialized and the entries appended make the
// whole answer (SerializeWithOutputContents).
struct ModelInferAnswer {
  inference::ModelInferResponse head;
  std::vector<int> contents;
};
absl::StatusOr<ModelInferAnswer> ModelInferAnswerFor(const inference::ModelInferRequest& request,
                                                     const v1::RunResponse& response);

// The answer to `request` (as ToRunRequest left it) from the native
// `response` (packed outputs, as the native pipeline writes them when no
// strides are asked for): the outputs, moved into raw_output_contents, in
// order, restricted to those `request` asks for, and parameter "backend".
// An output written into shared memory carries its request's shared memory
// parameters and an empty raw_output_contents entry.
absl::StatusOr<inference::ModelInferResponse> ToModelInferResponse(
    const inference::ModelInferRequest& request, v1::RunResponse& response);

// `status`, from the native pipeline running `request`, in the protocol's
// terms: an error about a shared memory output ("outputs[0].shared_memory:
// ...") also names the output ("slice: output \"output\": outputs[0]...").
absl::Status NameSharedMemoryOutput(const inference::ModelInferRequest& request,
                                    const absl::Status& status);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_MODELS_H_
