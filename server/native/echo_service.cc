#include "server/native/echo_service.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/checked_math.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "server/wire/status_map.h"

namespace tensorop::server {
namespace {

// Packed row-major strides for `sizes` (core's PackedStrides), as a field.
google::protobuf::RepeatedField<int64_t> PackedStridesField(
    const google::protobuf::RepeatedField<int64_t>& sizes) {
  const std::vector<int64_t> strides = PackedStrides(std::span(sizes.data(), sizes.size()));
  return {strides.begin(), strides.end()};
}

// The elements `sizes` and `strides` span: 0 when a size is 0, else
// 1 + sum((size - 1) * stride); nullopt on overflow or a negative value.
std::optional<int64_t> SpannedElements(const google::protobuf::RepeatedField<int64_t>& sizes,
                                       const google::protobuf::RepeatedField<int64_t>& strides) {
  std::optional<int64_t> elements = 1;
  for (int i = 0; i < sizes.size() && elements.has_value(); ++i) {
    if (sizes[i] < 0 || strides[i] < 0) return std::nullopt;
    if (sizes[i] == 0) return 0;
    std::optional<int64_t> span = CheckedMul(sizes[i] - 1, strides[i]);
    elements = span.has_value() ? CheckedAdd(*elements, *span) : std::nullopt;
  }
  return elements;
}

}  // namespace

absl::Status FillEchoResponse(const v1::RunRequest& request, int64_t max_output_bytes,
                              v1::RunResponse* response) {
  auto input = request.inputs().find("input");
  if (input == request.inputs().end()) {
    return absl::InvalidArgumentError("echo: the request has no input \"input\"");
  }
  std::optional<DType> dtype = DTypeFromInt(input->second.dtype());
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("echo: input.dtype ", input->second.dtype(), " is not a dtype"));
  }
  const int outputs = std::max(request.outputs_size(), 1);
  int64_t total_bytes = 0;
  for (int i = 0; i < outputs; ++i) {
    const v1::OutputDesc* desc = i < request.outputs_size() ? &request.outputs(i) : nullptr;
    v1::Tensor* tensor = response->add_outputs();
    tensor->set_dtype(input->second.dtype());
    *tensor->mutable_sizes() =
        desc != nullptr && desc->sizes_size() > 0 ? desc->sizes() : input->second.sizes();
    *tensor->mutable_strides() = desc != nullptr && desc->strides_size() == tensor->sizes_size()
                                     ? desc->strides()
                                     : PackedStridesField(tensor->sizes());
    std::optional<int64_t> elements = SpannedElements(tensor->sizes(), tensor->strides());
    std::optional<int64_t> bytes =
        elements.has_value() ? CheckedMul(*elements, ElementSize(*dtype)) : std::nullopt;
    if (!bytes.has_value()) {
      response->clear_outputs();
      return absl::InvalidArgumentError(
          absl::StrCat("echo: outputs[", i, "] has a negative or overflowing size or stride"));
    }
    total_bytes += *bytes;
    if (total_bytes > max_output_bytes) {
      response->clear_outputs();
      return absl::ResourceExhaustedError(absl::StrCat(
          "echo: the outputs take more than the message limit of ", max_output_bytes, " bytes"));
    }
    tensor->mutable_data()->resize(static_cast<size_t>(*bytes));
  }
  response->set_id(request.id());
  response->set_backend("echo");
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* EchoService::Run(grpc::CallbackServerContext* context,
                                           const v1::RunRequest* request,
                                           v1::RunResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(FillEchoResponse(*request, max_output_bytes_, response)));
  return reactor;
}

}  // namespace tensorop::server
