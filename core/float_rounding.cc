#include "core/float_rounding.h"

#include <bit>
#include <cfenv>
#include <cstdint>
#include <cstdlib>

namespace tensorop {
namespace {

constexpr int kDoubleMantissaBits = 52;
constexpr int kDoubleBias = 1023;
constexpr uint64_t kDoubleMantissaMask = (uint64_t{1} << kDoubleMantissaBits) - 1;

// Rounds a double to the binary format with `exponent_bits` and `mantissa_bits`
// (binary16: 5, 10; binary32: 8, 23) in integer arithmetic, so there is exactly one
// rounding and it can report ties. One body serves both widths.
Rounded RoundToNarrow(double value, int exponent_bits, int mantissa_bits) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << (exponent_bits + mantissa_bits);
  const int biased_exponent = static_cast<int>((bits >> kDoubleMantissaBits) & 0x7FF);
  const uint64_t mantissa = bits & kDoubleMantissaMask;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const uint32_t infinity = ((uint32_t{1} << exponent_bits) - 1) << mantissa_bits;
  const int drop = kDoubleMantissaBits - mantissa_bits;

  if (biased_exponent == 0x7FF) {
    if (mantissa == 0) return {sign | infinity, false};
    uint32_t payload = static_cast<uint32_t>(mantissa >> drop);
    // Dropping low payload bits must not turn the NaN into an infinity.
    if (payload == 0) payload = uint32_t{1} << (mantissa_bits - 1);
    return {sign | infinity | payload, false};
  }
  // Zero, and double subnormals (< 2^-1022), which are far below half the smallest
  // binary32 subnormal: both round to a signed zero without a tie.
  if (biased_exponent == 0) return {sign, false};

  const int exponent = biased_exponent - kDoubleBias;  // value in [2^e, 2^(e+1))
  if (exponent > bias) return {sign | infinity, false};

  // Below the narrow format's smallest normal exponent the quantum stays fixed
  // (subnormals). `shift` is how many low bits of the 53-bit significand go.
  const int min_exponent = 1 - bias;
  const int target_exponent = exponent < min_exponent ? min_exponent : exponent;
  const int shift = drop + (target_exponent - exponent);
  const uint64_t significand = (uint64_t{1} << kDoubleMantissaBits) | mantissa;
  if (shift > kDoubleMantissaBits + 1) return {sign, false};  // below half a quantum

  uint64_t quanta = significand >> shift;
  const uint64_t remainder = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  const bool tie = remainder == half;
  if (remainder > half || (tie && (quanta & 1) != 0)) ++quanta;
  // For normals `quanta` includes the implicit leading 1, which this sum carries
  // into the exponent field; a carry out of the largest exponent yields infinity,
  // and a subnormal that rounds up to 2^mantissa_bits becomes the smallest normal.
  const uint64_t field = static_cast<uint64_t>(target_exponent + bias - 1) << mantissa_bits;
  return {sign | static_cast<uint32_t>(field + quanta), tie};
}

}  // namespace

Rounded RoundToFloat16(double value) { return RoundToNarrow(value, 5, 10); }

Rounded RoundToFloat32(double value) { return RoundToNarrow(value, 8, 23); }

Rounded RoundToBfloat16(double value) { return RoundToNarrow(value, 8, 7); }

double Bfloat16ToDouble(uint16_t bits) {
  if ((bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0) {
    // NaN: the payload moves to the top of the double's mantissa (a float ->
    // double conversion would quiet a signalling one).
    const uint64_t sign = static_cast<uint64_t>(bits >> 15) << 63;
    return std::bit_cast<double>(sign | (uint64_t{0x7FF} << 52) |
                                 (static_cast<uint64_t>(bits & 0x7F) << 45));
  }
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

double Float16ToDouble(uint16_t bits) {
  const uint64_t sign = static_cast<uint64_t>(bits >> 15) << 63;
  const int exponent = (bits >> 10) & 0x1F;
  const uint64_t mantissa = bits & 0x3FF;
  if (exponent == 0x1F) {
    // Infinity or NaN: the payload moves to the top of the double's mantissa.
    return std::bit_cast<double>(sign | (uint64_t{0x7FF} << 52) | (mantissa << 42));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in a double.
    const double magnitude = static_cast<double>(mantissa) * 0x1p-24;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<double>(sign | (static_cast<uint64_t>(exponent - 15 + kDoubleBias) << 52) |
                               (mantissa << 42));
}

// glibc's strtod rounds in the current rounding mode.
std::pair<double, double> DecimalBounds(const std::string& text) {
  const int saved = std::fegetround();
  std::fesetround(FE_DOWNWARD);
  const double low = std::strtod(text.c_str(), nullptr);
  std::fesetround(FE_UPWARD);
  const double high = std::strtod(text.c_str(), nullptr);
  std::fesetround(saved);
  return {low, high};
}

}  // namespace tensorop
