// JoinTrace: which traceparent values tensord joins and which it ignores
// (W3C Trace Context, "traceparent Header Field Values").
#include "server/telemetry/trace_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tensorop::server {
namespace {

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParentId[] = "00f067aa0ba902b7";
constexpr char kWellFormed[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceContextTest, JoinsAWellFormedTraceparentWithAFreshSpan) {
  const TraceContext trace = JoinTrace(kWellFormed);
  EXPECT_EQ(trace.trace_id, kTraceId);
  EXPECT_EQ(trace.parent_span_id, kParentId);
  EXPECT_EQ(trace.flags, "01");
  EXPECT_THAT(trace.span_id, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_NE(trace.span_id, kParentId);
  EXPECT_NE(trace.span_id, "0000000000000000");
  EXPECT_EQ(TraceparentOf(trace), std::string("00-") + kTraceId + "-" + trace.span_id + "-01");
  // Each call is its own span.
  EXPECT_NE(JoinTrace(kWellFormed).span_id, trace.span_id);
}

TEST(TraceContextTest, KeepsTheCallersFlags) {
  EXPECT_EQ(JoinTrace("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").flags, "00");
}

TEST(TraceContextTest, ReadsALaterVersionByVersionZerosRules) {
  const TraceContext trace =
      JoinTrace("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next");
  EXPECT_EQ(trace.trace_id, kTraceId);
  EXPECT_EQ(TraceparentOf(trace).substr(0, 3), "00-");
}

TEST(TraceContextTest, IgnoresMalformedValues) {
  for (const char* malformed : {
           "", "00",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       // no flags
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // 00 has no more
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    // uppercase
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    // zero parent
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    // version ff
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    // separators
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    // not hex
           "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",   // no dash after
       }) {
    EXPECT_TRUE(JoinTrace(malformed).empty()) << malformed;
  }
}

}  // namespace
}  // namespace tensorop::server
