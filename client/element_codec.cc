#include "client/element_codec.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/exact_json.h"
#include "client/host_tensor.h"
#include "client/status_macros.h"
#include "core/float_rounding.h"

namespace tensorop::client {
namespace {

using Json = nlohmann::json;
using Int128 = __int128;

constexpr double kTwoTo53 = 9007199254740992.0;

// A JSON integer, integral float below 2^53, or decimal string, widened so every
// dtype's range check is one comparison.
absl::StatusOr<Int128> IntegerFromJson(const Json& value) {
  if (value.is_number_unsigned()) return Int128{value.get<uint64_t>()};
  if (value.is_number_integer()) return Int128{value.get<int64_t>()};
  if (IsFloatNumber(value)) {
    const double number = NearestDouble(value);
    if (!std::isfinite(number) || number != std::trunc(number)) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeJson(value), " is not an integer"));
    }
    // From 2^53 on, neighbouring integers share a double: the text may have
    // named another one.
    if (std::fabs(number) >= kTwoTo53) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeJson(value), " is too large for a JSON float to be exact; write it as a string"));
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
  return absl::InvalidArgumentError(absl::StrCat("expected an integer, got ", DescribeJson(value)));
}

}  // namespace

absl::StatusOr<int64_t> Int64FromJson(const Json& value) {
  ASSIGN_OR_RETURN(const Int128 integer, IntegerFromJson(value));
  if (integer < INT64_MIN || integer > INT64_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeJson(value), " is out of range for int64"));
  }
  return static_cast<int64_t>(integer);
}

namespace {

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
  switch (dtype) {
    case v1::FLOAT16:
      return RoundToFloat16(value);
    case v1::BFLOAT16:
      return RoundToBfloat16(value);
    default:
      return RoundToFloat32(value);
  }
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
    case v1::BFLOAT16:
      return {0x8000, 0x7F80, 0x40};
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
    return is64 ? std::bit_cast<uint64_t>(number) : RoundTo(dtype, number).bits;
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
  return absl::InvalidArgumentError(
      absl::StrCat("expected a number, \"nan\", \"inf\" or \"-inf\", got ", DescribeJson(value)));
}

void AppendLittleEndian(uint64_t bits, int size, std::string* out) {
  for (int i = 0; i < size; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

}  // namespace

uint64_t ReadLittleEndian(const char* bytes, int size) {
  uint64_t bits = 0;
  for (int i = 0; i < size; ++i) bits |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return bits;
}

namespace {

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

}  // namespace

// Encodes one element of `dtype` from JSON.
absl::Status AppendElement(v1::DType dtype, const Json& value, std::string* out) {
  const int size = ElementSize(dtype);
  if (dtype == v1::BOOL) {
    if (!value.is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected true or false (bool), got ", DescribeJson(value)));
    }
    out->push_back(value.get<bool>() ? 1 : 0);
    return absl::OkStatus();
  }
  if (IsFloat(dtype)) {
    ASSIGN_OR_RETURN(const uint64_t bits, FloatBitsFromJson(dtype, value));
    AppendLittleEndian(bits, size, out);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const Int128 integer, IntegerFromJson(value));
  const auto [low, high] = IntegerRange(dtype);
  if (integer < low || integer > high) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeJson(value), " is out of range for ", DTypeName(dtype)));
  }
  // Two's complement: the low bytes of the value.
  AppendLittleEndian(static_cast<uint64_t>(integer), size, out);
  return absl::OkStatus();
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
    case v1::BFLOAT16:
      return FloatToJson(static_cast<float>(Bfloat16ToDouble(static_cast<uint16_t>(bits))));
    case v1::BOOL:
      // Any nonzero byte is shown as it is: operators copy bytes, never check them.
      return bits == 0 ? "false" : bits == 1 ? "true" : std::to_string(bits);
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

}  // namespace tensorop::client
