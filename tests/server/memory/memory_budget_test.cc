#include "server/memory/memory_budget.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/telemetry/metrics.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(MemoryBudgetTest, ReservesUpToTheLimitAndRefusesPastIt) {
  MemoryBudget budget(100);
  absl::StatusOr<MemoryBudget::Reservation> first = budget.TryReserve(60, "first");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->bytes(), 60);
  EXPECT_EQ(budget.reserved(), 60);
  absl::StatusOr<MemoryBudget::Reservation> second = budget.TryReserve(41, "the outputs of \"b\"");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(second.status().message()),
      AllOf(HasSubstr("41 more bytes for the outputs of \"b\""),
            HasSubstr("60 of the budget's 100 bytes reserved"), HasSubstr("--max_memory_bytes")));
  EXPECT_EQ(budget.refusals(), 1);
  EXPECT_EQ(budget.reserved(), 60);
  absl::StatusOr<MemoryBudget::Reservation> exact = budget.TryReserve(40, "exact");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(budget.reserved(), 100);
}

// An answer a stream owes (HoldExactly) is held even past the limit: the
// budget counts it, and the next reservation is refused until it goes.
TEST(MemoryBudgetTest, HoldExactlyShrinksOrHoldsPastTheLimit) {
  MemoryBudget budget(100);
  MemoryBudget::Reservation answer = budget.Empty();
  ASSERT_TRUE(answer.Grow(90, "request").ok());
  answer.HoldExactly(30);
  EXPECT_EQ(answer.bytes(), 30);
  EXPECT_EQ(budget.reserved(), 30);
  MemoryBudget::Reservation other = budget.Empty();
  ASSERT_TRUE(other.Grow(70, "other").ok());
  answer.HoldExactly(45);
  EXPECT_EQ(answer.bytes(), 45);
  EXPECT_EQ(budget.reserved(), 115);
  EXPECT_EQ(budget.TryReserve(1, "next").status().code(), absl::StatusCode::kResourceExhausted);
  answer.Release();
  EXPECT_EQ(budget.reserved(), 70);
  EXPECT_TRUE(budget.TryReserve(30, "next").ok());
}

TEST(MemoryBudgetTest, GivesBackOnDestructionShrinkAndRelease) {
  MemoryBudget budget(100);
  {
    MemoryBudget::Reservation reservation = budget.Empty();
    ASSERT_TRUE(reservation.Grow(30, "a").ok());
    ASSERT_TRUE(reservation.Grow(20, "b").ok());
    EXPECT_EQ(budget.reserved(), 50);
    reservation.Shrink(15);
    EXPECT_EQ(reservation.bytes(), 35);
    EXPECT_EQ(budget.reserved(), 35);
    reservation.Shrink(1000);  // at most what it holds
    EXPECT_EQ(reservation.bytes(), 0);
    EXPECT_EQ(budget.reserved(), 0);
    ASSERT_TRUE(reservation.Grow(70, "c").ok());
    EXPECT_FALSE(reservation.Grow(31, "d").ok());  // a failed Grow keeps what was held
    EXPECT_EQ(reservation.bytes(), 70);
  }
  EXPECT_EQ(budget.reserved(), 0);
  MemoryBudget::Reservation released = *budget.TryReserve(10, "e");
  released.Release();
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(released.bytes(), 0);
}

TEST(MemoryBudgetTest, CountsEveryByteEverReservedButNotRefusals) {
  MemoryBudget budget(100);
  {
    MemoryBudget::Reservation reservation = *budget.TryReserve(60, "a");
    ASSERT_TRUE(reservation.Grow(30, "b").ok());
    EXPECT_FALSE(reservation.Grow(11, "c").ok());  // refused: not counted
    reservation.Shrink(50);
  }
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(budget.reserved_total(), 90);  // what was given back still counts
  ASSERT_TRUE(budget.TryReserveIfFree(5).has_value());
  EXPECT_EQ(budget.reserved_total(), 95);
  EXPECT_FALSE(budget.TryReserveIfFree(101).has_value());
  EXPECT_EQ(budget.reserved_total(), 95);
}

TEST(IdleTrimTest, TrimsOnceAfterASpellAtTheFirstTickOfAQuietOne) {
  IdleTrim trim(0);
  EXPECT_FALSE(trim.Tick(0, false));  // never busy: nothing to give back
  EXPECT_FALSE(trim.Tick(0, false));
  // A spell shorter than a tick, between two ticks: seen by the total alone.
  EXPECT_FALSE(trim.Tick(100, false));  // reserved during the last tick
  EXPECT_TRUE(trim.Tick(100, false));   // a whole quiet tick
  EXPECT_FALSE(trim.Tick(100, false));  // once per spell
  EXPECT_FALSE(trim.Tick(100, false));
}

TEST(IdleTrimTest, NeverTrimsWhileCallsReserveOrHoldMemory) {
  IdleTrim trim(50);
  EXPECT_FALSE(trim.Tick(60, false));  // calls come and go between ticks
  EXPECT_FALSE(trim.Tick(70, false));
  EXPECT_FALSE(trim.Tick(70, true));  // one long call holds its bytes
  EXPECT_FALSE(trim.Tick(70, true));
  EXPECT_TRUE(trim.Tick(70, false));  // it ended within the last tick, none since
  EXPECT_FALSE(trim.Tick(70, false));
}

TEST(MemoryBudgetTest, AMovedReservationIsGivenBackOnce) {
  MemoryBudget budget(100);
  MemoryBudget::Reservation a = *budget.TryReserve(40, "a");
  MemoryBudget::Reservation b = std::move(a);
  EXPECT_EQ(a.bytes(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.bytes(), 40);
  MemoryBudget::Reservation c = *budget.TryReserve(10, "c");
  c = std::move(b);  // gives back c's 10
  EXPECT_EQ(budget.reserved(), 40);
  { MemoryBudget::Reservation d = std::move(c); }
  EXPECT_EQ(budget.reserved(), 0);
}

// A hot path's message is made only when the budget refuses.
TEST(MemoryBudgetTest, AWhatGivenAsAFunctionIsMadeOnlyWhenRefused) {
  MemoryBudget budget(100);
  MemoryBudget::Reservation reservation = budget.Empty();
  int made = 0;
  const auto what = [&made] {
    ++made;
    return std::string("the outputs of request \"a\"");
  };
  ASSERT_TRUE(reservation.Grow(60, what).ok());
  EXPECT_EQ(made, 0);
  EXPECT_EQ(reservation.bytes(), 60);
  const absl::Status refused = reservation.Grow(41, what);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("41 more bytes for the outputs of request \"a\", with 60 of the budget's "
                        "100 bytes reserved"));
  EXPECT_EQ(budget.refusals(), 1);
  EXPECT_EQ(reservation.bytes(), 60);
}

// Bytes another holder hands on are taken over, not reserved twice; the rest
// grows, and a refusal moves nothing.
TEST(MemoryBudgetTest, GrowingTakesOverWhatACoverHoldsAndGrowsOnlyTheRest) {
  MemoryBudget budget(100);
  MemoryBudget::Reservation cover = *budget.TryReserve(50, "received");
  MemoryBudget::Reservation answer = budget.Empty();
  ASSERT_TRUE(answer.GrowTakingOver(30, &cover, 20, "answer").ok());
  EXPECT_EQ(answer.bytes(), 30);
  EXPECT_EQ(cover.bytes(), 30);
  EXPECT_EQ(budget.reserved(), 60);
  // More covered than the cover holds: it gives what it has.
  ASSERT_TRUE(answer.GrowTakingOver(40, &cover, 35, "answer").ok());
  EXPECT_EQ(cover.bytes(), 0);
  EXPECT_EQ(answer.bytes(), 70);
  EXPECT_EQ(budget.reserved(), 70);
  MemoryBudget::Reservation other = *budget.TryReserve(10, "other");
  EXPECT_EQ(answer.GrowTakingOver(25, &other, 4, "too much").code(),
            absl::StatusCode::kResourceExhausted);  // 21 more do not fit in 20
  EXPECT_EQ(other.bytes(), 10);
  EXPECT_EQ(answer.bytes(), 70);
  ASSERT_TRUE(answer.GrowTakingOver(5, nullptr, 5, "no cover").ok());
  EXPECT_EQ(budget.reserved(), 85);
}

TEST(MemoryBudgetTest, AReservationWithoutABudgetAlwaysGrows) {
  MemoryBudget::Reservation none;
  EXPECT_TRUE(none.Grow(int64_t{1} << 60, "anything").ok());
  EXPECT_EQ(none.bytes(), int64_t{1} << 60);
  none.Release();
}

// Sets `budget` to note each unbalanced call in `heard` as "call: bytes".
void HearUnbalancedCalls(MemoryBudget& budget, std::vector<std::string>& heard) {
  budget.SetUnbalancedCallHandler([&heard](absl::string_view call, int64_t bytes) {
    heard.push_back(absl::StrCat(call, ": ", bytes));
  });
}

// A holder bounded before it is made: the bound is held while it is made,
// then what it keeps; a failure to make it, or a bound that does not fit,
// leaves nothing reserved.
TEST(MemoryBudgetTest, GrowWhileMakingHoldsTheBoundWhileMakingThenWhatIsKept) {
  MemoryBudget budget(100);
  MemoryBudget::Reservation reservation = budget.Empty();
  int64_t reserved_while_making = -1;
  ASSERT_OK(reservation.GrowWhileMaking(
      80, [] { return std::string("an answer"); },
      [&]() -> absl::StatusOr<int64_t> {
        reserved_while_making = budget.reserved();
        return 30;
      }));
  EXPECT_EQ(reserved_while_making, 80);
  EXPECT_EQ(reservation.bytes(), 30);
  // More than the bound is kept at the bound.
  ASSERT_OK(reservation.GrowWhileMaking(
      10, [] { return std::string("more"); }, []() -> absl::StatusOr<int64_t> { return 25; }));
  EXPECT_EQ(reservation.bytes(), 40);
  EXPECT_THAT(reservation.GrowWhileMaking(
                  20, [] { return std::string("a bad one"); },
                  []() -> absl::StatusOr<int64_t> { return absl::InvalidArgumentError("bad"); }),
              StatusIs(absl::StatusCode::kInvalidArgument, "bad"));
  EXPECT_EQ(reservation.bytes(), 40);
  bool made = false;
  EXPECT_THAT(
      reservation.GrowWhileMaking(
          61, [] { return std::string("a large one"); },
          [&]() -> absl::StatusOr<int64_t> {
            made = true;
            return 0;
          }),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("61 more bytes for a large one")));
  EXPECT_FALSE(made);
  EXPECT_EQ(budget.reserved(), 40);
}

TEST(MemoryBudgetTest, AbsorbTakesOverAllASiblingHolds) {
  MemoryBudget budget(100);
  MemoryBudget::CallLedger ledger(budget, "Run");
  MemoryBudget::Reservation request = ledger.Empty();
  ASSERT_OK(request.Grow(10, "the request"));
  MemoryBudget::Reservation parsing = request.Sibling();
  ASSERT_OK(parsing.Grow(25, "parsing"));
  request.Absorb(std::move(parsing));
  EXPECT_EQ(request.bytes(), 35);
  EXPECT_EQ(parsing.bytes(), 0);  // NOLINT(bugprone-use-after-move): Absorb empties it
  EXPECT_EQ(ledger.held(), 35);
  EXPECT_EQ(budget.reserved(), 35);
  request.Release();
}

TEST(CallLedgerTest, TalliesEveryReservationOfTheCallAndHearsNothingWhenAllCameBack) {
  MemoryBudget budget(1000);
  std::vector<std::string> heard;
  HearUnbalancedCalls(budget, heard);
  {
    MemoryBudget::CallLedger ledger(budget, "Run");
    MemoryBudget::Reservation request = ledger.Empty();
    ASSERT_OK(request.Grow(100, "the request"));
    MemoryBudget::Reservation step = request.Sibling();
    ASSERT_OK(step.Grow(30, "a step's outputs"));
    step.HoldExactly(20);
    step.TransferTo(request, 5);
    EXPECT_EQ(ledger.held(), 120);
    EXPECT_EQ(budget.reserved(), 120);
    request.Shrink(40);
    EXPECT_EQ(ledger.held(), 80);
  }
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_THAT(heard, ::testing::IsEmpty());
}

TEST(CallLedgerTest, AReservationThatOutlivesItsCallIsReportedWhenTheCallEnds) {
  MemoryBudget budget(1000);
  std::vector<std::string> heard;
  HearUnbalancedCalls(budget, heard);
  std::optional<MemoryBudget::Reservation> leaked;  // the planted leak: outlives the call
  {
    MemoryBudget::CallLedger ledger(budget, "RunChunked");
    MemoryBudget::Reservation answer = ledger.Empty();
    ASSERT_OK(answer.Grow(64, "an answer"));
    MemoryBudget::Reservation upload = answer.Sibling();
    ASSERT_OK(upload.Grow(7, "an upload"));
    leaked.emplace(std::move(upload));
  }
  EXPECT_THAT(heard, ::testing::ElementsAre("RunChunked: 7"));
  EXPECT_EQ(budget.reserved(), 7);
  leaked.reset();
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(CallLedgerTest, BytesHandedToALongerLivedHolderLeaveTheCall) {
  MemoryBudget budget(1000);
  std::vector<std::string> heard;
  HearUnbalancedCalls(budget, heard);
  MemoryBudget::Reservation kept = budget.Empty();  // a kept tensor's charge, not the call's
  {
    MemoryBudget::CallLedger ledger(budget, "Put");
    MemoryBudget::Reservation written = ledger.Empty();
    ASSERT_OK(written.Grow(50, "the bytes written"));
    written.TransferTo(kept, 50);
    EXPECT_EQ(ledger.held(), 0);
  }
  EXPECT_THAT(heard, ::testing::IsEmpty());
  EXPECT_EQ(kept.bytes(), 50);
  EXPECT_EQ(budget.reserved(), 50);
}

#ifdef TENSOROP_CHECK_CALL_BALANCE
// The sanitizer builds' default: an unbalanced call aborts the process, so
// every call their test suites make is checked.
TEST(CallLedgerDeathTest, TheSanitizerBuildsAbortOnAnUnbalancedCall) {
  EXPECT_DEATH(
      {
        MemoryBudget budget(1000);
        MemoryBudget::Reservation leaked;
        {
          MemoryBudget::CallLedger ledger(budget, "Run");
          MemoryBudget::Reservation request = ledger.Empty();
          (void)request.Grow(3, "the request");
          leaked = std::move(request);
        }
      },
      "a Run call ended with 3 bytes of the memory budget held");
}
#endif

TEST(MemoryBudgetTest, ParsesCgroupLimits) {
  EXPECT_EQ(ParseCgroupLimit("4294967296\n"), int64_t{4294967296});
  EXPECT_EQ(ParseCgroupLimit("max\n"), -1);
  EXPECT_EQ(ParseCgroupLimit(""), -1);
  EXPECT_EQ(ParseCgroupLimit("garbage"), -1);
}

TEST(MemoryBudgetTest, TheProcessLimitIsPositive) {
  const MemoryLimit limit = ProcessMemoryLimit();
  EXPECT_GT(limit.bytes, 0);
  EXPECT_FALSE(limit.source.empty());
}

TEST(MemoryBudgetTest, SeriesShowTheBudgetUseAndRefusals) {
  MemoryBudget budget(100);
  Metrics metrics;
  AddMemoryBudgetSeries(metrics, budget);
  MemoryBudget::Reservation held = *budget.TryReserve(25, "a");
  EXPECT_FALSE(budget.TryReserve(90, "b").ok());
  const std::string text = metrics.Exposition();
  EXPECT_THAT(text, HasSubstr("\ntensorop_memory_budget_bytes 100\n"));
  EXPECT_THAT(text, HasSubstr("\ntensorop_memory_reserved_bytes 25\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE tensorop_memory_refusals_total counter\n"
                              "tensorop_memory_refusals_total 1\n"));
}

}  // namespace
}  // namespace tensorop::server
