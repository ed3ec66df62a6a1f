#include "server/memory/input_buffer.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kLarge = int64_t{BufferPool::kMinBytes};

TEST(InputBufferTest, AResizedBufferReservesItsCapacityAndKeepsItsBytes) {
  MemoryBudget budget(int64_t{1} << 30);
  {
    InputBuffer buffer(budget.Empty());
    ASSERT_OK(buffer.Resize(100, nullptr, "input \"a\""));
    EXPECT_EQ(budget.reserved(), 100);
    std::memcpy(buffer.Extend(5), "hello", 5);
    // Doubled: the new capacity is reserved, the old one's goes with it.
    ASSERT_OK(buffer.Resize(200, nullptr, "input \"a\""));
    EXPECT_EQ(buffer.reserved(), 200);
    EXPECT_EQ(budget.reserved(), 200);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffer.bytes().data()), 5), "hello");
  }
  EXPECT_EQ(budget.reserved(), 0);  // freed with the buffer
}

TEST(InputBufferTest, AResizeThatDoesNotFitLeavesTheBufferAsItWas) {
  MemoryBudget budget(250);
  InputBuffer buffer(budget.Empty());
  ASSERT_OK(buffer.Resize(100, nullptr, "input \"a\""));
  std::memcpy(buffer.Extend(3), "abc", 3);
  // 200 more beside the 100 held, for the moment of the copy: over 250.
  EXPECT_THAT(
      buffer.Resize(200, nullptr, "input \"a\" at 200 bytes"),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("input \"a\" at 200 bytes")));
  EXPECT_EQ(buffer.capacity(), 100);
  EXPECT_EQ(buffer.reserved(), 100);
  EXPECT_EQ(budget.reserved(), 100);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffer.bytes().data()), 3), "abc");
}

TEST(InputBufferTest, AddressSpaceIsReservedAsItsBytesTouchIt) {
  MemoryBudget budget(int64_t{1} << 30);
  InputBuffer buffer(budget.Empty());
  ASSERT_TRUE(buffer.SizeAhead(kLarge, nullptr, "input \"a\""));
  EXPECT_EQ(buffer.capacity(), kLarge);
  EXPECT_EQ(budget.reserved(), 0);
  ASSERT_OK(buffer.HoldAtLeast(4096, "input \"a\""));
  ASSERT_OK(buffer.HoldAtLeast(1000, "input \"a\""));  // held already
  EXPECT_EQ(budget.reserved(), 4096);
  // Bytes a request reserved with itself and copied here are taken over.
  MemoryBudget::Reservation request = budget.Empty();
  ASSERT_OK(request.Grow(500, "the request"));
  buffer.TakeOver(request, 300);
  EXPECT_EQ(buffer.reserved(), 4396);
  EXPECT_EQ(request.bytes(), 200);
  EXPECT_EQ(budget.reserved(), 4596);
}

TEST(InputBufferTest, APoolsResidentBufferIsReservedWholeOrNotTaken) {
  MemoryBudget budget(int64_t{1} << 30);
  BufferPool pool(int64_t{64} << 20, &budget);
  pool.Give(pool.Take(kLarge), BufferPool::CapacityFor(kLarge));  // now kept, and reserved
  const int64_t kept = budget.reserved();
  ASSERT_GT(kept, 0);
  {
    InputBuffer buffer(budget.Empty());
    ASSERT_TRUE(buffer.SizeAhead(kLarge, &pool, "input \"a\""));
    EXPECT_EQ(buffer.reserved(), kLarge);  // its pages are all there
    EXPECT_EQ(budget.reserved(), kLarge);  // the pool's reservation went with it
  }
  // Back in the pool, reserved as the pool's again.
  EXPECT_EQ(budget.reserved(), kept);
  // A budget without room for the resident buffer: not taken, nothing held.
  MemoryBudget tight(kLarge / 2);
  BufferPool tight_pool(int64_t{64} << 20, nullptr);
  tight_pool.Give(tight_pool.Take(kLarge), BufferPool::CapacityFor(kLarge));
  InputBuffer refused(tight.Empty());
  EXPECT_FALSE(refused.SizeAhead(kLarge, &tight_pool, "input \"a\""));
  EXPECT_EQ(refused.capacity(), 0);
  EXPECT_EQ(tight.reserved(), 0);
  EXPECT_EQ(tight_pool.kept_bytes(), static_cast<int64_t>(BufferPool::CapacityFor(kLarge)));
}

}  // namespace
}  // namespace tensorop::server
