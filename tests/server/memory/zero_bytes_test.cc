#include "server/memory/zero_bytes.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace tensorop::server {
namespace {

bool AllZero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

TEST(ZeroBytesTest, NoBytesIsAnEmptySpan) {
  absl::StatusOr<std::span<const std::byte>> zeros = ZeroBytes(0);
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_TRUE(zeros->empty());
}

TEST(ZeroBytesTest, ShorterAsksShareOneMappingAndEarlierSpansStayValid) {
  absl::StatusOr<std::span<const std::byte>> small = ZeroBytes(5000);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->size(), 5000u);
  EXPECT_TRUE(AllZero(*small));
  // Up to 1 MiB from the same mapping: no mapping per ask.
  absl::StatusOr<std::span<const std::byte>> mib = ZeroBytes(int64_t{1} << 20);
  ASSERT_TRUE(mib.ok()) << mib.status();
  EXPECT_EQ(mib->data(), small->data());
  // More than any before: a new mapping, a power of two long.
  absl::StatusOr<std::span<const std::byte>> more = ZeroBytes((int64_t{3} << 20) + 1);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_NE(more->data(), small->data());
  EXPECT_EQ(more->size(), (size_t{3} << 20) + 1);
  EXPECT_TRUE(AllZero(*more));
  absl::StatusOr<std::span<const std::byte>> four_mib = ZeroBytes(int64_t{4} << 20);
  ASSERT_TRUE(four_mib.ok()) << four_mib.status();
  EXPECT_EQ(four_mib->data(), more->data());
  // The earlier mapping is still there.
  EXPECT_TRUE(AllZero(*small));
}

TEST(ZeroBytesTest, MoreThanTheAddressSpaceIsResourceExhausted) {
  const int64_t bytes = std::numeric_limits<int64_t>::max();
  absl::StatusOr<std::span<const std::byte>> zeros = ZeroBytes(bytes);
  EXPECT_EQ(zeros.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(zeros.status().message(), "no address space to stand for 9223372036854775807 bytes");
  // And a later ask is served as before.
  absl::StatusOr<std::span<const std::byte>> after = ZeroBytes(64);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(AllZero(*after));
}

}  // namespace
}  // namespace tensorop::server
