// The request cost model (server/memory/request_cost.h): what a request
// holds besides its tensors, as every front end reserves it.
#include "server/memory/request_cost.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

TEST(RequestCostTest, AParseHoldsItsBoundAndTheOverheadThenTheRequestAndTheOverhead) {
  MemoryBudget budget(1 << 20);
  MemoryBudget::Reservation reservation = budget.Empty();
  ASSERT_OK(ReserveParsing(1000, "parsing a request", reservation));
  EXPECT_EQ(reservation.bytes(), 1000 + kRequestOverheadBytes);
  HoldParsedRequest(300, reservation);
  EXPECT_EQ(reservation.bytes(), 300 + kRequestOverheadBytes);
  EXPECT_EQ(budget.reserved(), 300 + kRequestOverheadBytes);
}

// A request naming no output is planned as one; each output costs its
// overhead, so that many outputs named by a small request are paid for.
TEST(RequestCostTest, PlanningCostsTheOverheadOfEachOutputAndOfOneAtLeast) {
  MemoryBudget budget(1 << 20);
  MemoryBudget::Reservation reservation = budget.Empty();
  ASSERT_OK(ReserveOutputOverhead(
      0, [] { return std::string("no outputs"); }, reservation));
  EXPECT_EQ(reservation.bytes(), kOutputOverheadBytes);
  ASSERT_OK(ReserveOutputOverhead(
      3, [] { return std::string("three"); }, reservation));
  EXPECT_EQ(reservation.bytes(), 4 * kOutputOverheadBytes);
}

TEST(RequestCostTest, ARequestPastTheBudgetIsRefusedNamingWhatItIs) {
  MemoryBudget budget(kRequestOverheadBytes + 10);
  MemoryBudget::Reservation reservation = budget.Empty();
  EXPECT_THAT(
      ReserveParsing(11, "Run: parsing a 99-byte request", reservation),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("Run: parsing a 99-byte request")));
  EXPECT_EQ(reservation.bytes(), 0);
  EXPECT_THAT(
      ReserveOutputOverhead(
          1000, [] { return std::string("planning the 1000 outputs"); }, reservation),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("planning the 1000 outputs")));
}

}  // namespace
}  // namespace tensorop::server
