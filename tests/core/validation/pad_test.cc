// Pad validation (core/validate/pad.h), through core's entry point: every rule
// of OPERATORS.md "Pad" with its status and message, and the runs a dimension
// is copied in.
#include "core/validate/pad.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/one_input.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::OneInput;
using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

PadAttrs Pads(std::vector<int64_t> start, std::vector<int64_t> end, std::string mode = "",
              std::string value = "") {
  return PadAttrs{.start_padding = std::move(start),
                  .end_padding = std::move(end),
                  .mode = std::move(mode),
                  .value = std::move(value)};
}

// The output sizes of a plan that must succeed.
std::vector<int64_t> OutputSizesOf(const absl::StatusOr<ExecutionPlan>& plan) {
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? plan->outputs[0].sizes : std::vector<int64_t>{};
}

TEST(PadValidationTest, EachSizeIsTheInputsPlusBothCounts) {
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       (OneInput{.sizes = {2, 3}}.Plan(Pads({1, 0}, {2, 4}, "edge"))));
  EXPECT_EQ(plan.op, "pad");
  EXPECT_THAT(plan.outputs[0].sizes, ElementsAre(5, 7));
  // Not a window on the input: a chain cannot carry it onto the input's bytes.
  EXPECT_THAT(plan.windows, IsEmpty());
}

TEST(PadValidationTest, CountsNeedOneEntryPerDimension) {
  EXPECT_THAT((OneInput{.sizes = {2, 2}}.Plan(Pads({1}, {1}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.start_padding has 1 entries; the input has rank 2 and takes one "
                          "count per dimension")));
  EXPECT_THAT((OneInput{.sizes = {2}}.Plan(Pads({1}, {1, 1}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.end_padding has 2 entries; the input has rank 1 and takes one "
                          "count per dimension")));
}

TEST(PadValidationTest, ANegativeCountIsRejected) {
  EXPECT_THAT((OneInput{.sizes = {4}}.Plan(Pads({-1}, {0}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.start_padding[0] must be >= 0, got -1 (a negative count, which "
                          "crops in ONNX, is not padding)")));
  EXPECT_THAT((OneInput{.sizes = {4, 4}}.Plan(Pads({0, 0}, {0, -2}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pad.end_padding[1] must be >= 0, got -2")));
}

TEST(PadValidationTest, AModeOutsideTheFourIsRejected) {
  for (const char* mode : {"wrap", "Reflect", "CONSTANT", "circular"}) {
    EXPECT_THAT((OneInput{.sizes = {3}}.Plan(Pads({1}, {1}, mode))),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         Eq(std::string("pad.mode is \"") + mode +
                            "\"; pad's modes are constant, edge, reflect and symmetric (lower "
                            "case)")))
        << mode;
  }
}

TEST(PadValidationTest, ReflectNeedsTwoElementsWherePadded) {
  EXPECT_THAT((OneInput{.sizes = {1, 3}}.Plan(Pads({1, 0}, {0, 0}, "reflect"))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.mode is reflect and dimension 0 is padded (start_padding[0] = 1, "
                          "end_padding[0] = 0) but input.sizes[0] = 1: one element has no mirror "
                          "image (reflect needs two)")));
  // Unpadded, one element is fine; so are edge and symmetric.
  EXPECT_THAT(OutputSizesOf(OneInput{.sizes = {1, 3}}.Plan(Pads({0, 2}, {0, 1}, "reflect"))),
              ElementsAre(1, 6));
  EXPECT_THAT(OutputSizesOf(OneInput{.sizes = {1}}.Plan(Pads({2}, {1}, "symmetric"))),
              ElementsAre(4));
  EXPECT_THAT(OutputSizesOf(OneInput{.sizes = {1}}.Plan(Pads({2}, {1}, "edge"))), ElementsAre(4));
}

TEST(PadValidationTest, GivenOutputSizesMustMatch) {
  EXPECT_THAT((OneInput{.sizes = {2}}.Plan(Pads({1}, {1}), {OutputDesc{.sizes = {3}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[4]")));
  EXPECT_THAT(
      OutputSizesOf(OneInput{.sizes = {2}}.Plan(Pads({1}, {1}), {OutputDesc{.sizes = {4}}})),
      ElementsAre(4));
}

TEST(PadValidationTest, TheValueIsExactInTheInputsDtype) {
  EXPECT_THAT((OneInput{.dtype = DType::kUint8, .sizes = {2}}.Plan(Pads({1}, {0}, "", "256"))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.value is \"256\", out of range; uint8 takes an integer from 0 to "
                          "255")));
  EXPECT_THAT(
      (OneInput{.dtype = DType::kInt32, .sizes = {2}}.Plan(Pads({1}, {0}, "constant", "2.5"))),
      StatusIs(absl::StatusCode::kInvalidArgument,
               Eq("pad.value is \"2.5\", not an integer; int32 takes an integer from "
                  "-2147483648 to 2147483647")));
  EXPECT_THAT((OneInput{.sizes = {2}}.Plan(Pads({1}, {0}, "", "one"))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("pad.value is \"one\"; float32 takes a number, \"nan\", \"inf\" or "
                          "\"-inf\"")));
  ASSERT_OK_AND_ASSIGN(
      ExecutionPlan plan,
      (OneInput{.dtype = DType::kInt16, .sizes = {2}}.Plan(Pads({1}, {0}, "", "-2"))));
  EXPECT_EQ(plan.fill_value[0], std::byte{0xFE});
  EXPECT_EQ(plan.fill_value[1], std::byte{0xFF});
}

TEST(PadValidationTest, OtherModesIgnoreTheValue) {
  EXPECT_THAT(OutputSizesOf(OneInput{.dtype = DType::kUint8, .sizes = {2}}.Plan(
                  Pads({1}, {0}, "edge", "1000"))),
              ElementsAre(3));
  EXPECT_THAT(OutputSizesOf(OneInput{.sizes = {2}}.Plan(Pads({1}, {0}, "symmetric", "text"))),
              ElementsAre(3));
}

TEST(PadValidationTest, MoreThanTheElementLimitIsExhausted) {
  EXPECT_THAT((OneInput{.sizes = {1}}.Plan(Pads({int64_t{1} << 32}, {0}))),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("outputs[0].sizes [4294967297] hold 4294967297 elements; the limit is "
                          "4294967295")));
}

TEST(PadValidationTest, ASizePast64BitsIsInvalid) {
  EXPECT_THAT((OneInput{.sizes = {2}}.Plan(Pads({INT64_MAX}, {1}))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("input.sizes[0] = 2 plus pad.start_padding[0] = 9223372036854775807 "
                          "and pad.end_padding[0] = 1 does not fit 64 bits")));
}

TEST(PadValidationTest, ManyWideReflectionsAtOnceAreExhausted) {
  // Five runs in each of six dimensions: 15625 copies, more than one plan holds.
  const std::vector<int64_t> sizes(6, 4), start(6, 1), wide(6, 12);
  EXPECT_THAT((OneInput{.sizes = sizes}.Plan(Pads(start, wide, "reflect"))),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("pad in reflect mode takes 15625 copies here (the product of each "
                          "dimension's runs, more where padding is wider than the input); one "
                          "plan holds at most 8192")));
  // Padding no wider than the input is three runs a dimension: 3^8 fits.
  const std::vector<int64_t> eight(8, 2), ones(8, 1);
  EXPECT_THAT(OutputSizesOf(OneInput{.sizes = eight}.Plan(Pads(ones, ones, "reflect"))),
              ElementsAre(4, 4, 4, 4, 4, 4, 4, 4));
}

TEST(PadRunsTest, EdgeRepeatsTheFirstAndLastElement) {
  const std::vector<PadRun> runs = DimensionRuns(PadMode::kEdge, 4, 2, 3);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].in_step, 0);
  EXPECT_EQ(runs[0].length, 2);
  EXPECT_EQ(runs[1].out_begin, 2);
  EXPECT_EQ(runs[1].length, 4);
  EXPECT_EQ(runs[2].in_begin, 3);
  EXPECT_EQ(runs[2].length, 3);
}

// Expands runs to the input position each output position reads.
std::vector<int64_t> Positions(const std::vector<PadRun>& runs) {
  std::vector<int64_t> at;
  for (const PadRun& run : runs) {
    for (int64_t r = 0; r < run.repeats; ++r) {
      for (int64_t j = 0; j < run.length; ++j) {
        const size_t position = static_cast<size_t>(run.out_begin + r * run.period + j);
        if (at.size() <= position) at.resize(position + 1, -1);
        EXPECT_EQ(at[position], -1) << "position " << position << " written twice";
        at[position] = run.in_begin + j * run.in_step;
      }
    }
  }
  return at;
}

TEST(PadRunsTest, ReflectAndSymmetricFoldBackAsOftenAsTheyMust) {
  // OPERATORS.md's examples: [1, 2, 3] with start padding 5.
  EXPECT_THAT(Positions(DimensionRuns(PadMode::kReflect, 3, 5, 0)),
              ElementsAre(1, 0, 1, 2, 1, 0, 1, 2));
  EXPECT_THAT(Positions(DimensionRuns(PadMode::kSymmetric, 3, 5, 0)),
              ElementsAre(1, 2, 2, 1, 0, 0, 1, 2));
}

TEST(PadRunsTest, RunsMatchTheFormulaForEveryPadding) {
  for (PadMode mode : {PadMode::kEdge, PadMode::kReflect, PadMode::kSymmetric}) {
    for (int64_t n = mode == PadMode::kReflect ? 2 : 1; n <= 5; ++n) {
      for (int64_t start = 0; start <= 13; ++start) {
        for (int64_t end = 0; end <= 13; ++end) {
          const std::vector<PadRun> runs = DimensionRuns(mode, n, start, end);
          std::vector<int64_t> expected;
          for (int64_t t = -start; t < n + end; ++t) {
            if (mode == PadMode::kEdge) {
              expected.push_back(std::min(std::max(t, int64_t{0}), n - 1));
              continue;
            }
            const int64_t p = mode == PadMode::kReflect ? 2 * n - 2 : 2 * n;
            const int64_t m = ((t % p) + p) % p;
            expected.push_back(m < n ? m : (mode == PadMode::kReflect ? p - m : p - 1 - m));
          }
          EXPECT_EQ(Positions(runs), expected)
              << static_cast<int>(mode) << " n=" << n << " start=" << start << " end=" << end;
          EXPECT_LE(runs.size(), 6u);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tensorop
