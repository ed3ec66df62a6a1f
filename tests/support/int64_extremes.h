// The extremes of int64_t, which the validation tests feed as sizes, strides
// and bounds to reach the overflow checks.
#ifndef TENSOROP_TESTS_SUPPORT_INT64_EXTREMES_H_
#define TENSOROP_TESTS_SUPPORT_INT64_EXTREMES_H_

#include <cstdint>
#include <limits>

namespace tensorop::testing {

inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_INT64_EXTREMES_H_
