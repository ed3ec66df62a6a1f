// The models: their registry and metadata, the v2 datatype names, and the
// answers made from the native pipeline's responses. A request's conversion
// into a native RunRequest is inference_requests.cc.
#include "server/v2/inference_models.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/attrs.h"
#include "core/checked_math.h"
#include "core/limits.h"
#include "core/operator_info.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "server/v2/inference_model_specs.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

// One model per row of kOperators: the operator's inputs, as data, then one
// INT64 parameter per field of its attributes message, required unless the
// row lets it default; split's model also takes the outputs' sizes along the
// axis ("split"), as ONNX's Split does.
ModelSpec ModelOf(const OperatorInfo& op) {
  ModelSpec model{.op = &op,
                  .name = op.name,
                  .field = v1::RunRequest::descriptor()->FindFieldByName(std::string(op.name))};
  for (absl::string_view name : op.input_names)
    model.inputs.push_back({.name = name, .data = true});
  // Numbered inputs: inputs_0 listed (required), the rest found by FindInput.
  if (op.numbered_inputs) model.inputs.push_back({.name = NumberedInputName(0), .data = true});
  const google::protobuf::Descriptor& attrs = *model.field->message_type();
  for (int i = 0; i < attrs.field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = attrs.field(i);
    // INT64 attributes, and text ones as one BYTES element; attributes of
    // other types have no parameter tensor yet (a test names them).
    const bool text = field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING &&
                      !field->is_repeated();
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT64 && !text) continue;
    const bool optional = std::find(op.optional_attrs.begin(), op.optional_attrs.end(),
                                    field->name()) != op.optional_attrs.end();
    model.inputs.push_back({.name = field->name(),
                            .required = !optional,
                            .scalar = !field->is_repeated(),
                            .text = text,
                            .attribute = field});
  }
  if (op.outputs == OutputRule::kOneOrMoreGiven) model.inputs.push_back({.name = kSplitSizesInput});
  return model;
}

const std::vector<ModelSpec>& Models() {
  static const std::vector<ModelSpec>* const models = [] {
    auto* models = new std::vector<ModelSpec>;
    for (const OperatorInfo& op : kOperators) models->push_back(ModelOf(op));
    return models;
  }();
  return *models;
}

}  // namespace

const ModelSpec* FindModel(absl::string_view name) {
  for (const ModelSpec& model : Models()) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

const TensorSpec* FindInput(const ModelSpec& model, absl::string_view name) {
  for (const TensorSpec& input : model.inputs) {
    if (input.name == name) return &input;
  }
  // Any further numbered input (join's inputs_1, ...): data, optional here;
  // core binds them, refusing gaps and more than kMaxNumberedInputs.
  static constexpr TensorSpec kFurtherNumbered{
      .name = "inputs_<k>", .required = false, .data = true};
  if (model.op->numbered_inputs && NumberedInputIndex(name).has_value()) return &kFurtherNumbered;
  return nullptr;
}

std::string InputNames(const ModelSpec& model) {
  std::vector<absl::string_view> names;
  for (const TensorSpec& input : model.inputs) {
    names.push_back(input.name);
    if (model.op->numbered_inputs && input.name == NumberedInputName(0)) {
      names.push_back("inputs_1, ... (numbered without gaps)");
    }
  }
  return absl::StrJoin(names, ", ");
}

std::vector<std::string> OutputNames(const ModelSpec& model, int count) {
  if (model.op->outputs != OutputRule::kOneOrMoreGiven) return {"output"};
  std::vector<std::string> names;
  for (int k = 0; k < count; ++k) names.push_back(absl::StrCat("output_", k));
  return names;
}

const std::vector<std::string>& InferenceModelNames() {
  static const std::vector<std::string>* const names = [] {
    auto* names = new std::vector<std::string>;
    for (const ModelSpec& model : Models()) names->emplace_back(model.name);
    return names;
  }();
  return *names;
}

absl::Status CheckModel(absl::string_view name, absl::string_view version) {
  if (FindModel(name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("model ", Quoted(name), " is not served here; models: ",
                                            absl::StrJoin(InferenceModelNames(), ", ")));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat("model ", Quoted(name), " has no version ",
                                            Quoted(version), "; its only version is \"",
                                            kModelVersion, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(absl::string_view name,
                                                               absl::string_view version) {
  RETURN_IF_ERROR(CheckModel(name, version));
  const ModelSpec& model = *FindModel(name);
  inference::ModelMetadataResponse response;
  response.set_name(std::string(name));
  response.add_versions(std::string(kModelVersion));
  response.set_platform("tensorop");
  for (const TensorSpec& spec : model.inputs) {
    auto* input = response.add_inputs();
    input->set_name(std::string(spec.name));
    // Data tensors take any rank and datatype: listed as one variable
    // dimension; parameters are INT64 (axis [1], the rest 1-D).
    input->set_datatype(spec.text                                 ? "BYTES"
                        : spec.data && spec.name != kIndicesInput ? "FP32"
                                                                  : "INT64");
    input->add_shape(spec.scalar ? 1 : -1);
  }
  // split has as many outputs as its `split` tensor has entries: listed as
  // output_0, the first of them.
  auto* output = response.add_outputs();
  output->set_name(OutputNames(model, 1)[0]);
  output->set_datatype("FP32");
  output->add_shape(-1);
  return response;
}

namespace {

// Triton's config data type of a v2 datatype name ("FP32" -> TYPE_FP32).
inference::DataType ConfigDataType(absl::string_view datatype) {
  if (datatype == "BYTES") return inference::TYPE_STRING;  // Triton's name for it
  inference::DataType type = inference::TYPE_INVALID;
  inference::DataType_Parse(absl::StrCat("TYPE_", datatype), &type);
  return type;
}

// The datatypes an input takes, as ToRunRequest accepts them.
std::string AcceptedDatatypes(const TensorSpec& spec) {
  if (spec.text) return "BYTES";
  if (!spec.data) return "INT64, INT32";
  if (spec.name == kIndicesInput) return "INT64, INT32, UINT64, UINT32";
  return V2DatatypeNames();
}

}  // namespace

absl::StatusOr<inference::ModelConfigResponse> ModelConfig(absl::string_view name,
                                                           absl::string_view version) {
  ASSIGN_OR_RETURN(const inference::ModelMetadataResponse metadata, ModelMetadata(name, version));
  const ModelSpec& model = *FindModel(name);
  inference::ModelConfigResponse response;
  inference::ModelConfig& config = *response.mutable_config();
  config.set_name(std::string(name));
  config.set_platform(metadata.platform());
  config.set_backend(metadata.platform());
  config.set_max_batch_size(0);
  auto& parameters = *config.mutable_parameters();
  const std::string data_rank = absl::StrCat("any rank from 1 to ", model.op->input_rank.max_rank);
  for (int i = 0; i < metadata.inputs_size(); ++i) {
    const auto& tensor = metadata.inputs(i);
    const TensorSpec& spec = model.inputs[static_cast<size_t>(i)];
    inference::ModelInput& input = *config.add_input();
    input.set_name(tensor.name());
    input.set_data_type(ConfigDataType(tensor.datatype()));
    input.mutable_dims()->Assign(tensor.shape().begin(), tensor.shape().end());
    input.set_optional(!spec.required);
    parameters[absl::StrCat(tensor.name(), ".datatypes")].set_string_value(AcceptedDatatypes(spec));
    parameters[absl::StrCat(tensor.name(), ".dims")].set_string_value(
        spec.scalar ? "[1]"
        : spec.data ? data_rank
                    : "[n], one entry per axis");
  }
  for (const auto& tensor : metadata.outputs()) {
    inference::ModelOutput& output = *config.add_output();
    output.set_name(tensor.name());
    output.set_data_type(ConfigDataType(tensor.datatype()));
    output.mutable_dims()->Assign(tensor.shape().begin(), tensor.shape().end());
    parameters[absl::StrCat(tensor.name(), ".datatypes")].set_string_value("the input's");
  }
  if (model.op->outputs == OutputRule::kOneOrMoreGiven) {
    parameters["outputs"].set_string_value(
        "output_0 ... output_{k-1}, one per entry of the split tensor");
  }
  if (model.op->numbered_inputs) {
    parameters["inputs"].set_string_value(
        absl::StrCat("inputs_0 ... inputs_{n-1}, one or more (at most ", kMaxNumberedInputs,
                     "), numbered without gaps, of one datatype; joined in that order"));
  }
  return response;
}

absl::string_view V2DatatypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return "FP64";
    case DType::kFloat32:
      return "FP32";
    case DType::kFloat16:
      return "FP16";
    case DType::kInt64:
      return "INT64";
    case DType::kInt32:
      return "INT32";
    case DType::kInt16:
      return "INT16";
    case DType::kInt8:
      return "INT8";
    case DType::kUint64:
      return "UINT64";
    case DType::kUint32:
      return "UINT32";
    case DType::kUint16:
      return "UINT16";
    case DType::kUint8:
      return "UINT8";
    case DType::kBfloat16:
      return "BF16";
    case DType::kBool:
      return "BOOL";
  }
  return "";
}

const std::string& V2DatatypeNames() {
  // Smallest first within each kind, as the protocol's table lists them.
  static const std::string* const names = [] {
    constexpr DType kListed[] = {DType::kBool,   DType::kUint8,   DType::kUint16,   DType::kUint32,
                                 DType::kUint64, DType::kInt8,    DType::kInt16,    DType::kInt32,
                                 DType::kInt64,  DType::kFloat16, DType::kBfloat16, DType::kFloat32,
                                 DType::kFloat64};
    static_assert(std::size(kListed) == std::size(kAllDTypes));
    std::vector<absl::string_view> each;
    for (DType dtype : kListed) each.push_back(V2DatatypeName(dtype));
    return new std::string(absl::StrJoin(each, ", "));
  }();
  return *names;
}

std::optional<DType> DTypeFromV2Datatype(absl::string_view datatype) {
  for (DType dtype : kAllDTypes) {
    if (V2DatatypeName(dtype) == datatype) return dtype;
  }
  return std::nullopt;
}

absl::StatusOr<ModelInferAnswer> ModelInferAnswerFor(const inference::ModelInferRequest& request,
                                                     const v1::RunResponse& response) {
  ModelInferAnswer result;
  inference::ModelInferResponse& answer = result.head;
  answer.set_model_name(request.model_name());
  answer.set_model_version(std::string(kModelVersion));
  answer.set_id(request.id());
  (*answer.mutable_parameters())[std::string(kBackendParameter)].set_string_param(
      response.backend());
  const ModelSpec* model = FindModel(request.model_name());
  if (model == nullptr) return CheckModel(request.model_name(), "");
  const std::vector<std::string> names = OutputNames(*model, response.outputs_size());
  if (names.size() != static_cast<size_t>(response.outputs_size())) {
    return absl::InternalError(absl::StrCat(request.model_name(), ": the run gave ",
                                            response.outputs_size(), " outputs, expected ",
                                            names.size()));
  }
  std::vector<int> order;  // indices into response.outputs()
  if (request.outputs_size() == 0) {
    for (int k = 0; k < response.outputs_size(); ++k) order.push_back(k);
  }
  for (int i = 0; i < request.outputs_size(); ++i) {
    const std::string& name = request.outputs(i).name();
    auto found = std::find(names.begin(), names.end(), name);
    if (found == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(request.model_name(), ": outputs[", i, "] ", Quoted(name),
                       " is not an output; ", "the outputs are ", absl::StrJoin(names, ", ")));
    }
    order.push_back(static_cast<int>(found - names.begin()));
  }
  for (int k : order) {
    const v1::Tensor& tensor = response.outputs(k);
    // Packed row-major: the native pipeline writes outputs so when the request
    // asks for no strides, as ToRunRequest's never do.
    // (An empty output has no elements to place.)
    const bool empty =
        std::find(tensor.sizes().begin(), tensor.sizes().end(), 0) != tensor.sizes().end();
    int64_t expected = 1;
    for (int d = tensor.sizes_size() - 1; d >= 0 && !empty; --d) {
      if (tensor.sizes(d) > 1 && tensor.strides_size() == tensor.sizes_size() &&
          tensor.strides(d) != expected) {
        return absl::InternalError(
            absl::StrCat(request.model_name(), ": output ", names[k], " is not packed row-major"));
      }
      expected *= tensor.sizes(d);
    }
    auto* output = answer.add_outputs();
    output->set_name(names[static_cast<size_t>(k)]);
    std::optional<DType> dtype = DTypeFromInt(tensor.dtype());
    output->set_datatype(std::string(dtype.has_value() ? V2DatatypeName(*dtype) : ""));
    output->mutable_shape()->Assign(tensor.sizes().begin(), tensor.sizes().end());
    // An output written into shared memory says where, as Triton's do; its
    // raw_output_contents entry stays empty (keeping the entries in step with
    // `outputs`).
    for (const auto& asked : request.outputs()) {
      if (asked.name() != output->name() ||
          !asked.parameters().contains(std::string(kSharedMemoryRegionParameter))) {
        continue;
      }
      for (absl::string_view name : {kSharedMemoryRegionParameter, kSharedMemoryByteSizeParameter,
                                     kSharedMemoryOffsetParameter}) {
        auto found = asked.parameters().find(std::string(name));
        if (found != asked.parameters().end()) {
          (*output->mutable_parameters())[std::string(name)] = found->second;
        }
      }
      break;
    }
  }
  result.contents = std::move(order);
  return result;
}

absl::StatusOr<inference::ModelInferResponse> ToModelInferResponse(
    const inference::ModelInferRequest& request, v1::RunResponse& response) {
  ASSIGN_OR_RETURN(ModelInferAnswer answer, ModelInferAnswerFor(request, response));
  for (int k : answer.contents) {
    std::string& data = *response.mutable_outputs(k)->mutable_data();
    // Moved, not copied, unless the client repeats a name, which then gets a copy.
    if (std::count(answer.contents.begin(), answer.contents.end(), k) > 1) {
      answer.head.add_raw_output_contents(data);
    } else {
      *answer.head.add_raw_output_contents() = std::move(data);
    }
  }
  return std::move(answer.head);
}

absl::Status NameSharedMemoryOutput(const inference::ModelInferRequest& request,
                                    const absl::Status& status) {
  // The native messages start "outputs[<k>].shared_memory: ".
  const absl::string_view message = status.message();
  if (status.ok() || !absl::StartsWith(message, "outputs[")) return status;
  const size_t close = message.find("].shared_memory");
  int k = 0;
  if (close == absl::string_view::npos || !absl::SimpleAtoi(message.substr(8, close - 8), &k) ||
      k < 0) {
    return status;
  }
  const ModelSpec* model = FindModel(request.model_name());
  if (model == nullptr) return status;
  const std::string name = OutputNames(*model, k + 1).back();
  return absl::Status(status.code(),
                      absl::StrCat(request.model_name(), ": output \"", name, "\": ", message));
}

}  // namespace tensorop::server
