#include "server/memory/output_buffer.h"

#include <cstdint>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "tests/support/byte_units.h"
#include "tests/support/layout.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::kMiB;
using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A packed 1-D uint8 layout of `bytes`.
Layout ByteLayout(int64_t bytes) { return ::tensorop::testing::MakeLayout(DType::kUint8, {bytes}); }

// A call's ledger that remembers what an unbalanced end reported.
struct Ledgered {
  explicit Ledgered(int64_t limit) : budget(limit) {
    budget.SetUnbalancedCallHandler(
        [this](absl::string_view, int64_t bytes) { unbalanced_bytes += bytes; });
  }
  MemoryBudget budget;
  int64_t unbalanced_bytes = 0;
};

TEST(OutputBufferTest, AnAccountedBufferGivesItsBytesBackWhenItsLastHolderFreesIt) {
  Ledgered memory(1000);
  {
    MemoryBudget::CallLedger ledger(memory.budget, "Run");
    const MemoryBudget::Reservation call = ledger.Empty();
    ASSERT_OK_AND_ASSIGN(OutputBuffer buffer,
                         AllocateOutput(ByteLayout(300), nullptr, call, "an output"));
    EXPECT_EQ(buffer.get_deleter().reservation.bytes(), 300);
    EXPECT_EQ(call.bytes(), 0);  // the buffer holds its bytes, not the call
    EXPECT_EQ(memory.budget.reserved(), 300);
    EXPECT_EQ(ledger.held(), 300);
    SharedOutput shared = Share(std::move(buffer));
    SharedOutput window(shared, shared.get() + 100);  // a later step's window on it
    shared.reset();
    EXPECT_EQ(memory.budget.reserved(), 300);
    window.reset();
    EXPECT_EQ(memory.budget.reserved(), 0);
    EXPECT_EQ(ledger.held(), 0);
  }
  EXPECT_EQ(memory.unbalanced_bytes, 0);
}

TEST(OutputBufferTest, AnAccountedBufferThatDoesNotFitIsRefusedNamingWhatAndTheFlag) {
  MemoryBudget budget(100);
  const MemoryBudget::Reservation call = budget.Empty();
  EXPECT_THAT(AllocateOutput(ByteLayout(101), nullptr, call, "the bytes of handle h"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("101 more bytes for the bytes of handle h"),
                             HasSubstr("--max_memory_bytes"))));
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(OutputBufferTest, AnAdmittedBufferTakesItsBytesOverFromWhatTheCallAdmitted) {
  MemoryBudget budget(1000);
  MemoryBudget::Reservation call = budget.Empty();
  ASSERT_OK(call.Grow(500, "the outputs and the answer"));
  {
    ASSERT_OK_AND_ASSIGN(OutputBuffer buffer,
                         AllocateAdmittedOutput(ByteLayout(300), nullptr, call));
    EXPECT_EQ(call.bytes(), 200);
    EXPECT_EQ(buffer.get_deleter().reservation.bytes(), 300);
    EXPECT_EQ(budget.reserved(), 500);  // moved, not reserved twice
  }
  EXPECT_EQ(budget.reserved(), 200);
}

// gRPC may free an answer's slices after the call ended: the buffer leaves
// the call's ledger when handed over, and its bytes stay reserved until then.
TEST(OutputBufferTest, ABufferThatLeftItsCallKeepsItsBytesReservedPastTheCallsEnd) {
  Ledgered memory(1000);
  SharedOutput sent;
  {
    MemoryBudget::CallLedger ledger(memory.budget, "Run");
    const MemoryBudget::Reservation call = ledger.Empty();
    ASSERT_OK_AND_ASSIGN(OutputBuffer buffer,
                         AllocateOutput(ByteLayout(300), nullptr, call, "an output"));
    sent = Share(std::move(buffer));
    LeaveCall(sent);
    LeaveCall(sent);  // each slice handed over says so; once counts
    EXPECT_EQ(ledger.held(), 0);
  }
  EXPECT_EQ(memory.unbalanced_bytes, 0);
  EXPECT_EQ(memory.budget.reserved(), 300);
  sent.reset();
  EXPECT_EQ(memory.budget.reserved(), 0);
}

// The planted leak: a buffer that outlives its call without leaving it is
// what the ledger reports.
TEST(OutputBufferTest, ABufferOutlivingItsCallIsReportedByTheLedger) {
  Ledgered memory(1000);
  SharedOutput leaked;
  {
    MemoryBudget::CallLedger ledger(memory.budget, "Run");
    ASSERT_OK_AND_ASSIGN(OutputBuffer buffer,
                         AllocateOutput(ByteLayout(300), nullptr, ledger.Empty(), "an output"));
    leaked = Share(std::move(buffer));
  }
  EXPECT_EQ(memory.unbalanced_bytes, 300);
  leaked.reset();
  EXPECT_EQ(memory.budget.reserved(), 0);
}

// A buffer going back to a pool gives its reservation back first, so that
// the pool finds room to keep it even in a full budget.
TEST(OutputBufferTest, AnAccountedBufferGoesBackToThePoolInAFullBudget) {
  MemoryBudget budget(6 * kMiB);
  BufferPool pool(64 * kMiB, &budget);
  const MemoryBudget::Reservation call = budget.Empty();
  {
    ASSERT_OK_AND_ASSIGN(OutputBuffer buffer,
                         AllocateOutput(ByteLayout(6 * kMiB), &pool, call, "an output"));
    EXPECT_EQ(budget.reserved(), 6 * kMiB);
  }
  EXPECT_EQ(pool.kept_bytes(), 6 * kMiB);
  EXPECT_EQ(budget.reserved(), 6 * kMiB);  // the pool's now
}

}  // namespace
}  // namespace tensorop::server
