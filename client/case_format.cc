#include "client/case_format.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/element_codec.h"
#include "client/exact_json.h"
#include "client/status_macros.h"

namespace tensorop::client {
namespace {

using Json = nlohmann::json;

// `status` with `context` in front of its message.
absl::Status Within(absl::string_view context, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, status.message()));
}

absl::Status CheckKeys(const Json& object, std::initializer_list<absl::string_view> allowed,
                       absl::string_view what) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field ", JsonString(key), " in ", what));
    }
  }
  return absl::OkStatus();
}

// A list of int64 at field `where` ("sizes"), whose name starts any error.
absl::StatusOr<std::vector<int64_t>> Int64ListFromJson(const Json& value, absl::string_view where) {
  if (!value.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a list, got ", DescribeJson(value)));
  }
  std::vector<int64_t> list;
  list.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    absl::StatusOr<int64_t> element = Int64FromJson(value[i]);
    if (!element.ok()) return Within(absl::StrCat(where, "[", i, "]: "), element.status());
    list.push_back(*element);
  }
  return list;
}

// A field of an object that must be present.
absl::StatusOr<const Json*> Required(const Json& object, absl::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing field \"", key, "\""));
  }
  return &*it;
}

// A text attribute's JSON value: a string, or a number or bool written as text
// (a float whose decimal text ParseJson kept, as that text).
absl::StatusOr<std::string> AttributeText(const Json& value, absl::string_view where) {
  if (value.is_string()) return value.get<std::string>();
  if (IsFloatNumber(value)) return value.is_binary() ? DecimalText(value) : value.dump();
  if (value.is_number() || value.is_boolean()) return value.dump();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": expected a string, number or bool, got ", DescribeJson(value)));
}

// Sets the attribute message of the op named `op` from `attrs`. The format's
// attribute names are the proto's field names, so this follows the proto
// instead of repeating it per operator.
absl::Status SetAttrs(absl::string_view op, const Json* attrs, v1::RunRequest* request) {
  const google::protobuf::FieldDescriptor* op_field =
      v1::RunRequest::descriptor()->FindFieldByName(std::string(op));
  if (op_field == nullptr || op_field->containing_oneof() == nullptr ||
      op_field->containing_oneof()->name() != "op") {
    return absl::InvalidArgumentError(absl::StrCat("op: unknown operator ", JsonString(op)));
  }
  google::protobuf::Message* message = request->GetReflection()->MutableMessage(request, op_field);
  if (attrs == nullptr) return absl::OkStatus();
  if (!attrs->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("attrs: expected an object, got ", DescribeJson(*attrs)));
  }
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (const auto& [key, value] : attrs->items()) {
    const std::string where = absl::StrCat("attrs.", key);
    const google::protobuf::FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(key);
    if (field != nullptr &&
        field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      // Text attributes (pad's mode and value): a string as it is, a number or
      // bool as its JSON text, so the server reads the value exactly.
      ASSIGN_OR_RETURN(std::string text, AttributeText(value, where));
      reflection->SetString(message, field, std::move(text));
      continue;
    }
    if (field == nullptr || field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT64) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not an attribute of ", op));
    }
    if (field->is_repeated()) {
      ASSIGN_OR_RETURN(const std::vector<int64_t> list, Int64ListFromJson(value, where));
      for (int64_t element : list) reflection->AddInt64(message, field, element);
    } else {
      absl::StatusOr<int64_t> scalar = Int64FromJson(value);
      if (!scalar.ok()) return Within(absl::StrCat(where, ": "), scalar.status());
      reflection->SetInt64(message, field, *scalar);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::OutputDesc> OutputDescFromJson(const Json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("expected an object, got ", DescribeJson(json)));
  }
  RETURN_IF_ERROR(CheckKeys(json, {"sizes", "strides"}, "an output"));
  v1::OutputDesc desc;
  for (const char* key : {"sizes", "strides"}) {
    auto it = json.find(key);
    if (it == json.end()) continue;
    ASSIGN_OR_RETURN(const std::vector<int64_t> list, Int64ListFromJson(*it, key));
    auto* field = absl::string_view(key) == "sizes" ? desc.mutable_sizes() : desc.mutable_strides();
    field->Add(list.begin(), list.end());
  }
  return desc;
}

// An expected tensor: packed, exactly product(sizes) values.
absl::StatusOr<HostTensor> ExpectedTensorFromJson(const Json& json) {
  ASSIGN_OR_RETURN(HostTensor tensor, TensorFromJson(json));
  if (!tensor.strides.empty()) {
    return absl::InvalidArgumentError(
        "strides: an expected tensor lists its values packed; output strides belong in the "
        "case's \"outputs\"");
  }
  absl::StatusOr<int64_t> elements = ElementCount(tensor.sizes);
  if (!elements.ok()) return elements.status();
  const int64_t values = static_cast<int64_t>(tensor.data.size()) / ElementSize(tensor.dtype);
  if (values != *elements) {
    return absl::InvalidArgumentError(absl::StrCat("sizes ", FormatDims(tensor.sizes), " hold ",
                                                   *elements, " elements but data has ", values,
                                                   " values"));
  }
  return tensor;
}

absl::Status SetExpectation(const Json& expect, Case* c) {
  if (!expect.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an object, got ", DescribeJson(expect)));
  }
  RETURN_IF_ERROR(CheckKeys(expect, {"outputs", "error"}, "expect"));
  const bool has_error = expect.contains("error");
  if (has_error == expect.contains("outputs")) {
    return absl::InvalidArgumentError("needs exactly one of \"outputs\" and \"error\"");
  }
  if (has_error) {
    const Json& error = expect["error"];
    std::optional<absl::StatusCode> code;
    if (error.is_string()) code = StatusCodeFromName(error.get_ref<const std::string&>());
    if (!code.has_value() || *code == absl::StatusCode::kOk) {
      return absl::InvalidArgumentError(
          absl::StrCat("error: ", DescribeJson(error), " is not a gRPC error code name"));
    }
    c->expected_error = *code;
    return absl::OkStatus();
  }
  const Json& outputs = expect["outputs"];
  if (!outputs.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs: expected a list, got ", DescribeJson(outputs)));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::StatusOr<HostTensor> tensor = ExpectedTensorFromJson(outputs[i]);
    if (!tensor.ok()) return Within(absl::StrCat("outputs[", i, "]: "), tensor.status());
    c->expected_outputs.push_back(*std::move(tensor));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path.string(), ": read failed"));
  return std::move(text).str();
}

}  // namespace

absl::StatusOr<HostTensor> TensorFromJson(const Json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor is an object, got ", DescribeJson(json)));
  }
  RETURN_IF_ERROR(CheckKeys(json, {"dtype", "sizes", "strides", "data"}, "a tensor"));
  HostTensor tensor;
  ASSIGN_OR_RETURN(const Json* dtype, Required(json, "dtype"));
  std::optional<v1::DType> parsed_dtype;
  if (dtype->is_string()) parsed_dtype = DTypeFromName(dtype->get_ref<const std::string&>());
  if (!parsed_dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype: ", DescribeJson(*dtype), " is not a dtype"));
  }
  tensor.dtype = *parsed_dtype;

  ASSIGN_OR_RETURN(const Json* sizes, Required(json, "sizes"));
  ASSIGN_OR_RETURN(tensor.sizes, Int64ListFromJson(*sizes, "sizes"));
  if (auto it = json.find("strides"); it != json.end()) {
    ASSIGN_OR_RETURN(tensor.strides, Int64ListFromJson(*it, "strides"));
  }

  ASSIGN_OR_RETURN(const Json* data, Required(json, "data"));
  if (!data->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data: expected a list, got ", DescribeJson(*data)));
  }
  tensor.data.reserve(data->size() * ElementSize(tensor.dtype));
  for (size_t i = 0; i < data->size(); ++i) {
    absl::Status appended = AppendElement(tensor.dtype, (*data)[i], &tensor.data);
    if (!appended.ok()) return Within(absl::StrCat("data[", i, "]: "), appended);
  }
  return tensor;
}

// The operator of a case or of one of its later steps (`first` false): its
// op, attrs, inputs and outputs into `request`. A later step's "input" is
// the output of the step before it: it names only its other inputs.
absl::Status StepFromJson(const Json& json, bool first, v1::RunRequest* request) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step is an object, got ", DescribeJson(json)));
  }
  ASSIGN_OR_RETURN(const Json* op, Required(json, "op"));
  if (!op->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("op: expected a string, got ", DescribeJson(*op)));
  }
  auto attrs = json.find("attrs");
  RETURN_IF_ERROR(SetAttrs(op->get_ref<const std::string&>(),
                           attrs == json.end() ? nullptr : &*attrs, request));

  static const Json kNoInputs = Json::object();
  const Json* inputs = &kNoInputs;
  if (first || json.contains("inputs")) {
    ASSIGN_OR_RETURN(inputs, Required(json, "inputs"));
  }
  if (!inputs->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs: expected an object, got ", DescribeJson(*inputs)));
  }
  if (!first && inputs->contains("input")) {
    return absl::InvalidArgumentError(
        "inputs.input: a later step's input is the output of the step before it (\"from\")");
  }
  for (const auto& [input_name, input] : inputs->items()) {
    // {"handle": "ID"}: a tensor that stays on the server (tensorctl put).
    if (input.is_object() && input.contains("handle")) {
      const Json& id = input["handle"];
      if (input.size() != 1 || !id.is_string() || id.get_ref<const std::string&>().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs.", input_name, ": a handle input is {\"handle\": \"ID\"}, got ",
                         DescribeJson(input)));
      }
      (*request->mutable_inputs())[input_name].mutable_handle()->set_id(id.get<std::string>());
      continue;
    }
    absl::StatusOr<HostTensor> tensor = TensorFromJson(input);
    if (!tensor.ok()) return Within(absl::StrCat("inputs.", input_name, ": "), tensor.status());
    v1::Tensor& wire = (*request->mutable_inputs())[input_name];
    wire.set_dtype(tensor->dtype);
    wire.mutable_sizes()->Add(tensor->sizes.begin(), tensor->sizes.end());
    wire.mutable_strides()->Add(tensor->strides.begin(), tensor->strides.end());
    wire.set_data(std::move(tensor->data));
  }

  if (auto outputs = json.find("outputs"); outputs != json.end()) {
    if (!outputs->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs: expected a list, got ", DescribeJson(*outputs)));
    }
    for (size_t i = 0; i < outputs->size(); ++i) {
      absl::StatusOr<v1::OutputDesc> desc = OutputDescFromJson((*outputs)[i]);
      if (!desc.ok()) return Within(absl::StrCat("outputs[", i, "]: "), desc.status());
      *request->add_outputs() = *std::move(desc);
    }
  }

  return absl::OkStatus();
}

absl::StatusOr<Case> CaseFromJson(const Json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a case is an object, got ", DescribeJson(json)));
  }
  Case c;
  ASSIGN_OR_RETURN(const Json* name, Required(json, "name"));
  if (!name->is_string() || name->get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: expected a non-empty string, got ", DescribeJson(*name)));
  }
  c.name = name->get<std::string>();
  c.request.set_id(c.name);

  RETURN_IF_ERROR(StepFromJson(json, /*first=*/true, &c.request));
  if (auto then = json.find("then"); then != json.end()) {
    if (!then->is_array() || then->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("then: expected a list of steps, got ", DescribeJson(*then)));
    }
    for (size_t i = 0; i < then->size(); ++i) {
      const Json& step = (*then)[i];
      LaterStep later;
      later.request.set_id(absl::StrCat(c.name, " then[", i, "]"));
      absl::Status parsed = StepFromJson(step, /*first=*/false, &later.request);
      if (parsed.ok() && step.contains("from")) {
        const Json& from = step["from"];
        if (!from.is_number_integer() || from.get<int64_t>() < 0 || from.get<int64_t>() > 1024) {
          parsed = absl::InvalidArgumentError(
              absl::StrCat("from: expected an output index, got ", DescribeJson(from)));
        } else {
          later.from = from.get<int>();
        }
      }
      RETURN_IF_ERROR(Within(absl::StrCat("then[", i, "]."), parsed));
      c.then.push_back(std::move(later));
    }
  }

  ASSIGN_OR_RETURN(const Json* expect, Required(json, "expect"));
  RETURN_IF_ERROR(Within("expect: ", SetExpectation(*expect, &c)));
  return c;
}

absl::StatusOr<std::vector<LoadedCase>> ParseCases(absl::string_view text) {
  ASSIGN_OR_RETURN(const Json root, ParseJson(text));
  std::vector<const Json*> entries;
  if (root.is_object()) {
    entries.push_back(&root);
  } else if (root.is_array()) {
    for (const Json& entry : root) entries.push_back(&entry);
  } else {
    return absl::InvalidArgumentError("a case file holds a case object or an array of cases");
  }
  std::vector<LoadedCase> cases;
  cases.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const Json& entry = *entries[i];
    std::string name = absl::StrCat("#", i);
    if (entry.is_object()) {
      auto it = entry.find("name");
      if (it != entry.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
        name = it->get<std::string>();
      }
    }
    cases.push_back(LoadedCase{std::move(name), CaseFromJson(entry), ""});
  }
  return cases;
}

absl::StatusOr<std::vector<LoadedCase>> LoadCases(const std::string& path) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.is_regular_file() && entry.path().extension() == ".json") {
        files.push_back(entry.path());
      }
    }
    if (error) return absl::NotFoundError(absl::StrCat(path, ": ", error.message()));
    if (files.empty()) return absl::NotFoundError(absl::StrCat(path, ": no *.json files"));
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::vector<LoadedCase> cases;
  for (const std::filesystem::path& file : files) {
    ASSIGN_OR_RETURN(const std::string text, ReadFile(file));
    absl::StatusOr<std::vector<LoadedCase>> parsed = ParseCases(text);
    if (!parsed.ok()) return Within(absl::StrCat(file.string(), ": "), parsed.status());
    for (LoadedCase& loaded : *parsed) loaded.file = file.string();
    std::move(parsed->begin(), parsed->end(), std::back_inserter(cases));
  }
  return cases;
}

std::optional<absl::StatusCode> StatusCodeFromName(absl::string_view name) {
  for (int code = 0; code <= static_cast<int>(absl::StatusCode::kUnauthenticated); ++code) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(code)) == name) {
      return static_cast<absl::StatusCode>(code);
    }
  }
  return std::nullopt;
}

}  // namespace tensorop::client
