#include "server/memory/received_bytes.h"

#include <string>
#include <utility>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memory/memory_budget.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// `length` bytes in one slice, as gRPC hands a request over.
grpc::ByteBuffer OneSliceOf(size_t length) {
  const std::string text(length, 'x');
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(ReceivedBytesTest, TheBytesAreReservedUntilTheyAreLetGo) {
  MemoryBudget budget(1000);
  MemoryBudget::CallLedger ledger(budget, "Run");
  MemoryBudget::Reservation call = ledger.Empty();
  grpc::ByteBuffer bytes = OneSliceOf(300);
  ReceivedBytes received(&bytes, call.Sibling());
  ASSERT_OK(received.Reserve("Run"));
  EXPECT_EQ(received.length(), 300u);
  EXPECT_EQ(received.reserved(), 300);
  EXPECT_EQ(budget.reserved(), 300);
  EXPECT_EQ(ledger.held(), 300);
  EXPECT_EQ(call.bytes(), 0);  // the bytes' holder holds them, not the call
  received.Release();
  EXPECT_EQ(bytes.Length(), 0u);  // gRPC's buffer, emptied
  EXPECT_EQ(received.reserved(), 0);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(ledger.held(), 0);
}

TEST(ReceivedBytesTest, WhatAViewKeepsStaysReservedInItsCover) {
  MemoryBudget budget(1000);
  MemoryBudget::CallLedger ledger(budget, "Run");
  grpc::ByteBuffer bytes = OneSliceOf(300);
  ReceivedBytes received(&bytes, ledger.Empty());
  ASSERT_OK(received.Reserve("Run"));
  {
    MemoryBudget::Reservation cover = received.ReleaseKeeping(200);
    EXPECT_EQ(bytes.Length(), 0u);
    EXPECT_EQ(received.reserved(), 0);
    EXPECT_EQ(cover.bytes(), 200);
    EXPECT_EQ(budget.reserved(), 200);
    EXPECT_EQ(ledger.held(), 200);  // still the call's
  }
  EXPECT_EQ(budget.reserved(), 0);
  // A cover never holds more than was reserved.
  grpc::ByteBuffer unreserved = OneSliceOf(50);
  ReceivedBytes never_reserved(&unreserved, ledger.Empty());
  EXPECT_EQ(never_reserved.ReleaseKeeping(50).bytes(), 0);
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(ReceivedBytesTest, BytesThatDoNotFitAreRefusedNamingTheMethodAndTheFlag) {
  MemoryBudget budget(100);
  grpc::ByteBuffer bytes = OneSliceOf(101);
  ReceivedBytes received(&bytes, budget.Empty());
  EXPECT_THAT(received.Reserve("RunStream"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("RunStream: the request as received"),
                             HasSubstr("--max_memory_bytes"))));
  EXPECT_EQ(received.reserved(), 0);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(bytes.Length(), 101u);  // left to gRPC as it was
}

TEST(ReceivedBytesTest, AMovedFromOneCannotEmptyTheBuffer) {
  MemoryBudget budget(1000);
  grpc::ByteBuffer bytes = OneSliceOf(300);
  ReceivedBytes first(&bytes, budget.Empty());
  ASSERT_OK(first.Reserve("Run"));
  ReceivedBytes second = std::move(first);
  first.Release();  // NOLINT(bugprone-use-after-move): what a stale holder might do
  EXPECT_EQ(bytes.Length(), 300u);
  EXPECT_EQ(second.reserved(), 300);
  second.Release();
  EXPECT_EQ(bytes.Length(), 0u);
  EXPECT_EQ(budget.reserved(), 0);
}

TEST(ReceivedBytesTest, AnEmptyOneHoldsNothing) {
  ReceivedBytes none;
  EXPECT_EQ(none.length(), 0u);
  EXPECT_EQ(none.reserved(), 0);
  none.Release();
}

}  // namespace
}  // namespace tensorop::server
