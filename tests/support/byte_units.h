// Byte units for tests' sizes and budgets.
#ifndef TENSOROP_TESTS_SUPPORT_BYTE_UNITS_H_
#define TENSOROP_TESTS_SUPPORT_BYTE_UNITS_H_

#include <cstdint>

namespace tensorop::testing {

inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_BYTE_UNITS_H_
