// Bit-exact conversions between double and the narrower IEEE 754 formats.
//
// The conformance format writes every float as a JSON number, which we read as the
// nearest double; these functions then round that double once more, to binary32 or
// binary16, with round-to-nearest-even. They report when the double lay exactly
// halfway between two narrow values, because only then can that second rounding
// differ from rounding the decimal text directly (see case_format.cc).
#ifndef TENSOROP_CORE_FLOAT_ROUNDING_H_
#define TENSOROP_CORE_FLOAT_ROUNDING_H_

#include <cstdint>
#include <string>
#include <utility>

namespace tensorop {

// A rounded value's bit pattern, and whether the input was exactly halfway
// between two representable values (so ties-to-even decided).
struct Rounded {
  uint32_t bits = 0;
  bool was_tie = false;
};

// Rounds to binary16 (float16), nearest-even; overflows to +-inf. NaNs keep their
// sign and the top 10 payload bits (a payload that would vanish becomes quiet).
Rounded RoundToFloat16(double value);

// Rounds to binary32, nearest-even, with the same NaN rule (top 23 payload bits).
Rounded RoundToFloat32(double value);

// Rounds to bfloat16 (binary32's exponent, 7 fraction bits), nearest-even, with
// the same NaN rule (top 7 payload bits).
Rounded RoundToBfloat16(double value);

// The exact value of a binary16 bit pattern. NaN payloads (signalling or not) are
// kept in the top mantissa bits, so RoundToFloat16(Float16ToDouble(h)).bits == h
// for all 65536 patterns.
double Float16ToDouble(uint16_t bits);

// The exact value of a bfloat16 bit pattern (the upper half of a binary32's);
// NaN payloads kept as Float16ToDouble keeps them.
double Bfloat16ToDouble(uint16_t bits);

// The doubles just below and just above the exact value of decimal text (equal
// when it is exact): where a double is a tie for a narrower format, they say
// which way the text itself rounds.
std::pair<double, double> DecimalBounds(const std::string& text);

}  // namespace tensorop

#endif  // TENSOROP_CORE_FLOAT_ROUNDING_H_
