// The v2 HTTP/REST JSON bodies, both ways. A tensor's `data` values are
// json_tensor_data.cc's.
#include "server/v2/inference_http_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "server/v2/bounded_json.h"
#include "server/v2/inference_models.h"
#include "server/v2/json_tensor_data.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

using Json = nlohmann::json;

// nlohmann's error text names the byte offset: useful as it is.
absl::Status JsonError(absl::string_view model, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(CutForMessage(model), ": ", what));
}

// A JSON parameters object into a protobuf parameter map; binary extension
// keys (`skip`) stay out.
absl::Status ToParameters(const Json& parameters, absl::string_view what,
                          google::protobuf::Map<std::string, inference::InferParameter>& out) {
  if (!parameters.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " parameters is not a JSON object"));
  }
  for (const auto& [key, value] : parameters.items()) {
    if (key == "binary_data_output" || key == "binary_data" || key == "binary_data_size") {
      continue;
    }
    inference::InferParameter& p = out[key];
    if (value.is_boolean()) {
      p.set_bool_param(value.get<bool>());
    } else if (value.is_number_integer() &&
               (!value.is_number_unsigned() ||
                value.get<uint64_t>() <=
                    static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      // nlohmann reads every non-negative integer as unsigned; as Triton, an
      // integer is an int64 (shared_memory_offset/byte_size must be), a
      // uint64 only past 2^63 - 1.
      p.set_int64_param(value.get<int64_t>());
    } else if (value.is_number_unsigned()) {
      p.set_uint64_param(value.get<uint64_t>());
    } else if (value.is_number_float()) {
      p.set_double_param(value.get<double>());
    } else if (value.is_string()) {
      p.set_string_param(value.get<std::string>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(what, " parameter ", Quoted(key), " = ",
                                                     QuoteJson(value),
                                                     " is not a bool, number or string"));
    }
  }
  return absl::OkStatus();
}

Json FromParameters(const google::protobuf::Map<std::string, inference::InferParameter>& map) {
  Json out = Json::object();
  for (const auto& [key, p] : map) {
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam:
        out[key] = p.bool_param();
        break;
      case inference::InferParameter::kInt64Param:
        out[key] = p.int64_param();
        break;
      case inference::InferParameter::kStringParam:
        out[key] = p.string_param();
        break;
      case inference::InferParameter::kDoubleParam:
        out[key] = p.double_param();
        break;
      case inference::InferParameter::kUint64Param:
        out[key] = p.uint64_param();
        break;
      default:
        break;
    }
  }
  return out;
}

}  // namespace

namespace {

// The binary part of a request body (after the JSON, Inference-Header-
// Content-Length bytes in), handed to the inputs in order.
struct BinaryPart {
  bool announced = false;  // the header was given
  absl::string_view bytes;
  size_t taken = 0;
};

// The request's "id" and "parameters" into `parsed`.
absl::Status ReadRequestFields(const Json& json, absl::string_view model,
                               HttpInferRequest& parsed) {
  inference::ModelInferRequest& request = parsed.request;
  if (json.contains("id")) {
    if (!json["id"].is_string()) return JsonError(model, "\"id\" is not a string");
    const std::string& id = json["id"].get_ref<const std::string&>();
    RETURN_IF_ERROR(CheckIdBytes(id, absl::StrCat(model, ": \"id\"")));
    request.set_id(id);
  }
  if (!json.contains("parameters")) return absl::OkStatus();
  const Json& parameters = json["parameters"];
  RETURN_IF_ERROR(ToParameters(parameters, absl::StrCat(model, ": the request's"),
                               *request.mutable_parameters()));
  if (parameters.contains("binary_data_output")) {
    if (!parameters["binary_data_output"].is_boolean()) {
      return JsonError(model, "parameters.binary_data_output is not true or false");
    }
    parsed.binary_default = parameters["binary_data_output"].get<bool>();
  }
  return absl::OkStatus();
}

// Input `input`'s name, datatype, shape and parameters into `tensor`
// (`at`: how to name it before its name is known); its
// parameters.binary_data_size when given.
absl::StatusOr<std::optional<int64_t>> ReadInputHead(
    const Json& input, absl::string_view model, const std::string& at,
    inference::ModelInferRequest::InferInputTensor& tensor) {
  if (!input.contains("name") || !input["name"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(at, " has no \"name\" string"));
  }
  const std::string name = input["name"].get<std::string>();
  const std::string what = absl::StrCat(CutForMessage(model), ": input ", Quoted(name));
  if (!input.contains("datatype") || !input["datatype"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no \"datatype\" string"));
  }
  if (!input.contains("shape") || !input["shape"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no \"shape\" array"));
  }
  tensor.set_name(name);
  tensor.set_datatype(input["datatype"].get<std::string>());
  int d = 0;
  for (const Json& size : input["shape"]) {
    if (!size.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape[", d, "] = ", QuoteJson(size), " is not an integer"));
    }
    tensor.add_shape(size.get<int64_t>());
    ++d;
  }
  std::optional<int64_t> binary_size;
  if (!input.contains("parameters")) return binary_size;
  const Json& parameters = input["parameters"];
  RETURN_IF_ERROR(ToParameters(parameters, what, *tensor.mutable_parameters()));
  if (parameters.contains("binary_data_size")) {
    if (!parameters["binary_data_size"].is_number_integer() ||
        parameters["binary_data_size"].get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": parameters.binary_data_size = ", QuoteJson(parameters["binary_data_size"]),
          " is not a size"));
    }
    binary_size = parameters["binary_data_size"].get<int64_t>();
  }
  return binary_size;
}

// Input `input`'s "data" values, of `tensor`'s datatype, as raw bytes in
// `bytes`, reserved before they are made.
absl::Status ReadInputData(const Json& input,
                           const inference::ModelInferRequest::InferInputTensor& tensor,
                           const std::string& what, const JsonReserve& reserve_raw,
                           std::string& bytes) {
  // An unknown datatype keeps no bytes: the model conversion refuses it by
  // name, as for gRPC.
  if (const std::optional<DType> dtype = DTypeFromV2Datatype(tensor.datatype())) {
    const int64_t raw = JsonLeafCount(input["data"]) * ElementSize(*dtype);
    RETURN_IF_ERROR(reserve_raw(raw));
    bytes.reserve(static_cast<size_t>(raw));
    return AppendJsonData(input["data"], *dtype, what, bytes);
  }
  if (tensor.datatype() != "BYTES") return absl::OkStatus();
  // Text parameters: each string as Triton serializes BYTES, its 4-byte
  // little-endian length, then its bytes.
  const Json& data = input["data"];
  const Json* leaf = data.is_array() && data.size() == 1 ? &data[0] : &data;
  if (!leaf->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"data\" = ", QuoteJson(data),
                                                   " is not one string (BYTES, shape [1])"));
  }
  const std::string& text = leaf->get_ref<const std::string&>();
  const uint32_t length = static_cast<uint32_t>(text.size());  // within the body's size
  RETURN_IF_ERROR(reserve_raw(static_cast<int64_t>(sizeof length + text.size())));
  bytes.append(reinterpret_cast<const char*>(&length), sizeof length);
  bytes.append(text);
  return absl::OkStatus();
}

// Input `input`'s bytes, `tensor` read (ReadInputHead), as a raw_input_contents
// entry of `request`: from the binary part (`binary_size` of them) or from
// "data"; none for an input in shared memory, whose parameters say where it
// is (ToRunRequest reads them), as over gRPC.
absl::Status ReadInputBytes(const Json& input,
                            const inference::ModelInferRequest::InferInputTensor& tensor,
                            std::optional<int64_t> binary_size, absl::string_view model,
                            BinaryPart& binary, const JsonReserve& reserve_raw,
                            inference::ModelInferRequest& request) {
  const std::string what = absl::StrCat(CutForMessage(model), ": input ", Quoted(tensor.name()));
  if (tensor.parameters().contains(std::string(kSharedMemoryRegionParameter))) {
    if (input.contains("data") || binary_size.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has both parameters.", kSharedMemoryRegionParameter, " and ",
                       input.contains("data") ? "\"data\"" : "parameters.binary_data_size"));
    }
    return absl::OkStatus();
  }
  std::string& bytes = *request.add_raw_input_contents();
  if (!binary_size.has_value()) {
    if (!input.contains("data")) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has neither \"data\" nor parameters.binary_data_size"));
    }
    return ReadInputData(input, tensor, what, reserve_raw, bytes);
  }
  if (input.contains("data")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has both \"data\" and parameters.binary_data_size"));
  }
  if (!binary.announced) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has parameters.binary_data_size but the request has no ",
                     kInferenceHeaderContentLength, " header"));
  }
  if (static_cast<uint64_t>(*binary_size) > binary.bytes.size() - binary.taken) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": parameters.binary_data_size = ", *binary_size, " but only ",
                     binary.bytes.size() - binary.taken, " binary bytes are left in the request"));
  }
  const absl::string_view part =
      binary.bytes.substr(binary.taken, static_cast<size_t>(*binary_size));
  RETURN_IF_ERROR(reserve_raw(static_cast<int64_t>(part.size())));
  bytes.assign(part.data(), part.size());
  binary.taken += part.size();
  return absl::OkStatus();
}

// The request's "outputs" into `parsed`.
absl::Status ReadOutputs(const Json& json, absl::string_view model, HttpInferRequest& parsed) {
  if (!json.contains("outputs")) return absl::OkStatus();
  if (!json["outputs"].is_array()) return JsonError(model, "\"outputs\" is not an array");
  int k = 0;
  for (const Json& output : json["outputs"]) {
    if (!output.is_object() || !output.contains("name") || !output["name"].is_string()) {
      return JsonError(model, absl::StrCat("outputs[", k, "] has no \"name\" string"));
    }
    auto& asked = *parsed.request.add_outputs();
    asked.set_name(output["name"].get<std::string>());
    if (output.contains("parameters")) {
      const Json& parameters = output["parameters"];
      RETURN_IF_ERROR(ToParameters(
          parameters, absl::StrCat(CutForMessage(model), ": output ", Quoted(asked.name())),
          *asked.mutable_parameters()));
      if (parameters.contains("binary_data")) {
        if (!parameters["binary_data"].is_boolean()) {
          return JsonError(model, absl::StrCat("output ", Quoted(asked.name()),
                                               ": parameters.binary_data is not true or "
                                               "false"));
        }
        parsed.binary_outputs[asked.name()] = parameters["binary_data"].get<bool>();
      }
    }
    ++k;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(absl::string_view model,
                                                       absl::string_view version,
                                                       absl::string_view body,
                                                       std::optional<int64_t> header_length,
                                                       const JsonReserve& reserve) {
  absl::string_view json_text = body;
  BinaryPart binary;
  binary.announced = header_length.has_value();
  if (header_length.has_value()) {
    if (*header_length < 0 || static_cast<uint64_t>(*header_length) > body.size()) {
      return JsonError(model, absl::StrCat(kInferenceHeaderContentLength, " ", *header_length,
                                           " is not within the body's ", body.size(), " bytes"));
    }
    json_text = body.substr(0, static_cast<size_t>(*header_length));
    binary.bytes = body.substr(static_cast<size_t>(*header_length));
  }
  ASSIGN_OR_RETURN(
      const Json json,
      ParseBoundedJson(json_text, absl::StrCat(CutForMessage(model), ": the request"), reserve));
  if (!json.is_object()) return JsonError(model, "the request is not a JSON object");
  // The raw bytes the inputs become, reserved before they are made.
  const JsonReserve reserve_raw = [&](int64_t bytes) {
    return reserve ? reserve(bytes) : absl::OkStatus();
  };

  HttpInferRequest parsed;
  inference::ModelInferRequest& request = parsed.request;
  request.set_model_name(std::string(model));
  request.set_model_version(std::string(version));
  RETURN_IF_ERROR(ReadRequestFields(json, model, parsed));
  if (!json.contains("inputs") || !json["inputs"].is_array()) {
    return JsonError(model, "the request has no \"inputs\" array");
  }
  int i = 0;
  for (const Json& input : json["inputs"]) {
    if (!input.is_object()) {
      return JsonError(model, absl::StrCat("inputs[", i, "] is not an object"));
    }
    auto& tensor = *request.add_inputs();
    ASSIGN_OR_RETURN(
        const std::optional<int64_t> binary_size,
        ReadInputHead(input, model, absl::StrCat(CutForMessage(model), ": inputs[", i, "]"),
                      tensor));
    RETURN_IF_ERROR(
        ReadInputBytes(input, tensor, binary_size, model, binary, reserve_raw, request));
    ++i;
  }
  if (binary.taken != binary.bytes.size()) {
    return JsonError(model, absl::StrCat("the request has ", binary.bytes.size() - binary.taken,
                                         " binary bytes that no input's binary_data_size claims"));
  }
  RETURN_IF_ERROR(ReadOutputs(json, model, parsed));
  return parsed;
}

absl::StatusOr<HttpBody> RenderHttpInferResponse(const HttpInferRequest& asked,
                                                 const inference::ModelInferResponse& response) {
  Json json = Json::object();
  json["model_name"] = response.model_name();
  json["model_version"] = response.model_version();
  if (!response.id().empty()) json["id"] = response.id();
  if (!response.parameters().empty()) json["parameters"] = FromParameters(response.parameters());
  // The outputs are written after the rest, each entry's data as text of its
  // own (DataJsonText: NaN and infinities as Triton writes them).
  std::vector<std::string> outputs;
  std::string binary;
  bool any_binary = false;
  for (int k = 0; k < response.outputs_size(); ++k) {
    const auto& output = response.outputs(k);
    absl::string_view bytes;
    if (k < response.raw_output_contents_size()) bytes = response.raw_output_contents(k);
    Json entry = Json::object();
    entry["name"] = output.name();
    entry["datatype"] = output.datatype();
    entry["shape"] = Json::array();
    for (int64_t size : output.shape()) entry["shape"].push_back(size);
    // Written into shared memory: where (its request's parameters), no data.
    if (output.parameters().contains(std::string(kSharedMemoryRegionParameter))) {
      entry["parameters"] = FromParameters(output.parameters());
      outputs.push_back(DumpJson(entry));
      continue;
    }
    std::string data;
    auto flag = asked.binary_outputs.find(output.name());
    const bool as_binary = flag != asked.binary_outputs.end() ? flag->second : asked.binary_default;
    if (as_binary) {
      entry["parameters"] = Json::object({{"binary_data_size", bytes.size()}});
      binary.append(bytes.data(), bytes.size());
      any_binary = true;
    } else {
      const std::optional<DType> dtype = DTypeFromV2Datatype(output.datatype());
      if (!dtype.has_value()) {
        return absl::InternalError(absl::StrCat(response.model_name(), ": output \"", output.name(),
                                                "\" has datatype \"", output.datatype(),
                                                "\", which has no JSON form"));
      }
      data = DataJsonText(bytes, *dtype);
    }
    // "data" first, where nlohmann's sorted keys put it (the entry has a name).
    std::string text = DumpJson(entry);
    if (!data.empty()) text = absl::StrCat("{\"data\":", data, ",", text.substr(1));
    outputs.push_back(std::move(text));
  }
  // The body as nlohmann writes it (keys sorted: "outputs" before
  // "parameters", after the rest), the outputs' text put in its place.
  Json parameters;
  if (json.contains("parameters")) {
    parameters = std::move(json["parameters"]);
    json.erase("parameters");
  }
  HttpBody out;
  out.body = DumpJson(json);  // never empty: it has the model's name
  out.body.pop_back();
  absl::StrAppend(&out.body, ",\"outputs\":[", absl::StrJoin(outputs, ","), "]");
  if (!parameters.is_null()) absl::StrAppend(&out.body, ",\"parameters\":", DumpJson(parameters));
  out.body += '}';
  if (any_binary) {
    out.header_length = out.body.size();
    out.body.append(binary);
    out.content_type = "application/octet-stream";
  } else {
    out.content_type = "application/json";
  }
  return out;
}

std::string HttpErrorJson(const absl::Status& status) {
  return DumpJson(Json::object({{"error", std::string(status.message())}}));
}

std::string ServerMetadataJson(const inference::ServerMetadataResponse& metadata) {
  Json json = Json::object();
  json["name"] = metadata.name();
  json["version"] = metadata.version();
  json["extensions"] = Json::array();
  for (const std::string& extension : metadata.extensions())
    json["extensions"].push_back(extension);
  return DumpJson(json);
}

namespace {
Json TensorsJson(
    const google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>&
        tensors) {
  Json out = Json::array();
  for (const auto& tensor : tensors) {
    Json entry = Json::object();
    entry["name"] = tensor.name();
    entry["datatype"] = tensor.datatype();
    entry["shape"] = Json::array();
    for (int64_t size : tensor.shape()) entry["shape"].push_back(size);
    out.push_back(std::move(entry));
  }
  return out;
}
}  // namespace

std::string ModelMetadataJson(const inference::ModelMetadataResponse& metadata) {
  Json json = Json::object();
  json["name"] = metadata.name();
  json["versions"] = Json::array();
  for (const std::string& version : metadata.versions()) json["versions"].push_back(version);
  json["platform"] = metadata.platform();
  json["inputs"] = TensorsJson(metadata.inputs());
  json["outputs"] = TensorsJson(metadata.outputs());
  return DumpJson(json);
}

std::string ModelConfigJson(const inference::ModelConfig& config) {
  const auto tensor = [](const auto& item) {
    Json json = Json::object({{"name", item.name()},
                              {"data_type", inference::DataType_Name(item.data_type())},
                              {"dims", Json::array()}});
    for (int64_t dim : item.dims()) json["dims"].push_back(dim);
    return json;
  };
  Json json = Json::object({{"name", config.name()},
                            {"platform", config.platform()},
                            {"backend", config.backend()},
                            {"max_batch_size", config.max_batch_size()},
                            {"input", Json::array()},
                            {"output", Json::array()},
                            {"parameters", Json::object()}});
  for (const auto& input : config.input()) {
    json["input"].push_back(tensor(input));
    if (input.optional()) json["input"].back()["optional"] = true;
  }
  for (const auto& output : config.output()) json["output"].push_back(tensor(output));
  for (const auto& [key, value] : config.parameters()) {
    json["parameters"][key] = Json::object({{"string_value", value.string_value()}});
  }
  return DumpJson(json);
}

std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& index) {
  Json json = Json::array();
  for (const auto& model : index.models()) {
    json.push_back(Json::object({{"name", model.name()},
                                 {"version", model.version()},
                                 {"state", model.state()},
                                 {"reason", model.reason()}}));
  }
  return DumpJson(json);
}

std::string ModelStatisticsJson(const inference::ModelStatisticsResponse& statistics) {
  Json models = Json::array();
  for (const auto& stats : statistics.model_stats()) {
    const auto& inference = stats.inference_stats();
    auto duration = [](const inference::StatisticDuration& d) {
      return Json::object({{"count", d.count()}, {"ns", d.ns()}});
    };
    models.push_back(
        Json::object({{"name", stats.name()},
                      {"version", stats.version()},
                      {"last_inference", stats.last_inference()},
                      {"inference_count", stats.inference_count()},
                      {"execution_count", stats.execution_count()},
                      {"inference_stats",
                       Json::object({{"success", duration(inference.success())},
                                     {"fail", duration(inference.fail())},
                                     {"queue", duration(inference.queue())},
                                     {"compute_input", duration(inference.compute_input())},
                                     {"compute_infer", duration(inference.compute_infer())},
                                     {"compute_output", duration(inference.compute_output())}})}}));
  }
  return DumpJson(Json::object({{"model_stats", models}}));
}

absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> ParseSystemSharedMemoryRegister(
    absl::string_view name, absl::string_view body) {
  const std::string what = absl::StrCat("register shared memory region ", Quoted(name));
  if (body.size() > kMaxRegisterBodyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the body of ", body.size(), " bytes is over the ", kMaxRegisterBodyBytes,
        " bytes a {\"key\", \"offset\", \"byte_size\"} object may take"));
  }
  absl::StatusOr<Json> parsed = ParseBoundedJson(body, what, nullptr);
  if (!parsed.ok() && NestsTooDeep(parsed.status())) {
    return parsed.status();
  }
  if (!parsed.ok() || !parsed->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the body is not a JSON object {\"key\", \"offset\", \"byte_size\"}"));
  }
  const Json json = *std::move(parsed);
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(std::string(name));
  if (!json.contains("key") || !json["key"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"key\" is not a string"));
  }
  request.set_key(json["key"].get<std::string>());
  // A size; past 2^63 - 1 it is kept, for the gRPC call's own message.
  auto size = [&](const char* field, bool required) -> absl::StatusOr<uint64_t> {
    if (!json.contains(field)) {
      if (!required) return 0;  // as the protocol's default
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"", field, "\" is missing"));
    }
    const Json& value = json[field];
    if (!value.is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"", field, "\" = ", QuoteJson(value),
                                                     " is not a non-negative integer"));
    }
    return value.get<uint64_t>();
  };
  ASSIGN_OR_RETURN(const uint64_t offset, size("offset", /*required=*/false));
  ASSIGN_OR_RETURN(const uint64_t byte_size, size("byte_size", /*required=*/true));
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  return request;
}

std::string SystemSharedMemoryStatusJson(
    const inference::SystemSharedMemoryStatusResponse& status) {
  // By name: the protocol's map has no order.
  std::map<std::string, const inference::SystemSharedMemoryStatusResponse::RegionStatus*> sorted;
  for (const auto& [name, region] : status.regions()) sorted[name] = &region;
  Json json = Json::array();
  for (const auto& [name, region] : sorted) {
    json.push_back(Json::object({{"name", region->name()},
                                 {"key", region->key()},
                                 {"offset", region->offset()},
                                 {"byte_size", region->byte_size()}}));
  }
  return DumpJson(json);
}

}  // namespace tensorop::server
