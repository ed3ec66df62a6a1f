// The v2 HTTP/REST JSON bodies, both ways. (About 630 lines, past the
// project's ~600: requests read and answers written share the datatype sizes
// and the parameter and float16 conversions, which must stay in step.)
#include "server/v2/inference_http_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/v2/bounded_json.h"
#include "server/v2/inference_models.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

using Json = nlohmann::json;

// nlohmann's error text names the byte offset: useful as it is.
absl::Status JsonError(absl::string_view model, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(CutForMessage(model), ": ", what));
}

template <typename T>
void Append(T value, std::string& out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Appends JSON value `v` (element `index` of `what`) as `dtype`.
absl::Status AppendElement(const Json& v, DType dtype, absl::string_view what, int64_t index,
                           std::string& out) {
  const absl::string_view datatype = V2DatatypeName(dtype);
  auto refuse = [&](absl::string_view expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " data[", index, "] = ", QuoteJson(v), " is not ", expected));
  };
  auto integer = [&]<typename T>(T*) -> absl::Status {
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (!std::in_range<T>(x)) return refuse(absl::StrCat("a ", datatype));
      Append(static_cast<T>(x), out);
    } else if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (!std::in_range<T>(x)) return refuse(absl::StrCat("a ", datatype));
      Append(static_cast<T>(x), out);
    } else {
      return refuse(absl::StrCat("an integer (", datatype, ")"));
    }
    return absl::OkStatus();
  };
  // A 16-bit float, refused where it overflows what `v` says.
  auto narrow = [&](uint16_t bits, uint16_t infinity) -> absl::Status {
    const double x = v.get<double>();
    if (std::isfinite(x) && (bits & infinity) == infinity) {
      return refuse(absl::StrCat("within ", datatype, "'s range"));
    }
    Append(bits, out);
    return absl::OkStatus();
  };
  switch (dtype) {
    case DType::kBool:
      if (!v.is_boolean()) return refuse("true or false (BOOL)");
      out.push_back(v.get<bool>() ? 1 : 0);
      return absl::OkStatus();
    case DType::kInt8:
      return integer(static_cast<int8_t*>(nullptr));
    case DType::kInt16:
      return integer(static_cast<int16_t*>(nullptr));
    case DType::kInt32:
      return integer(static_cast<int32_t*>(nullptr));
    case DType::kInt64:
      return integer(static_cast<int64_t*>(nullptr));
    case DType::kUint8:
      return integer(static_cast<uint8_t*>(nullptr));
    case DType::kUint16:
      return integer(static_cast<uint16_t*>(nullptr));
    case DType::kUint32:
      return integer(static_cast<uint32_t*>(nullptr));
    case DType::kUint64:
      return integer(static_cast<uint64_t*>(nullptr));
    case DType::kFloat64:
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBfloat16:
      break;
  }
  if (!v.is_number()) return refuse(absl::StrCat("a number (", datatype, ")"));
  const double x = v.get<double>();
  if (dtype == DType::kFloat64) {
    Append(x, out);
  } else if (dtype == DType::kFloat32) {
    if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
      return refuse("within FP32's range");
    }
    Append(static_cast<float>(x), out);
  } else if (dtype == DType::kBfloat16) {
    return narrow(DoubleToBfloat16(x), 0x7f80);
  } else {
    return narrow(DoubleToHalf(x), 0x7c00);
  }
  return absl::OkStatus();
}

// Every element of `data` (flat or nested arrays: the parse bounded their
// depth), row-major.
absl::Status AppendData(const Json& data, DType dtype, absl::string_view what, int64_t& index,
                        std::string& out) {
  if (data.is_array()) {
    for (const Json& item : data) {
      RETURN_IF_ERROR(AppendData(item, dtype, what, index, out));
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(AppendElement(data, dtype, what, index, out));
  ++index;
  return absl::OkStatus();
}

// The values that are no arrays in `data`, however nested (the parse bounded
// the depth).
int64_t LeafCount(const Json& data) {
  if (!data.is_array()) return 1;
  int64_t count = 0;
  for (const Json& item : data) count += LeafCount(item);
  return count;
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

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// `bytes` as a flat JSON array of `dtype` elements.
Json DataJson(absl::string_view bytes, DType dtype) {
  Json data = Json::array();
  auto each = [&]<typename T>(T*) {
    for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
      data.push_back(Load<T>(bytes.data() + i));
    }
  };
  auto each_narrow = [&](double (*to_double)(uint16_t)) {
    for (size_t i = 0; i + 2 <= bytes.size(); i += 2) {
      data.push_back(to_double(Load<uint16_t>(bytes.data() + i)));
    }
  };
  switch (dtype) {
    case DType::kBool:
      for (char c : bytes) data.push_back(c != 0);
      break;
    case DType::kInt8:
      each(static_cast<int8_t*>(nullptr));
      break;
    case DType::kInt16:
      each(static_cast<int16_t*>(nullptr));
      break;
    case DType::kInt32:
      each(static_cast<int32_t*>(nullptr));
      break;
    case DType::kInt64:
      each(static_cast<int64_t*>(nullptr));
      break;
    case DType::kUint8:
      each(static_cast<uint8_t*>(nullptr));
      break;
    case DType::kUint16:
      each(static_cast<uint16_t*>(nullptr));
      break;
    case DType::kUint32:
      each(static_cast<uint32_t*>(nullptr));
      break;
    case DType::kUint64:
      each(static_cast<uint64_t*>(nullptr));
      break;
    case DType::kFloat32:
      each(static_cast<float*>(nullptr));
      break;
    case DType::kFloat64:
      each(static_cast<double*>(nullptr));
      break;
    case DType::kFloat16:
      each_narrow(&HalfToDouble);
      break;
    case DType::kBfloat16:
      each_narrow(&Bfloat16ToDouble);
      break;
  }
  return data;
}

}  // namespace

namespace {

// Rounds `value` to nearest-even in the 16-bit float format of `exponent_bits`
// and `mantissa_bits` (1 + exponent_bits + mantissa_bits = 16); a NaN stays a
// (quiet) NaN.
uint16_t DoubleToFloat16Format(double value, int exponent_bits, int mantissa_bits) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 48) & 0x8000);
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  const int max_exponent = (1 << exponent_bits) - 1;
  const uint16_t infinity = static_cast<uint16_t>(max_exponent << mantissa_bits);
  const uint16_t quiet = static_cast<uint16_t>(1 << (mantissa_bits - 1));
  if (exponent == 0x7ff) return sign | infinity | (mantissa != 0 ? quiet : 0);  // inf, NaN
  if (exponent == 0) return sign;  // zero or a double subnormal: far below the format's
  const int e = exponent - 1023 + (max_exponent >> 1);  // the format's biased exponent
  if (e >= max_exponent) return sign | infinity;
  const uint64_t significand = mantissa | (uint64_t{1} << 52);
  // Normal values keep mantissa_bits + 1 significant bits; subnormal ones fewer.
  const int shift = 52 - mantissa_bits + (e >= 1 ? 0 : 1 - e);
  if (shift > 53) return sign;  // below half the smallest subnormal
  uint64_t rounded = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t halfway = uint64_t{1} << (shift - 1);
  if (rest > halfway || (rest == halfway && (rounded & 1) != 0)) ++rounded;
  // The implicit bit carries into the exponent field, as does a rounding
  // overflow of the mantissa.
  uint64_t result = e >= 1 ? (static_cast<uint64_t>(e - 1) << mantissa_bits) + rounded : rounded;
  if (result >= infinity) result = infinity;
  return static_cast<uint16_t>(sign | result);
}

}  // namespace

uint16_t DoubleToHalf(double value) { return DoubleToFloat16Format(value, 5, 10); }

uint16_t DoubleToBfloat16(double value) { return DoubleToFloat16Format(value, 8, 7); }

double Bfloat16ToDouble(uint16_t bits) {
  float value;
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

double HalfToDouble(uint16_t half) {
  const double sign = (half & 0x8000) != 0 ? -1.0 : 1.0;
  const int exponent = (half >> 10) & 0x1f;
  const int mantissa = half & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

absl::StatusOr<HttpInferRequest> ParseHttpInferRequest(absl::string_view model,
                                                       absl::string_view version,
                                                       absl::string_view body,
                                                       std::optional<int64_t> header_length,
                                                       const JsonReserve& reserve) {
  absl::string_view json_text = body;
  absl::string_view binary;
  if (header_length.has_value()) {
    if (*header_length < 0 || static_cast<uint64_t>(*header_length) > body.size()) {
      return JsonError(model, absl::StrCat(kInferenceHeaderContentLength, " ", *header_length,
                                           " is not within the body's ", body.size(), " bytes"));
    }
    json_text = body.substr(0, static_cast<size_t>(*header_length));
    binary = body.substr(static_cast<size_t>(*header_length));
  }
  ASSIGN_OR_RETURN(
      const Json json,
      ParseBoundedJson(json_text, absl::StrCat(CutForMessage(model), ": the request"), reserve));
  if (!json.is_object()) return JsonError(model, "the request is not a JSON object");
  // The raw bytes the inputs become, reserved before they are made.
  auto reserve_raw = [&](int64_t bytes) { return reserve ? reserve(bytes) : absl::OkStatus(); };

  HttpInferRequest parsed;
  inference::ModelInferRequest& request = parsed.request;
  request.set_model_name(std::string(model));
  request.set_model_version(std::string(version));
  if (json.contains("id")) {
    if (!json["id"].is_string()) return JsonError(model, "\"id\" is not a string");
    const std::string& id = json["id"].get_ref<const std::string&>();
    RETURN_IF_ERROR(CheckIdBytes(id, absl::StrCat(model, ": \"id\"")));
    request.set_id(id);
  }
  if (json.contains("parameters")) {
    const Json& parameters = json["parameters"];
    RETURN_IF_ERROR(ToParameters(parameters, absl::StrCat(model, ": the request's"),
                                 *request.mutable_parameters()));
    if (parameters.contains("binary_data_output")) {
      if (!parameters["binary_data_output"].is_boolean()) {
        return JsonError(model, "parameters.binary_data_output is not true or false");
      }
      parsed.binary_default = parameters["binary_data_output"].get<bool>();
    }
  }
  if (!json.contains("inputs") || !json["inputs"].is_array()) {
    return JsonError(model, "the request has no \"inputs\" array");
  }
  size_t binary_offset = 0;
  int i = 0;
  for (const Json& input : json["inputs"]) {
    const std::string at = absl::StrCat(CutForMessage(model), ": inputs[", i, "]");
    if (!input.is_object())
      return JsonError(model, absl::StrCat("inputs[", i, "] is not an object"));
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
    auto& tensor = *request.add_inputs();
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
    if (input.contains("parameters")) {
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
    }
    // An input in shared memory (the system shared memory extension) has no
    // bytes here and, as over gRPC, no raw_input_contents entry: its
    // parameters say where it is (ToRunRequest reads them).
    if (tensor.parameters().contains(std::string(kSharedMemoryRegionParameter))) {
      if (input.contains("data") || binary_size.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " has both parameters.", kSharedMemoryRegionParameter, " and ",
                         input.contains("data") ? "\"data\"" : "parameters.binary_data_size"));
      }
      ++i;
      continue;
    }
    std::string& bytes = *request.add_raw_input_contents();
    if (binary_size.has_value()) {
      if (input.contains("data")) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " has both \"data\" and parameters.binary_data_size"));
      }
      if (!header_length.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " has parameters.binary_data_size but the request has no ",
                         kInferenceHeaderContentLength, " header"));
      }
      if (static_cast<uint64_t>(*binary_size) > binary.size() - binary_offset) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": parameters.binary_data_size = ", *binary_size, " but only ",
                         binary.size() - binary_offset, " binary bytes are left in the request"));
      }
      const absl::string_view part =
          binary.substr(binary_offset, static_cast<size_t>(*binary_size));
      RETURN_IF_ERROR(reserve_raw(static_cast<int64_t>(part.size())));
      bytes.assign(part.data(), part.size());
      binary_offset += static_cast<size_t>(*binary_size);
    } else if (input.contains("data")) {
      // An unknown datatype keeps no bytes: the model conversion refuses it
      // by name, as for gRPC.
      if (const std::optional<DType> dtype = DTypeFromV2Datatype(tensor.datatype())) {
        const int64_t raw = LeafCount(input["data"]) * ElementSize(*dtype);
        RETURN_IF_ERROR(reserve_raw(raw));
        bytes.reserve(static_cast<size_t>(raw));
        int64_t index = 0;
        RETURN_IF_ERROR(AppendData(input["data"], *dtype, what, index, bytes));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has neither \"data\" nor parameters.binary_data_size"));
    }
    ++i;
  }
  if (binary_offset != binary.size()) {
    return JsonError(model, absl::StrCat("the request has ", binary.size() - binary_offset,
                                         " binary bytes that no input's binary_data_size claims"));
  }
  if (json.contains("outputs")) {
    if (!json["outputs"].is_array()) return JsonError(model, "\"outputs\" is not an array");
    int k = 0;
    for (const Json& output : json["outputs"]) {
      if (!output.is_object() || !output.contains("name") || !output["name"].is_string()) {
        return JsonError(model, absl::StrCat("outputs[", k, "] has no \"name\" string"));
      }
      auto& asked = *request.add_outputs();
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
  }
  return parsed;
}

absl::StatusOr<HttpBody> RenderHttpInferResponse(const HttpInferRequest& asked,
                                                 const inference::ModelInferResponse& response) {
  Json json = Json::object();
  json["model_name"] = response.model_name();
  json["model_version"] = response.model_version();
  if (!response.id().empty()) json["id"] = response.id();
  if (!response.parameters().empty()) json["parameters"] = FromParameters(response.parameters());
  json["outputs"] = Json::array();
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
      json["outputs"].push_back(std::move(entry));
      continue;
    }
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
      entry["data"] = DataJson(bytes, *dtype);
    }
    json["outputs"].push_back(std::move(entry));
  }
  HttpBody out;
  out.body = DumpJson(json);
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
  const Json json = parsed.ok() ? *std::move(parsed) : Json();
  if (!parsed.ok() || !json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the body is not a JSON object {\"key\", \"offset\", \"byte_size\"}"));
  }
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
