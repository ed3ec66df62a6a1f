#include "core/element_text.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/float_rounding.h"

namespace tensorop {
namespace {

// `text` quoted for a message, cut to 40 characters.
std::string QuotedText(absl::string_view text) {
  constexpr size_t kShown = 40;
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kShown)),
                      text.size() > kShown ? "...\"" : "\"");
}

bool AllDigits(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// [-]digits[.digits][(e|E)[+|-]digits], digits on at least one side of the point.
bool IsDecimalNumber(absl::string_view text) {
  (void)absl::ConsumePrefix(&text, "-");
  const size_t exponent = text.find_first_of("eE");
  absl::string_view mantissa = text.substr(0, exponent);
  if (exponent != absl::string_view::npos) {
    absl::string_view power = text.substr(exponent + 1);
    if (!absl::ConsumePrefix(&power, "-")) absl::ConsumePrefix(&power, "+");
    if (!AllDigits(power)) return false;
  }
  const size_t point = mantissa.find('.');
  if (point == absl::string_view::npos) return AllDigits(mantissa);
  const absl::string_view whole = mantissa.substr(0, point);
  const absl::string_view fraction = mantissa.substr(point + 1);
  return (AllDigits(whole) || whole.empty()) && (AllDigits(fraction) || fraction.empty()) &&
         !(whole.empty() && fraction.empty());
}

// A decimal integer that fits 128 bits, or nullopt.
std::optional<absl::int128> DecimalInteger(absl::string_view text) {
  const bool negative = absl::ConsumePrefix(&text, "-");
  // 38 digits stay below 2^127 (about 1.7e38).
  if (!AllDigits(text) || text.size() > 38) return std::nullopt;
  absl::int128 value = 0;
  for (char c : text) value = value * 10 + (c - '0');
  return negative ? -value : value;
}

struct IntegerRange {
  absl::int128 min;
  absl::int128 max;
};

IntegerRange RangeOf(DType dtype) {
  switch (dtype) {
    case DType::kInt64:
      return {INT64_MIN, INT64_MAX};
    case DType::kInt32:
      return {INT32_MIN, INT32_MAX};
    case DType::kInt16:
      return {INT16_MIN, INT16_MAX};
    case DType::kInt8:
      return {INT8_MIN, INT8_MAX};
    case DType::kUint64:
      return {0, UINT64_MAX};
    case DType::kUint32:
      return {0, UINT32_MAX};
    case DType::kUint16:
      return {0, UINT16_MAX};
    default:  // uint8, bool
      return {0, dtype == DType::kBool ? 1 : UINT8_MAX};
  }
}

std::string FormatInt128(absl::int128 value) {
  if (value >= 0) return absl::StrCat(absl::Uint128Low64(absl::uint128(value)));
  return absl::StrCat("-", absl::Uint128Low64(absl::uint128(-value)));
}

absl::StatusOr<uint64_t> IntegerBits(DType dtype, absl::string_view text, absl::string_view what) {
  const IntegerRange range = RangeOf(dtype);
  const std::string takes =
      dtype == DType::kBool
          ? "bool takes true, false, 1 or 0"
          : absl::StrCat(DTypeName(dtype), " takes an integer from ", FormatInt128(range.min),
                         " to ", FormatInt128(range.max));
  if (dtype == DType::kBool && (text == "true" || text == "false")) return text == "true" ? 1 : 0;
  std::optional<absl::int128> value = DecimalInteger(text);
  if (!value && IsDecimalNumber(text)) {
    // An integral number written as a float ("2.0", "1e3"), exactly so.
    const auto [low, high] = DecimalBounds(std::string(text));
    if (!(std::fabs(low) <= 0x1p53)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", QuotedText(text),
                       ", a float beyond 2^53 (write a large integer without a point or "
                       "exponent); ",
                       takes));
    }
    if (low != high || low != std::trunc(low)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", QuotedText(text), ", not an integer; ", takes));
    }
    value = static_cast<absl::int128>(static_cast<int64_t>(low));
  }
  if (!value) {
    if (IsDecimalNumber(text)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", QuotedText(text), ", out of range; ", takes));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", QuotedText(text), "; ", takes));
  }
  if (*value < range.min || *value > range.max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", QuotedText(text), ", out of range; ", takes));
  }
  // Two's complement in 64 bits; the caller keeps the dtype's low bytes.
  return absl::Uint128Low64(absl::uint128(*value));
}

Rounded RoundToNarrowFloat(DType dtype, double value) {
  switch (dtype) {
    case DType::kFloat16:
      return RoundToFloat16(value);
    case DType::kBfloat16:
      return RoundToBfloat16(value);
    default:
      return RoundToFloat32(value);
  }
}

absl::StatusOr<uint64_t> FloatBits(DType dtype, absl::string_view text, absl::string_view what) {
  const bool wide = dtype == DType::kFloat64;
  if (text == "nan") {
    // The quiet NaN with sign 0 and no payload (OPERATORS.md "Pad").
    if (wide) return uint64_t{0x7FF8000000000000};
    return RoundToNarrowFloat(dtype, std::bit_cast<double>(uint64_t{0x7FF8000000000000})).bits;
  }
  if (text == "inf" || text == "-inf") {
    const double infinity = text == "inf" ? HUGE_VAL : -HUGE_VAL;
    return wide ? std::bit_cast<uint64_t>(infinity) : RoundToNarrowFloat(dtype, infinity).bits;
  }
  if (!IsDecimalNumber(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", QuotedText(text), "; ", DTypeName(dtype),
                     " takes a number, \"nan\", \"inf\" or \"-inf\""));
  }
  const std::string terminated(text);
  const double nearest = std::strtod(terminated.c_str(), nullptr);
  if (wide) return std::bit_cast<uint64_t>(nearest);
  const Rounded rounded = RoundToNarrowFloat(dtype, nearest);
  if (!rounded.was_tie) return rounded.bits;
  // The nearest double is a tie for the narrow type: when the text is not
  // exactly that double, the double on its other side rounds as the text does.
  const auto [low, high] = DecimalBounds(terminated);
  const Rounded from_low = RoundToNarrowFloat(dtype, low);
  return low != high && from_low.was_tie ? RoundToNarrowFloat(dtype, high).bits : from_low.bits;
}

}  // namespace

absl::StatusOr<uint64_t> ElementBitsFromText(DType dtype, absl::string_view text,
                                             absl::string_view what) {
  if (text.size() > kMaxElementTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", text.size(), " characters; at most ", kMaxElementTextBytes, " are read"));
  }
  return IsFloat(dtype) ? FloatBits(dtype, text, what) : IntegerBits(dtype, text, what);
}

}  // namespace tensorop
