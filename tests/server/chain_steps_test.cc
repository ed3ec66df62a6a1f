// RunChain's plan (server/engine/chain_steps.h) without a server: which steps
// run, which leave views and on what, when each output is last read, and
// which come back.
#include "server/engine/chain_steps.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "server/pipeline/service_options.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::RunChainRequest ChainOf(const std::string& text) {
  v1::RunChainRequest chain;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &chain)) << text;
  return chain;
}

absl::StatusOr<std::vector<PlannedStep>> Plan(const v1::RunChainRequest& chain) {
  const ServiceOptions options;
  EXPECT_TRUE(CheckReferences(chain, options.max_chain_steps).ok());
  return PlanChain(chain, options, NeverStop, nullptr);
}

// "abcdefgh" windowed to "bcdefg", then two bytes of that, every other one
// from its second: "ce".
constexpr char kWindowOfWindow[] = R"pb(
  steps {
    slice { offsets: 1 window_sizes: 6 window_strides: 1 }
    outputs { sizes: 6 }
    inputs {
      key: "input"
      value { tensor { dtype: UINT8 sizes: 8 data: "abcdefgh" } }
    }
  }
  steps {
    slice { offsets: 1 window_sizes: 3 window_strides: 2 }
    outputs { sizes: 2 }
    inputs {
      key: "input"
      value { step { step: 0 output: 0 } }
    }
  }
  results { step: 1 output: 0 }
)pb";

TEST(ChainStepsTest, AWindowThatOnlyAWindowReadsIsAViewTheReaderCopiesThrough) {
  ASSERT_OK_AND_ASSIGN(std::vector<PlannedStep> steps, Plan(ChainOf(kWindowOfWindow)));
  ASSERT_EQ(steps.size(), 2u);
  // Step 0 does not run: its output is a view on its own input.
  EXPECT_TRUE(steps[0].skipped);
  ASSERT_EQ(steps[0].outputs.size(), 1u);
  ASSERT_TRUE(steps[0].outputs[0].view.has_value());
  EXPECT_EQ(steps[0].outputs[0].view->root, 0);
  EXPECT_EQ(steps[0].outputs[0].view->window.base, 1);
  EXPECT_EQ(steps[0].outputs[0].last_read, 1);
  EXPECT_FALSE(steps[0].outputs[0].answered);
  // Step 1 runs (its output comes back), copying once from step 0's input:
  // elements 2 and 4 of "abcdefgh".
  EXPECT_FALSE(steps[1].skipped);
  EXPECT_EQ(steps[1].root, 0);
  ASSERT_EQ(steps[1].composed.size(), 1u);
  EXPECT_EQ(steps[1].composed[0].base, 2);
  EXPECT_THAT(steps[1].composed[0].strides, ElementsAre(2));
  EXPECT_TRUE(steps[1].outputs[0].answered);
  EXPECT_EQ(steps[1].outputs[0].last_read, 1);
  EXPECT_THAT(steps[1].outputs[0].layout.sizes, ElementsAre(2));
}

// A scatter reads step 0 (not a window: it needs bytes); a window reads the
// scatter; step 0 and step 2 come back.
constexpr char kScatterBetweenWindows[] = R"pb(
  steps {
    slice { offsets: 1 window_sizes: 6 window_strides: 1 }
    outputs { sizes: 6 }
    inputs {
      key: "input"
      value { tensor { dtype: UINT8 sizes: 8 data: "abcdefgh" } }
    }
  }
  steps {
    scatter_elements { axis: 0 }
    outputs { sizes: 6 }
    inputs {
      key: "input"
      value { step { step: 0 output: 0 } }
    }
    inputs {
      key: "indices"
      value { tensor { dtype: INT64 sizes: 1 data: "\000\000\000\000\000\000\000\000" } }
    }
    inputs {
      key: "updates"
      value { tensor { dtype: UINT8 sizes: 1 data: "z" } }
    }
  }
  steps {
    slice { offsets: 0 window_sizes: 3 window_strides: 1 }
    outputs { sizes: 3 }
    inputs {
      key: "input"
      value { step { step: 1 output: 0 } }
    }
  }
  results { step: 2 output: 0 }
  results { step: 0 output: 0 }
)pb";

TEST(ChainStepsTest, WhatAnOperatorReadsAsBytesRunsAndIsReadUntilItsLastReader) {
  ASSERT_OK_AND_ASSIGN(std::vector<PlannedStep> steps, Plan(ChainOf(kScatterBetweenWindows)));
  ASSERT_EQ(steps.size(), 3u);
  for (const PlannedStep& step : steps) {
    EXPECT_FALSE(step.skipped);
    EXPECT_EQ(step.root, -1);  // no step reads a view
    EXPECT_FALSE(step.outputs[0].view.has_value());
  }
  EXPECT_EQ(steps[0].outputs[0].last_read, 1);
  EXPECT_TRUE(steps[0].outputs[0].answered);
  EXPECT_EQ(steps[1].outputs[0].last_read, 2);
  EXPECT_FALSE(steps[1].outputs[0].answered);
  EXPECT_EQ(steps[2].outputs[0].last_read, 2);
  EXPECT_TRUE(steps[2].outputs[0].answered);
  // Indices given as a tensor: the scatter runs on the plan made here.
  EXPECT_FALSE(steps[1].replan);
  EXPECT_THAT(steps[1].outputs[0].layout.sizes, ElementsAre(6));
}

TEST(ChainStepsTest, AStepThatFailsToPlanIsNamed) {
  v1::RunChainRequest chain = ChainOf(kWindowOfWindow);
  chain.mutable_steps(1)->mutable_slice()->set_window_strides(0, 0);
  EXPECT_THAT(Plan(chain), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("steps[1].slice.window_strides[0]")));
}

}  // namespace
}  // namespace tensorop::server
