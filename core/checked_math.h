// Overflow-checked 64-bit arithmetic. Every size, stride and offset that comes
// from a request goes through these before it is used.
#ifndef TENSOROP_CORE_CHECKED_MATH_H_
#define TENSOROP_CORE_CHECKED_MATH_H_

#include <cstdint>
#include <optional>

namespace tensorop {

inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_sub_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

}  // namespace tensorop

#endif  // TENSOROP_CORE_CHECKED_MATH_H_
