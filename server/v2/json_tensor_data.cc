// A tensor's JSON `data` in the v2 REST API, both ways (json_tensor_data.h).
#include "server/v2/json_tensor_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/float_rounding.h"
#include "core/status_macros.h"
#include "server/v2/bounded_json.h"
#include "server/v2/inference_models.h"

namespace tensorop::server {
namespace {

using Json = nlohmann::json;

template <typename T>
void Append(T value, std::string& out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Triton's names of the floats JSON has no number for (its JSON writes them
// bare; ParseBoundedJson reads them as these strings).
constexpr absl::string_view kNaN = "NaN";
constexpr absl::string_view kInfinity = "Infinity";
constexpr absl::string_view kMinusInfinity = "-Infinity";

// The float `v` names, when it is one of those strings.
std::optional<double> NonFiniteNamed(const Json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& name = v.get_ref<const std::string&>();
  if (name == kNaN) return std::numeric_limits<double>::quiet_NaN();
  if (name == kInfinity) return std::numeric_limits<double>::infinity();
  if (name == kMinusInfinity) return -std::numeric_limits<double>::infinity();
  return std::nullopt;
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
  auto narrow = [&](double x, uint16_t bits, uint16_t infinity) -> absl::Status {
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
  std::optional<double> number = NonFiniteNamed(v);
  if (!number.has_value()) {
    if (!v.is_number()) return refuse(absl::StrCat("a number (", datatype, ")"));
    number = v.get<double>();
  }
  const double x = *number;
  if (dtype == DType::kFloat64) {
    Append(x, out);
  } else if (dtype == DType::kFloat32) {
    if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
      return refuse("within FP32's range");
    }
    Append(static_cast<float>(x), out);
  } else if (dtype == DType::kBfloat16) {
    return narrow(x, static_cast<uint16_t>(RoundToBfloat16(x).bits), 0x7f80);
  } else {
    return narrow(x, static_cast<uint16_t>(RoundToFloat16(x).bits), 0x7c00);
  }
  return absl::OkStatus();
}

// Every element of `data` (flat or nested arrays: the parse bounded their
// depth), row-major; `index` counts them for messages.
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

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

// The values that are no arrays in `data`, however nested (the parse bounded
// the depth).
int64_t JsonLeafCount(const Json& data) {
  if (!data.is_array()) return 1;
  int64_t count = 0;
  for (const Json& item : data) count += JsonLeafCount(item);
  return count;
}

absl::Status AppendJsonData(const Json& data, DType dtype, absl::string_view what,
                            std::string& out) {
  int64_t index = 0;
  return AppendData(data, dtype, what, index, out);
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
      each_narrow(&Float16ToDouble);
      break;
    case DType::kBfloat16:
      each_narrow(&tensorop::Bfloat16ToDouble);
      break;
  }
  return data;
}

std::string DataJsonText(absl::string_view bytes, DType dtype) {
  const Json data = DataJson(bytes, dtype);
  const auto finite = [](const Json& v) {
    return !v.is_number_float() || std::isfinite(v.get<double>());
  };
  if (!IsFloat(dtype) || std::all_of(data.begin(), data.end(), finite)) return DumpJson(data);
  std::string text = "[";
  for (const Json& v : data) {
    if (text.size() > 1) text += ',';
    if (finite(v)) {
      text += DumpJson(v);
    } else {
      const double x = v.get<double>();
      absl::StrAppend(&text, std::isnan(x) ? kNaN : (x > 0 ? kInfinity : kMinusInfinity));
    }
  }
  text += ']';
  return text;
}

}  // namespace tensorop::server
