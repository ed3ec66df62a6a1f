// A ModelInferRequest as a native RunRequest (ToRunRequest): model and
// tensors checked, typed contents converted to bytes, shared memory
// parameters turned into native references, outputs described.
#include <algorithm>
#include <cstdint>
#include <cstring>
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
#include "core/operator.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "server/v2/inference_model_specs.h"
#include "server/v2/inference_models.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

// Appends `value` to `out` as a T, little-endian; false when it does not fit.
template <typename T, typename V>
bool AppendAs(V value, std::string& out) {
  T element;
  if constexpr (std::is_floating_point_v<T>) {
    element = static_cast<T>(value);
  } else {
    if (!std::in_range<T>(value)) return false;
    element = static_cast<T>(value);
  }
  char bytes[sizeof(T)];
  std::memcpy(bytes, &element, sizeof(T));
  out.append(bytes, sizeof(T));
  return true;
}

// Converts one typed list into bytes of `dtype`.
template <typename T, typename List>
absl::Status AppendList(const List& list, absl::string_view what, std::string& out) {
  out.reserve(list.size() * sizeof(T));
  for (int i = 0; i < list.size(); ++i) {
    if (!AppendAs<T>(list.Get(i), out)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] = ", list.Get(i), " is out of range for the datatype"));
    }
  }
  return absl::OkStatus();
}

// The bytes of typed `contents` for `dtype`. `what` names the list in errors,
// e.g. `slice: input "offsets" contents`.
absl::StatusOr<std::string> ContentsBytes(const inference::InferTensorContents& contents,
                                          DType dtype, absl::string_view what) {
  std::string out;
  const std::string list = absl::StrCat(what, ".");
  switch (dtype) {
    case DType::kBool:
      out.reserve(static_cast<size_t>(contents.bool_contents_size()));
      for (bool value : contents.bool_contents()) out.push_back(value ? 1 : 0);
      break;
    case DType::kInt8:
      RETURN_IF_ERROR(AppendList<int8_t>(contents.int_contents(), list + "int_contents", out));
      break;
    case DType::kInt16:
      RETURN_IF_ERROR(AppendList<int16_t>(contents.int_contents(), list + "int_contents", out));
      break;
    case DType::kInt32:
      RETURN_IF_ERROR(AppendList<int32_t>(contents.int_contents(), list + "int_contents", out));
      break;
    case DType::kInt64:
      RETURN_IF_ERROR(AppendList<int64_t>(contents.int64_contents(), list + "int64_contents", out));
      break;
    case DType::kUint8:
      RETURN_IF_ERROR(AppendList<uint8_t>(contents.uint_contents(), list + "uint_contents", out));
      break;
    case DType::kUint16:
      RETURN_IF_ERROR(AppendList<uint16_t>(contents.uint_contents(), list + "uint_contents", out));
      break;
    case DType::kUint32:
      RETURN_IF_ERROR(AppendList<uint32_t>(contents.uint_contents(), list + "uint_contents", out));
      break;
    case DType::kUint64:
      RETURN_IF_ERROR(
          AppendList<uint64_t>(contents.uint64_contents(), list + "uint64_contents", out));
      break;
    case DType::kFloat32:
      RETURN_IF_ERROR(AppendList<float>(contents.fp32_contents(), list + "fp32_contents", out));
      break;
    case DType::kFloat64:
      RETURN_IF_ERROR(AppendList<double>(contents.fp64_contents(), list + "fp64_contents", out));
      break;
    case DType::kFloat16:
    case DType::kBfloat16:
      // The protocol has no typed list for 16-bit floats.
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", V2DatatypeName(dtype),
                                                     " has no typed contents; send it in "
                                                     "raw_input_contents"));
  }
  return out;
}

// A tensor's place in a registered shared memory region, from its parameters
// (Triton's system shared memory extension).
struct SharedMemorySpan {
  std::string region;
  int64_t offset = 0;
  int64_t byte_size = 0;
};

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

// Parameter `name` of `parameters` as an int64 (int64_param, or uint64_param up
// to 2^63 - 1); nullopt when absent. `what` names the tensor in errors.
absl::StatusOr<std::optional<int64_t>> Int64Parameter(const Parameters& parameters,
                                                      absl::string_view name,
                                                      absl::string_view what) {
  auto found = parameters.find(std::string(name));
  if (found == parameters.end()) return std::nullopt;
  const inference::InferParameter& parameter = found->second;
  if (parameter.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    return parameter.int64_param();
  }
  if (parameter.parameter_choice_case() == inference::InferParameter::kUint64Param &&
      std::in_range<int64_t>(parameter.uint64_param())) {
    return static_cast<int64_t>(parameter.uint64_param());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": parameter \"", name, "\" must be an int64 (int64_param)"));
}

// The shared memory span `parameters` give ("shared_memory_region",
// "shared_memory_byte_size", optional "shared_memory_offset"); nullopt when
// they name no region.
absl::StatusOr<std::optional<SharedMemorySpan>> SharedMemoryParameters(const Parameters& parameters,
                                                                       absl::string_view what) {
  ASSIGN_OR_RETURN(std::optional<int64_t> offset,
                   Int64Parameter(parameters, kSharedMemoryOffsetParameter, what));
  ASSIGN_OR_RETURN(std::optional<int64_t> byte_size,
                   Int64Parameter(parameters, kSharedMemoryByteSizeParameter, what));
  auto region = parameters.find(std::string(kSharedMemoryRegionParameter));
  if (region == parameters.end()) {
    if (offset.has_value() || byte_size.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": parameter \"",
          offset.has_value() ? kSharedMemoryOffsetParameter : kSharedMemoryByteSizeParameter,
          "\" is given without \"", kSharedMemoryRegionParameter, "\""));
    }
    return std::nullopt;
  }
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": parameter \"", kSharedMemoryRegionParameter, "\" must be a string"));
  }
  if (!byte_size.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": parameter \"", kSharedMemoryRegionParameter, "\" needs \"",
                     kSharedMemoryByteSizeParameter, "\" (the tensor's bytes in the region)"));
  }
  return SharedMemorySpan{region->second.string_param(), offset.value_or(0), *byte_size};
}

void SetReference(const SharedMemorySpan& span, v1::SharedMemoryRef* ref) {
  ref->set_region(span.region);
  ref->set_offset(span.offset);
  ref->set_byte_length(span.byte_size);
}

// Whether typed `contents` hold any element.
bool HasContents(const inference::InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
             c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
             c.fp64_contents_size() + c.bytes_contents_size() >
         0;
}

// A decoded input: its dtype, shape and bytes, or where they are in shared
// memory.
struct Input {
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;
  std::string bytes;
  std::optional<SharedMemorySpan> shared_memory;
  std::string text;  // a text parameter's one element
};

// The one element of a text parameter tensor (BYTES, shape [1]): from its raw
// bytes (Triton's serialization: a 4-byte little-endian length, then the
// bytes) or from contents.bytes_contents.
absl::StatusOr<std::string> TextElement(
    const inference::ModelInferRequest::InferInputTensor& tensor, const std::string* raw,
    const std::string& what) {
  if (tensor.datatype() != "BYTES") {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has datatype ", Quoted(tensor.datatype()), "; it must be BYTES (one string)"));
  }
  if (tensor.shape_size() != 1 || tensor.shape(0) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has shape [", absl::StrJoin(tensor.shape(), ","), "]; it must be [1]"));
  }
  if (tensor.parameters().contains(std::string(kSharedMemoryRegionParameter))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is a parameter tensor: send its value in the request, not in shared memory"));
  }
  if (raw == nullptr) {
    if (tensor.contents().bytes_contents_size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has ",
                                                     tensor.contents().bytes_contents_size(),
                                                     " bytes_contents; its shape [1] takes one"));
    }
    return tensor.contents().bytes_contents(0);
  }
  uint32_t length = 0;
  if (raw->size() >= sizeof length) std::memcpy(&length, raw->data(), sizeof length);
  if (raw->size() < sizeof length || raw->size() - sizeof length != length) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", raw->size(),
                     " raw bytes; one BYTES element is its 4-byte little-endian length, then "
                     "that many bytes"));
  }
  return raw->substr(sizeof length);
}

// The inputs of one request by name.
using Inputs = std::map<std::string, Input, std::less<>>;

// An INT64 parameter tensor's values.
// The little-endian `T` elements of `bytes` as int64s (sign-extended).
template <typename T>
std::vector<int64_t> WidenedValues(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return std::vector<int64_t>(values.begin(), values.end());
}

absl::StatusOr<std::vector<int64_t>> Int64Values(const ModelSpec& model, const TensorSpec& spec,
                                                 const Input& input) {
  const absl::string_view name = spec.name;
  // INT32 too, as Triton's clients and NumPy's default integers often send
  // them: widened here, so the native attributes stay INT64.
  const bool narrow = input.dtype == DType::kInt32;
  if (input.dtype != DType::kInt64 && !narrow) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, ": input \"", name,
                                                   "\" has datatype ", V2DatatypeName(input.dtype),
                                                   "; it must be INT64 or INT32"));
  }
  const bool scalar = spec.scalar;  // [1]; else 1-D
  if (scalar ? (input.shape != std::vector<int64_t>{1}) : input.shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, ": input \"", name, "\" has shape [",
                                                   absl::StrJoin(input.shape, ","),
                                                   "]; it must be ", scalar ? "[1]" : "1-D"));
  }
  return narrow ? WidenedValues<int32_t>(input.bytes) : WidenedValues<int64_t>(input.bytes);
}

absl::StatusOr<v1::Backend> BackendOf(const inference::ModelInferRequest& request) {
  auto found = request.parameters().find(std::string(kBackendParameter));
  if (found == request.parameters().end()) return v1::AUTO;
  const inference::InferParameter& parameter = found->second;
  if (parameter.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.model_name(),
                     ": parameter \"backend\" must be a string: \"auto\", \"cpu\" or \"opencl\""));
  }
  const std::string value = absl::AsciiStrToLower(parameter.string_param());
  if (value == "auto") return v1::AUTO;
  if (value == "cpu") return v1::CPU;
  if (value == "opencl") return v1::OPENCL;
  return absl::InvalidArgumentError(
      absl::StrCat(request.model_name(), ": parameter \"backend\" is ",
                   Quoted(parameter.string_param()), "; use \"auto\", \"cpu\" or \"opencl\""));
}

// The sizes of `run`'s outputs as its operator derives them from its data
// inputs (those already in `run`) and, for split, `split_sizes`, checked as the native pipeline
// checks them (same messages).
absl::StatusOr<std::vector<std::vector<int64_t>>> DerivedOutputSizes(
    const v1::RunRequest& run, const Inputs& inputs, std::span<const int64_t> split_sizes = {}) {
  ASSIGN_OR_RETURN(OpAttrs attrs, ToOpAttrs(run));
  std::vector<NamedDesc> descs;
  for (const auto& [name, input] : inputs) {
    if (run.inputs().count(name) == 0) continue;  // an attribute's values, not data
    descs.push_back({name, TensorDesc{.dtype = input.dtype, .sizes = input.shape}});
  }
  return OutputSizes(attrs, descs, split_sizes);
}

// `sizes` as `run`'s outputs.
void AddOutputs(const std::vector<std::vector<int64_t>>& sizes, v1::RunRequest& run) {
  for (const std::vector<int64_t>& output : sizes) {
    run.add_outputs()->mutable_sizes()->Assign(output.begin(), output.end());
  }
}

// Points the outputs `request` asks for in shared memory (parameters
// "shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")
// at their regions in `run`, whose outputs are described as far as the model
// chooses them; strided_slice and scatter_elements get theirs here. The native
// pipeline writes them there (SharedMemoryOutput): bounds, alignment and
// overlap with the inputs are checked once, natively.
absl::Status AddSharedMemoryOutputs(const inference::ModelInferRequest& request,
                                    const ModelSpec& spec, const Inputs& inputs,
                                    v1::RunRequest& run) {
  const absl::string_view model = spec.name;
  const std::vector<std::string> names = OutputNames(spec, run.outputs_size());
  std::vector<bool> placed(names.size(), false);
  for (int i = 0; i < request.outputs_size(); ++i) {
    const auto& output = request.outputs(i);
    const std::string what = absl::StrCat(model, ": output ", Quoted(output.name()));
    ASSIGN_OR_RETURN(std::optional<SharedMemorySpan> span,
                     SharedMemoryParameters(output.parameters(), what));
    if (!span.has_value()) continue;
    auto found = std::find(names.begin(), names.end(), output.name());
    if (found == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(model, ": outputs[", i, "] ", Quoted(output.name()), " is not an output; ",
                       "the outputs are ", absl::StrJoin(names, ", ")));
    }
    const int k = static_cast<int>(found - names.begin());
    if (placed[static_cast<size_t>(k)]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is asked for twice (outputs[", i, "]) with shared memory"));
    }
    placed[static_cast<size_t>(k)] = true;
    if (run.outputs_size() == 0) {
      // One output, whose sizes the operator derives: described here, as the
      // native request must then carry them.
      ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> sizes, DerivedOutputSizes(run, inputs));
      AddOutputs(sizes, run);
    }
    SetReference(*span, run.mutable_outputs(k)->mutable_shared_memory());
  }
  return absl::OkStatus();
}

// The number of raw_input_contents entries `request` must have when it has
// any: one per input not in shared memory (as Triton). Whether it has any.
absl::StatusOr<bool> HasRawEntries(const inference::ModelInferRequest& request,
                                   const ModelSpec& model) {
  if (request.raw_input_contents_size() == 0) return false;
  int in_request = 0;
  for (const auto& tensor : request.inputs()) {
    in_request += tensor.parameters().contains(std::string(kSharedMemoryRegionParameter)) ? 0 : 1;
  }
  if (request.raw_input_contents_size() != in_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        model.name, ": raw_input_contents has ", request.raw_input_contents_size(), " entries for ",
        in_request, " inputs", in_request != request.inputs_size() ? " not in shared memory" : "",
        "; give every input's bytes there or none"));
  }
  return true;
}

// `tensor`'s datatype and shape into `input`; its element count.
absl::StatusOr<int64_t> ReadLayout(const inference::ModelInferRequest::InferInputTensor& tensor,
                                   const std::string& what, Input& input) {
  std::optional<DType> dtype = DTypeFromV2Datatype(tensor.datatype());
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has datatype ",
                                                   Quoted(tensor.datatype()),
                                                   ", which is not one of ", V2DatatypeNames()));
  }
  input.dtype = *dtype;
  int64_t elements = 1;
  for (int d = 0; d < tensor.shape_size(); ++d) {
    const int64_t size = tensor.shape(d);
    std::optional<int64_t> product = CheckedMul(elements, size);
    if (size < 0 || !product.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape[", d, "] = ", size,
                                                     " is not a size (shape [",
                                                     absl::StrJoin(tensor.shape(), ","), "])"));
    }
    elements = *product;
    input.shape.push_back(size);
  }
  return elements;
}

// An input read from a shared memory region (`input.shared_memory`): a data
// tensor, with no contents, whose byte_size is what its shape takes
// (`expected`; nullopt: past int64).
absl::Status CheckSharedMemoryInput(const inference::ModelInferRequest::InferInputTensor& tensor,
                                    const TensorSpec& spec, const Input& input,
                                    std::optional<int64_t> expected, const std::string& what) {
  // The native pipeline reads the region (ResolveSharedMemoryInputs); the
  // conversion needs parameter tensors' values, so those come inline.
  if (!spec.data) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " is a parameter tensor: send its values in the request, not in shared "
                     "memory region \"",
                     input.shared_memory->region, "\""));
  }
  if (HasContents(tensor.contents())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": contents and parameter \"",
                                                   kSharedMemoryRegionParameter,
                                                   "\" are both set; send one"));
  }
  if (!expected.has_value() || input.shared_memory->byte_size != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": parameter \"", kSharedMemoryByteSizeParameter, "\" is ",
        input.shared_memory->byte_size, " but its shape [", absl::StrJoin(tensor.shape(), ","),
        "] of ", tensor.datatype(), " takes ", expected.value_or(-1), " bytes"));
  }
  return absl::OkStatus();
}

// Input `tensor` (its `spec`) checked and taken: its bytes moved out of
// `raw` (its raw_input_contents entry; null: none, its contents are read) or
// named in a shared memory region. `held_input_bytes`: the bytes of input
// "input" when they are held apart and its entry is empty.
absl::StatusOr<Input> TakeInput(inference::ModelInferRequest::InferInputTensor& tensor,
                                const ModelSpec& model, const TensorSpec& spec, std::string* raw,
                                std::optional<int64_t> held_input_bytes) {
  const std::string what = absl::StrCat(model.name, ": input ", Quoted(tensor.name()));
  Input input;
  if (spec.text) {
    ASSIGN_OR_RETURN(input.text, TextElement(tensor, raw, what));
    return input;
  }
  ASSIGN_OR_RETURN(const int64_t elements, ReadLayout(tensor, what, input));
  ASSIGN_OR_RETURN(input.shared_memory, SharedMemoryParameters(tensor.parameters(), what));
  const std::optional<int64_t> expected = CheckedMul(elements, ElementSize(input.dtype));
  if (input.shared_memory.has_value()) {
    RETURN_IF_ERROR(CheckSharedMemoryInput(tensor, spec, input, expected, what));
    return input;
  }
  std::optional<int64_t> held;  // input "input"'s bytes, held apart
  if (raw != nullptr) {
    input.bytes = std::move(*raw);
    if (tensor.name() == "input" && input.bytes.empty()) held = held_input_bytes;
  } else {
    ASSIGN_OR_RETURN(input.bytes, ContentsBytes(tensor.contents(), input.dtype,
                                                absl::StrCat(what, " contents")));
    tensor.clear_contents();
  }
  const int64_t bytes = held.value_or(static_cast<int64_t>(input.bytes.size()));
  if (!expected.has_value() || bytes != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", bytes / ElementSize(input.dtype), " elements (", bytes,
        " bytes) but its shape [", absl::StrJoin(tensor.shape(), ","), "] of ", tensor.datatype(),
        " holds ", elements, " (", expected.value_or(-1), " bytes)"));
  }
  if (!spec.data) RETURN_IF_ERROR(Int64Values(model, spec, input).status());
  return input;
}

// Every input of `request` taken (TakeInput), each once, the required ones
// all there; raw_input_contents left empty.
absl::StatusOr<Inputs> TakeInputs(inference::ModelInferRequest& request, const ModelSpec& model,
                                  std::optional<int64_t> held_input_bytes) {
  ASSIGN_OR_RETURN(const bool raw, HasRawEntries(request, model));
  int next_raw = 0;
  Inputs inputs;
  for (int i = 0; i < request.inputs_size(); ++i) {
    inference::ModelInferRequest::InferInputTensor& tensor = *request.mutable_inputs(i);
    const TensorSpec* spec = FindInput(model, tensor.name());
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(model.name, ": inputs[", i, "] ", Quoted(tensor.name()),
                       " is not an input of ", model.name, "; its inputs are ", InputNames(model)));
    }
    if (inputs.contains(tensor.name())) {
      return absl::InvalidArgumentError(absl::StrCat(model.name, ": input ", Quoted(tensor.name()),
                                                     " is given twice (inputs[", i, "])"));
    }
    const bool in_region =
        tensor.parameters().contains(std::string(kSharedMemoryRegionParameter)) && !spec->text;
    std::string* entry =
        raw && !in_region ? request.mutable_raw_input_contents(next_raw++) : nullptr;
    ASSIGN_OR_RETURN(Input input, TakeInput(tensor, model, *spec, entry, held_input_bytes));
    inputs.emplace(tensor.name(), std::move(input));
  }
  request.clear_raw_input_contents();
  for (const TensorSpec& spec : model.inputs) {
    if (spec.required && !inputs.contains(spec.name)) {
      return absl::InvalidArgumentError(absl::StrCat(model.name, ": input \"", spec.name,
                                                     "\" is missing; the inputs are ",
                                                     InputNames(model)));
    }
  }
  return inputs;
}

// The values of parameter input `name` of `inputs` (checked by TakeInput),
// or none where it was not given.
std::vector<int64_t> ParameterValues(const ModelSpec& model, const Inputs& inputs,
                                     absl::string_view name) {
  auto found = inputs.find(name);
  if (found == inputs.end()) return {};
  return *Int64Values(model, *FindInput(model, name), found->second);
}

// `model`'s parameter inputs as the attributes of `run`'s operator.
void SetAttributes(const ModelSpec& model, const Inputs& inputs, v1::RunRequest& run) {
  google::protobuf::Message& attrs = *run.GetReflection()->MutableMessage(&run, model.field);
  for (const TensorSpec& spec : model.inputs) {
    if (spec.attribute == nullptr) continue;  // data, or split's sizes
    auto found = inputs.find(spec.name);
    if (found == inputs.end()) continue;
    if (spec.text) {
      attrs.GetReflection()->SetString(&attrs, spec.attribute, found->second.text);
      continue;
    }
    for (int64_t value : ParameterValues(model, inputs, spec.name)) {
      if (spec.scalar) {
        attrs.GetReflection()->SetInt64(&attrs, spec.attribute, value);
      } else {
        attrs.GetReflection()->AddInt64(&attrs, spec.attribute, value);
      }
    }
  }
}

}  // namespace

int64_t TypedContentsBound(const inference::ModelInferRequest& request) {
  if (request.raw_input_contents_size() > 0) return 0;
  int64_t elements = 0;
  for (const auto& input : request.inputs()) {
    const inference::InferTensorContents& c = input.contents();
    elements += c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
                c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
                c.fp64_contents_size();
  }
  return elements * 8;
}

absl::StatusOr<v1::RunRequest> ToRunRequest(inference::ModelInferRequest& request,
                                            std::optional<int64_t> held_input_bytes) {
  RETURN_IF_ERROR(CheckModel(request.model_name(), request.model_version()));
  const ModelSpec& model = *FindModel(request.model_name());
  ASSIGN_OR_RETURN(Inputs inputs, TakeInputs(request, model, held_input_bytes));
  v1::RunRequest run;
  run.set_id(request.id());
  ASSIGN_OR_RETURN(v1::Backend backend, BackendOf(request));
  run.set_backend(backend);
  SetAttributes(model, inputs, run);
  for (auto& [name, input] : inputs) {
    if (!FindInput(model, name)->data) continue;
    v1::Tensor& tensor = (*run.mutable_inputs())[name];
    tensor.set_dtype(ToProtoDType(input.dtype));
    tensor.mutable_sizes()->Assign(input.shape.begin(), input.shape.end());
    if (input.shared_memory.has_value()) {
      SetReference(*input.shared_memory, tensor.mutable_shared_memory());
    } else {
      *tensor.mutable_data() = std::move(input.bytes);
    }
  }
  if (model.op->outputs != OutputRule::kOneDerived) {
    // The native request gives these outputs' sizes (slice's whole windows,
    // split's parts): as the operator derives them.
    ASSIGN_OR_RETURN(
        std::vector<std::vector<int64_t>> sizes,
        DerivedOutputSizes(run, inputs, ParameterValues(model, inputs, kSplitSizesInput)));
    AddOutputs(sizes, run);
  }
  RETURN_IF_ERROR(AddSharedMemoryOutputs(request, model, inputs, run));
  return run;
}

}  // namespace tensorop::server
