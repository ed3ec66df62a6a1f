#include "client/case_format.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/float_rounding.h"
#include "client/status_macros.h"

namespace tensorop::client {
namespace {

using Json = nlohmann::json;
using Int128 = __int128;

constexpr double kTwoTo53 = 9007199254740992.0;

// ---- JSON text with exact decimals ------------------------------------------

// Builds the DOM from nlohmann's SAX events, as nlohmann's own parser does, except
// for the numbers ParseJson documents.
class DomBuilder {
 public:
  explicit DomBuilder(Json* root) : root_(root) {}

  bool null() { return Add(Json(nullptr)); }
  bool boolean(bool value) { return Add(Json(value)); }
  bool number_integer(Json::number_integer_t value) { return Add(Json(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return Add(Json(value)); }
  bool number_float(Json::number_float_t value, const Json::string_t& text) {
    if (RoundToFloat32(value).was_tie || RoundToFloat16(value).was_tie) {
      return Add(Json::binary(std::vector<uint8_t>(text.begin(), text.end())));
    }
    return Add(Json(value));
  }
  bool string(Json::string_t& value) { return Add(Json(std::move(value))); }
  bool binary(Json::binary_t& value) { return Add(Json(std::move(value))); }
  bool start_object(std::size_t) {
    open_.push_back(Place(Json::object()));
    return true;
  }
  bool key(Json::string_t& key) {
    key_ = std::move(key);
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    open_.push_back(Place(Json::array()));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const Json::exception& error) {
    error_ = error.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Add(Json value) {
    Place(std::move(value));
    return true;
  }
  // Puts `value` where the document is at and returns where it went. Only the open
  // containers are held by pointer, and nothing is added to those but at their end
  // while a child is open, so the pointers stay valid.
  Json* Place(Json value) {
    if (open_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    Json& slot = parent[key_];
    slot = std::move(value);
    return &slot;
  }

  Json* root_;
  std::vector<Json*> open_;
  std::string key_;
  std::string error_;
};

// ---- Values -----------------------------------------------------------------

// A JSON value for messages, short.
std::string Describe(const Json& value) {
  if (value.is_binary()) return std::string(value.get_binary().begin(), value.get_binary().end());
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string JsonString(absl::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool IsFloatNumber(const Json& value) { return value.is_number_float() || value.is_binary(); }

std::string DecimalText(const Json& value) {
  return std::string(value.get_binary().begin(), value.get_binary().end());
}

// The nearest double to a float JSON number.
double NearestDouble(const Json& value) {
  if (value.is_binary()) return std::strtod(DecimalText(value).c_str(), nullptr);
  return value.get<double>();
}

// The doubles just below and just above the exact value of decimal text (equal
// when it is exact). glibc's strtod rounds in the current rounding mode.
std::pair<double, double> DecimalBounds(const std::string& text) {
  const int saved = std::fegetround();
  std::fesetround(FE_DOWNWARD);
  const double low = std::strtod(text.c_str(), nullptr);
  std::fesetround(FE_UPWARD);
  const double high = std::strtod(text.c_str(), nullptr);
  std::fesetround(saved);
  return {low, high};
}

// A JSON integer, integral float below 2^53, or decimal string, widened so every
// dtype's range check is one comparison.
absl::StatusOr<Int128> IntegerFromJson(const Json& value) {
  if (value.is_number_unsigned()) return Int128{value.get<uint64_t>()};
  if (value.is_number_integer()) return Int128{value.get<int64_t>()};
  if (IsFloatNumber(value)) {
    const double number = NearestDouble(value);
    if (!std::isfinite(number) || number != std::trunc(number)) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(value), " is not an integer"));
    }
    // From 2^53 on, neighbouring integers share a double: the text may have
    // named another one.
    if (std::fabs(number) >= kTwoTo53) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(value), " is too large for a JSON float to be exact; write it as a string"));
    }
    return static_cast<Int128>(number);
  }
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    const bool negative = !text.empty() && text[0] == '-';
    const size_t first = negative ? 1 : 0;
    Int128 magnitude = 0;
    bool valid = text.size() > first && text.size() - first <= 20;
    for (size_t i = first; valid && i < text.size(); ++i) {
      valid = text[i] >= '0' && text[i] <= '9';
      magnitude = magnitude * 10 + (text[i] - '0');
    }
    if (!valid) {
      return absl::InvalidArgumentError(
          absl::StrCat(JsonString(text), " is not a decimal integer"));
    }
    return negative ? -magnitude : magnitude;
  }
  return absl::InvalidArgumentError(absl::StrCat("expected an integer, got ", Describe(value)));
}

absl::StatusOr<int64_t> Int64FromJson(const Json& value) {
  ASSIGN_OR_RETURN(const Int128 integer, IntegerFromJson(value));
  if (integer < INT64_MIN || integer > INT64_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(Describe(value), " is out of range for int64"));
  }
  return static_cast<int64_t>(integer);
}

// The range of an integer dtype.
std::pair<Int128, Int128> IntegerRange(v1::DType dtype) {
  switch (dtype) {
    case v1::INT64:
      return {INT64_MIN, INT64_MAX};
    case v1::INT32:
      return {INT32_MIN, INT32_MAX};
    case v1::INT16:
      return {INT16_MIN, INT16_MAX};
    case v1::INT8:
      return {INT8_MIN, INT8_MAX};
    case v1::UINT64:
      return {0, UINT64_MAX};
    case v1::UINT32:
      return {0, UINT32_MAX};
    case v1::UINT16:
      return {0, UINT16_MAX};
    case v1::UINT8:
      return {0, UINT8_MAX};
    default:
      return {0, -1};
  }
}

// Rounds one double to a narrow float type's bits.
Rounded RoundTo(v1::DType dtype, double value) {
  return dtype == v1::FLOAT16 ? RoundToFloat16(value) : RoundToFloat32(value);
}

// The sign bit, the infinity and the quiet-NaN bit of a float dtype.
struct SpecialBits {
  uint64_t sign;
  uint64_t infinity;
  uint64_t quiet;
};

SpecialBits SpecialBitsOf(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT64:
      return {uint64_t{1} << 63, 0x7FF0000000000000, uint64_t{1} << 51};
    case v1::FLOAT32:
      return {0x80000000, 0x7F800000, 0x400000};
    default:
      return {0x8000, 0x7C00, 0x200};
  }
}

// The bit pattern of one float value of `dtype`.
absl::StatusOr<uint64_t> FloatBitsFromJson(v1::DType dtype, const Json& value) {
  const bool is64 = dtype == v1::FLOAT64;
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    const SpecialBits bits = SpecialBitsOf(dtype);
    if (text == "nan") return bits.infinity | bits.quiet;  // the canonical quiet NaN
    if (text == "inf") return bits.infinity;
    if (text == "-inf") return bits.sign | bits.infinity;
    return absl::InvalidArgumentError(absl::StrCat(
        JsonString(text), " is not a number (the strings are \"nan\", \"inf\", \"-inf\")"));
  }
  if (value.is_number_integer()) {
    // One rounding from the integer itself: the int -> float conversions round
    // to nearest-even, and a float16 that an int64 -> double conversion could
    // round (beyond 2^53) is infinite anyway.
    const bool is_unsigned = value.is_number_unsigned();
    const uint64_t u = is_unsigned ? value.get<uint64_t>() : 0;
    const int64_t s = is_unsigned ? 0 : value.get<int64_t>();
    if (dtype == v1::FLOAT32) {
      return std::bit_cast<uint32_t>(is_unsigned ? static_cast<float>(u) : static_cast<float>(s));
    }
    const double number = is_unsigned ? static_cast<double>(u) : static_cast<double>(s);
    return is64 ? std::bit_cast<uint64_t>(number) : RoundToFloat16(number).bits;
  }
  if (IsFloatNumber(value)) {
    if (is64) return std::bit_cast<uint64_t>(NearestDouble(value));
    if (!value.is_binary()) return RoundTo(dtype, value.get<double>()).bits;
    // The nearest double is a tie for the narrow type, so decide from the text:
    // when the text is not exactly that double, the double on its other side
    // rounds the way the text does.
    const auto [low, high] = DecimalBounds(DecimalText(value));
    const Rounded rounded = RoundTo(dtype, low);
    return low != high && rounded.was_tie ? RoundTo(dtype, high).bits : rounded.bits;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "expected a number, \"nan\", \"inf\" or \"-inf\", got ", Describe(value)));
}

void AppendLittleEndian(uint64_t bits, int size, std::string* out) {
  for (int i = 0; i < size; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

uint64_t ReadLittleEndian(const char* bytes, int size) {
  uint64_t bits = 0;
  for (int i = 0; i < size; ++i) bits |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return bits;
}

// Encodes one element of `dtype` from JSON.
absl::Status AppendElement(v1::DType dtype, const Json& value, std::string* out) {
  const int size = ElementSize(dtype);
  if (IsFloat(dtype)) {
    ASSIGN_OR_RETURN(const uint64_t bits, FloatBitsFromJson(dtype, value));
    AppendLittleEndian(bits, size, out);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const Int128 integer, IntegerFromJson(value));
  const auto [low, high] = IntegerRange(dtype);
  if (integer < low || integer > high) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(value), " is out of range for ", DTypeName(dtype)));
  }
  // Two's complement: the low bytes of the value.
  AppendLittleEndian(static_cast<uint64_t>(integer), size, out);
  return absl::OkStatus();
}

// ---- Structure --------------------------------------------------------------

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
        absl::StrCat(where, ": expected a list, got ", Describe(value)));
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
        absl::StrCat("attrs: expected an object, got ", Describe(*attrs)));
  }
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (const auto& [key, value] : attrs->items()) {
    const std::string where = absl::StrCat("attrs.", key);
    const google::protobuf::FieldDescriptor* field =
        message->GetDescriptor()->FindFieldByName(key);
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
    return absl::InvalidArgumentError(absl::StrCat("expected an object, got ", Describe(json)));
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
    return absl::InvalidArgumentError(absl::StrCat("expected an object, got ", Describe(expect)));
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
          absl::StrCat("error: ", Describe(error), " is not a gRPC error code name"));
    }
    c->expected_error = *code;
    return absl::OkStatus();
  }
  const Json& outputs = expect["outputs"];
  if (!outputs.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs: expected a list, got ", Describe(outputs)));
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

// ---- Rendering --------------------------------------------------------------

template <typename Float>
std::string FloatToJson(Float value) {
  if (std::isnan(value)) return "\"nan\"";
  if (std::isinf(value)) return value > 0 ? "\"inf\"" : "\"-inf\"";
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  // "2" and "-0" would read back as integers (and -0 as 0).
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

template <typename Integer>
std::string IntegerToJson(Integer value) {
  const std::string digits = std::to_string(value);
  // Beyond 2^53 many JSON readers lose precision, so those are strings.
  constexpr Int128 kLimit = Int128{1} << 53;
  const Int128 wide = value;
  return wide > kLimit || wide < -kLimit ? absl::StrCat("\"", digits, "\"") : digits;
}

std::string ErrorLine(absl::string_view name, const absl::Status& status) {
  return absl::StrCat("{\"name\":", JsonString(name), ",\"error\":{\"code\":",
                      JsonString(absl::StatusCodeToString(status.code())),
                      ",\"message\":", JsonString(status.message()), "}}");
}

// Coordinates of the `index`-th element in row-major order.
std::vector<int64_t> Coordinates(absl::Span<const int64_t> sizes, int64_t index) {
  std::vector<int64_t> coordinates(sizes.size());
  for (size_t i = sizes.size(); i > 0; --i) {
    coordinates[i - 1] = index % sizes[i - 1];
    index /= sizes[i - 1];
  }
  return coordinates;
}

// One element for a message; with its bits when the text alone would not show
// the difference (NaN payloads).
std::string ElementForMessage(v1::DType dtype, const char* bytes, bool with_bits) {
  std::string text = ElementToJson(dtype, bytes);
  if (with_bits) {
    const int size = ElementSize(dtype);
    absl::StrAppend(&text, " (bits 0x",
                    absl::StrFormat("%0*x", 2 * size, ReadLittleEndian(bytes, size)), ")");
  }
  return text;
}

// What differs between one expected output and the returned one, or "".
std::string CompareTensor(const HostTensor& expected, const v1::OutputDesc* requested,
                          const HostTensor& got) {
  if (got.dtype != expected.dtype) {
    return absl::StrCat("dtype is ", DTypeName(got.dtype), " (", static_cast<int>(got.dtype),
                        "), expected ", DTypeName(expected.dtype));
  }
  if (got.sizes != expected.sizes) {
    return absl::StrCat("sizes are ", FormatDims(got.sizes), ", expected ",
                        FormatDims(expected.sizes));
  }
  if (requested != nullptr && !requested->strides().empty() &&
      !std::equal(got.strides.begin(), got.strides.end(), requested->strides().begin(),
                  requested->strides().end())) {
    return absl::StrCat("strides are ", FormatDims(got.strides), ", expected ",
                        FormatDims(requested->strides()));
  }
  if (absl::StatusOr<int64_t> checked = CheckLayout(got); !checked.ok()) {
    return std::string(checked.status().message());
  }
  const int size = ElementSize(got.dtype);
  int64_t index = 0;
  int64_t differing = 0;
  int64_t first = -1;
  int64_t first_offset = 0;
  ForEachElementOffset(got.sizes, EffectiveStrides(got), [&](int64_t offset) {
    if (std::memcmp(got.data.data() + offset * size, expected.data.data() + index * size,
                    size) != 0) {
      if (differing++ == 0) {
        first = index;
        first_offset = offset;
      }
    }
    ++index;
  });
  if (differing == 0) return "";
  const char* got_bytes = got.data.data() + first_offset * size;
  const char* expected_bytes = expected.data.data() + first * size;
  const bool with_bits =
      ElementToJson(got.dtype, got_bytes) == ElementToJson(got.dtype, expected_bytes);
  return absl::StrCat("element ", FormatDims(Coordinates(got.sizes, first)), " is ",
                      ElementForMessage(got.dtype, got_bytes, with_bits), ", expected ",
                      ElementForMessage(got.dtype, expected_bytes, with_bits), " (", differing,
                      " of ", index, " elements differ)");
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  Json root;
  DomBuilder builder(&root);
  if (!Json::sax_parse(text.begin(), text.end(), &builder)) {
    return absl::InvalidArgumentError(builder.error());
  }
  return root;
}

absl::StatusOr<HostTensor> TensorFromJson(const Json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tensor is an object, got ", Describe(json)));
  }
  RETURN_IF_ERROR(CheckKeys(json, {"dtype", "sizes", "strides", "data"}, "a tensor"));
  HostTensor tensor;
  ASSIGN_OR_RETURN(const Json* dtype, Required(json, "dtype"));
  std::optional<v1::DType> parsed_dtype;
  if (dtype->is_string()) parsed_dtype = DTypeFromName(dtype->get_ref<const std::string&>());
  if (!parsed_dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype: ", Describe(*dtype), " is not a dtype"));
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
        absl::StrCat("data: expected a list, got ", Describe(*data)));
  }
  tensor.data.reserve(data->size() * ElementSize(tensor.dtype));
  for (size_t i = 0; i < data->size(); ++i) {
    absl::Status appended = AppendElement(tensor.dtype, (*data)[i], &tensor.data);
    if (!appended.ok()) return Within(absl::StrCat("data[", i, "]: "), appended);
  }
  return tensor;
}

absl::StatusOr<Case> CaseFromJson(const Json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("a case is an object, got ", Describe(json)));
  }
  Case c;
  ASSIGN_OR_RETURN(const Json* name, Required(json, "name"));
  if (!name->is_string() || name->get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: expected a non-empty string, got ", Describe(*name)));
  }
  c.name = name->get<std::string>();
  c.request.set_id(c.name);

  ASSIGN_OR_RETURN(const Json* op, Required(json, "op"));
  if (!op->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("op: expected a string, got ", Describe(*op)));
  }
  auto attrs = json.find("attrs");
  RETURN_IF_ERROR(SetAttrs(op->get_ref<const std::string&>(),
                           attrs == json.end() ? nullptr : &*attrs, &c.request));

  ASSIGN_OR_RETURN(const Json* inputs, Required(json, "inputs"));
  if (!inputs->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs: expected an object, got ", Describe(*inputs)));
  }
  for (const auto& [input_name, input] : inputs->items()) {
    absl::StatusOr<HostTensor> tensor = TensorFromJson(input);
    if (!tensor.ok()) return Within(absl::StrCat("inputs.", input_name, ": "), tensor.status());
    v1::Tensor& wire = (*c.request.mutable_inputs())[input_name];
    wire.set_dtype(tensor->dtype);
    wire.mutable_sizes()->Add(tensor->sizes.begin(), tensor->sizes.end());
    wire.mutable_strides()->Add(tensor->strides.begin(), tensor->strides.end());
    wire.set_data(std::move(tensor->data));
  }

  if (auto outputs = json.find("outputs"); outputs != json.end()) {
    if (!outputs->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs: expected a list, got ", Describe(*outputs)));
    }
    for (size_t i = 0; i < outputs->size(); ++i) {
      absl::StatusOr<v1::OutputDesc> desc = OutputDescFromJson((*outputs)[i]);
      if (!desc.ok()) return Within(absl::StrCat("outputs[", i, "]: "), desc.status());
      *c.request.add_outputs() = *std::move(desc);
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
    cases.push_back(LoadedCase{std::move(name), CaseFromJson(entry)});
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
    std::move(parsed->begin(), parsed->end(), std::back_inserter(cases));
  }
  return cases;
}

std::optional<std::string> FindMismatch(const Case& c, const absl::StatusOr<Result>& got) {
  const std::string expected_code = absl::StatusCodeToString(c.expected_error);
  if (c.expected_error != absl::StatusCode::kOk) {
    if (got.ok()) {
      return absl::StrCat("expected ", expected_code, ", got ", got->outputs.size(),
                          " outputs from ", got->backend);
    }
    if (got.status().code() != c.expected_error) {
      return absl::StrCat("expected ", expected_code, ", got ", got.status().ToString());
    }
    return std::nullopt;
  }
  if (!got.ok()) return absl::StrCat("expected outputs, got ", got.status().ToString());
  if (got->outputs.size() != c.expected_outputs.size()) {
    return absl::StrCat("expected ", c.expected_outputs.size(), " outputs, got ",
                        got->outputs.size());
  }
  std::string differences;
  for (size_t i = 0; i < got->outputs.size(); ++i) {
    const v1::OutputDesc* requested =
        static_cast<int>(i) < c.request.outputs_size() ? &c.request.outputs(static_cast<int>(i))
                                                       : nullptr;
    const std::string difference = CompareTensor(c.expected_outputs[i], requested, got->outputs[i]);
    if (!difference.empty()) {
      absl::StrAppend(&differences, differences.empty() ? "" : "; ", "outputs[", i,
                      "]: ", difference);
    }
  }
  if (differences.empty()) return std::nullopt;
  return differences;
}

std::string ElementToJson(v1::DType dtype, const char* bytes) {
  const uint64_t bits = ReadLittleEndian(bytes, ElementSize(dtype));
  switch (dtype) {
    case v1::FLOAT64:
      return FloatToJson(std::bit_cast<double>(bits));
    case v1::FLOAT32:
      return FloatToJson(std::bit_cast<float>(static_cast<uint32_t>(bits)));
    case v1::FLOAT16:
      // Exact: every float16 value is a float value.
      return FloatToJson(static_cast<float>(Float16ToDouble(static_cast<uint16_t>(bits))));
    case v1::INT64:
      return IntegerToJson(static_cast<int64_t>(bits));
    case v1::INT32:
      return IntegerToJson(static_cast<int32_t>(static_cast<uint32_t>(bits)));
    case v1::INT16:
      return IntegerToJson(static_cast<int16_t>(static_cast<uint16_t>(bits)));
    case v1::INT8:
      return IntegerToJson(static_cast<int8_t>(static_cast<uint8_t>(bits)));
    case v1::UINT64:
    case v1::UINT32:
    case v1::UINT16:
    case v1::UINT8:
      return IntegerToJson(bits);
    default:
      return "null";
  }
}

absl::StatusOr<std::string> TensorToJson(const HostTensor& tensor) {
  ASSIGN_OR_RETURN(const int64_t elements, CheckLayout(tensor));
  const std::vector<int64_t> strides = EffectiveStrides(tensor);
  const int size = ElementSize(tensor.dtype);
  std::string json = absl::StrCat("{\"dtype\":\"", DTypeName(tensor.dtype), "\",\"sizes\":",
                                  FormatDims(tensor.sizes), ",\"strides\":", FormatDims(strides),
                                  ",\"data\":[");
  // A guess at the text's size, capped: a broadcast output of 2^32 elements from
  // a few bytes must not reserve gigabytes up front.
  json.reserve(json.size() + static_cast<size_t>(std::min<int64_t>(elements, 1 << 24)) * 4 + 2);
  bool first = true;
  ForEachElementOffset(tensor.sizes, strides, [&](int64_t offset) {
    if (!first) json += ',';
    first = false;
    json += ElementToJson(tensor.dtype, tensor.data.data() + offset * size);
  });
  json += "]}";
  return json;
}

std::string RunLineJson(absl::string_view name, const absl::StatusOr<Result>& result) {
  if (!result.ok()) return ErrorLine(name, result.status());
  std::string line = absl::StrCat("{\"name\":", JsonString(name),
                                  ",\"backend\":", JsonString(result->backend), ",\"outputs\":[");
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    absl::StatusOr<std::string> tensor = TensorToJson(result->outputs[i]);
    if (!tensor.ok()) {
      return ErrorLine(name, absl::InternalError(
                                 absl::StrCat("output ", i, ": ", tensor.status().message())));
    }
    absl::StrAppend(&line, i == 0 ? "" : ",", *tensor);
  }
  line += "]}";
  return line;
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
