// What the client's JSON tests share: a matcher for an OK StatusOr's value and
// little-endian element bytes.
#ifndef TENSOROP_TESTS_CLIENT_JSON_VALUES_H_
#define TENSOROP_TESTS_CLIENT_JSON_VALUES_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "gmock/gmock.h"

namespace tensorop::client::testing {

// The value of an OK StatusOr matches `matcher` (gMock's Optional() does not
// take a StatusOr, and Debian's Abseil has no status matchers).
MATCHER_P(IsOkAndHolds, matcher, "") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  return ::testing::ExplainMatchResult(matcher, *arg, result_listener);
}

// `values` little-endian, `size` bytes each.
inline std::string LittleEndian(std::initializer_list<uint64_t> values, int size) {
  std::string bytes;
  for (uint64_t value : values) {
    for (int i = 0; i < size; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
  return bytes;
}

}  // namespace tensorop::client::testing

#endif  // TENSOROP_TESTS_CLIENT_JSON_VALUES_H_
