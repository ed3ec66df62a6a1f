#include "server/memory/buffer_pool.h"

#include <cstddef>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memory/memory_budget.h"
#include "server/memory/output_buffer.h"
#include "server/telemetry/metrics.h"
#include "tests/support/byte_units.h"
#include "tests/support/layout.h"

namespace tensorop::server {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMiBSize = size_t{1} << 20;
using ::tensorop::testing::kMiB;

// A packed 1-D uint8 layout of `bytes`.
Layout Bytes(int64_t bytes) { return ::tensorop::testing::MakeLayout(DType::kUint8, {bytes}); }

TEST(BufferPoolTest, CapacitiesAreWholeHugePages) {
  EXPECT_EQ(BufferPool::CapacityFor(4 * kMiBSize), 4 * kMiBSize);
  EXPECT_EQ(BufferPool::CapacityFor(4 * kMiBSize + 1), 6 * kMiBSize);
  EXPECT_EQ(BufferPool::CapacityFor(5 * kMiBSize), 6 * kMiBSize);
}

TEST(BufferPoolTest, AGivenBufferServesTheNextTakeOfItsCapacity) {
  MemoryBudget budget(64 * kMiB);
  BufferPool pool(32 * kMiB, &budget);
  void* first = pool.Take(5 * kMiBSize);
  ASSERT_NE(first, nullptr);
  std::memset(first, 7, 5 * kMiBSize);
  pool.Give(first, BufferPool::CapacityFor(5 * kMiBSize));
  EXPECT_EQ(pool.kept_bytes(), 6 * kMiB);
  EXPECT_EQ(budget.reserved(), 6 * kMiB);  // kept bytes are reserved
  // A take of another size in the same capacity gets it, as the last user
  // left it; the reservation goes back (the taker reserves for itself).
  void* second = pool.Take(6 * kMiBSize);
  EXPECT_EQ(second, first);
  EXPECT_EQ(static_cast<unsigned char*>(second)[0], 7);
  EXPECT_EQ(pool.kept_bytes(), 0);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(pool.reuses(), 1);
  EXPECT_EQ(pool.allocations(), 1);
  // Another capacity is allocated fresh.
  void* other = pool.Take(8 * kMiBSize);
  EXPECT_NE(other, first);
  EXPECT_EQ(pool.allocations(), 2);
  pool.Give(second, 6 * kMiBSize);
  pool.Give(other, 8 * kMiBSize);
  EXPECT_EQ(pool.kept_bytes(), 14 * kMiB);
}

TEST(BufferPoolTest, KeepsNoMoreThanItsBound) {
  BufferPool pool(10 * kMiB, nullptr);
  void* a = pool.Take(8 * kMiBSize);
  void* b = pool.Take(8 * kMiBSize);
  pool.Give(a, 8 * kMiBSize);
  pool.Give(b, 8 * kMiBSize);  // 16 MiB would pass the bound: freed
  EXPECT_EQ(pool.kept_bytes(), 8 * kMiB);
  BufferPool none(0, nullptr);
  void* c = none.Take(4 * kMiBSize);
  none.Give(c, 4 * kMiBSize);
  EXPECT_EQ(none.kept_bytes(), 0);
}

TEST(BufferPoolTest, KeepsNothingTheBudgetHasNoRoomForAndCountsNoRefusal) {
  MemoryBudget budget(10 * kMiB);
  BufferPool pool(64 * kMiB, &budget);
  absl::StatusOr<MemoryBudget::Reservation> call = budget.TryReserve(8 * kMiB, "a call");
  ASSERT_TRUE(call.ok());
  void* buffer = pool.Take(4 * kMiBSize);
  pool.Give(buffer, 4 * kMiBSize);  // 8 + 4 > 10: freed
  EXPECT_EQ(pool.kept_bytes(), 0);
  EXPECT_EQ(budget.reserved(), 8 * kMiB);
  EXPECT_EQ(budget.refusals(), 0);
}

TEST(BufferPoolTest, ACallThatNeedsTheRoomGetsItFromTheKeptBuffersOldestFirst) {
  MemoryBudget budget(20 * kMiB);
  BufferPool pool(20 * kMiB, &budget);
  budget.SetReclaimer([&pool](int64_t missing) { return pool.Release(missing); });
  void* older = pool.Take(8 * kMiBSize);
  void* newer = pool.Take(10 * kMiBSize);
  pool.Give(older, 8 * kMiBSize);
  absl::SleepFor(absl::Milliseconds(2));  // distinct give times
  pool.Give(newer, 10 * kMiBSize);
  EXPECT_EQ(budget.reserved(), 18 * kMiB);
  // 6 MiB: 4 missing, the older 8 MiB buffer is enough.
  absl::StatusOr<MemoryBudget::Reservation> call = budget.TryReserve(6 * kMiB, "a call");
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(pool.kept_bytes(), 10 * kMiB);
  EXPECT_EQ(pool.Take(10 * kMiBSize), newer);
  EXPECT_EQ(budget.refusals(), 0);
  // With nothing left to free, a reservation past the limit is refused.
  absl::StatusOr<MemoryBudget::Reservation> more = budget.TryReserve(15 * kMiB, "too much");
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(more.status().message()), HasSubstr("--max_memory_bytes"));
  EXPECT_EQ(budget.refusals(), 1);
  pool.Give(newer, 10 * kMiBSize);
}

TEST(BufferPoolTest, BuffersUnusedForTheIdleTimeAreFreed) {
  MemoryBudget budget(64 * kMiB);
  BufferPool pool(64 * kMiB, &budget);
  void* buffer = pool.Take(4 * kMiBSize);
  pool.Give(buffer, 4 * kMiBSize);
  EXPECT_EQ(pool.ReleaseIdle(absl::Now() + BufferPool::kIdleRelease / 2), 0);
  EXPECT_EQ(pool.kept_bytes(), 4 * kMiB);
  EXPECT_EQ(pool.ReleaseIdle(absl::Now() + BufferPool::kIdleRelease), 4 * kMiB);
  EXPECT_EQ(pool.kept_bytes(), 0);
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(BufferPoolTest, LargeDenseOutputsComeFromThePoolAndGoBackToIt) {
  MemoryBudget budget(64 * kMiB);
  BufferPool pool(64 * kMiB, &budget);
  const Layout dense = Bytes(5 * kMiB);
  std::byte* first = nullptr;
  {
    absl::StatusOr<OutputBuffer> buffer = AllocateOutput(dense, &pool);
    ASSERT_TRUE(buffer.ok());
    first = buffer->get();
  }
  EXPECT_EQ(pool.kept_bytes(), 6 * kMiB);
  absl::StatusOr<OutputBuffer> again = AllocateOutput(dense, &pool);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), first);
  // A shared (streamed) output goes back when its last holder lets go.
  SharedOutput shared = Share(*std::move(again));
  SharedOutput chunk = shared;
  shared.reset();
  EXPECT_EQ(pool.kept_bytes(), 0);
  chunk.reset();
  EXPECT_EQ(pool.kept_bytes(), 6 * kMiB);
  // Small outputs are malloc's.
  absl::StatusOr<OutputBuffer> small = AllocateOutput(Bytes(1024), &pool);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->get_deleter().pool, nullptr);
}

TEST(BufferPoolTest, MetricsShowKeptBytesReusesAndAllocations) {
  BufferPool pool(64 * kMiB, nullptr);
  Metrics metrics;
  AddBufferPoolSeries(metrics, pool);
  void* buffer = pool.Take(4 * kMiBSize);
  pool.Give(buffer, 4 * kMiBSize);
  pool.Give(pool.Take(4 * kMiBSize), 4 * kMiBSize);
  const std::string text = metrics.Exposition();
  EXPECT_THAT(text, HasSubstr("tensorop_buffer_pool_bytes 4194304\n"));
  EXPECT_THAT(text, HasSubstr("tensorop_buffer_pool_reuses_total 1\n"));
  EXPECT_THAT(text, HasSubstr("tensorop_buffer_pool_allocations_total 1\n"));
}

}  // namespace
}  // namespace tensorop::server
