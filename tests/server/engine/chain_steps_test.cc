// RunChain's plan (server/engine/chain_steps.h) without a server: which steps
// run, which leave views and on what, when each output is last read, and
// which come back. Chains are built with the generated accessors: text
// format's reflection over map fields crashes in the ThreadSanitizer build
// (Debian's libprotobuf is not built with it).
#include "server/engine/chain_steps.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/service_options.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A slice step of a 1-D input: `window` elements from `offset` by `stride`,
// `output` of them.
v1::ChainStep* AddSlice(v1::RunChainRequest& chain, int64_t offset, int64_t window, int64_t stride,
                        int64_t output) {
  v1::ChainStep* step = chain.add_steps();
  step->mutable_slice()->add_offsets(offset);
  step->mutable_slice()->add_window_sizes(window);
  step->mutable_slice()->add_window_strides(stride);
  step->add_outputs()->add_sizes(output);
  return step;
}

// `step` reads output 0 of step `from` as its input `name`.
void ReadStep(v1::ChainStep* step, const std::string& name, int from) {
  v1::StepOutput* source = (*step->mutable_inputs())[name].mutable_step();
  source->set_step(from);
  source->set_output(0);
}

// `step` reads a 1-D tensor of `dtype` holding `data` as its input `name`.
void ReadTensor(v1::ChainStep* step, const std::string& name, v1::DType dtype,
                const std::string& data, int64_t elements) {
  v1::Tensor* tensor = (*step->mutable_inputs())[name].mutable_tensor();
  tensor->set_dtype(dtype);
  tensor->add_sizes(elements);
  tensor->set_data(data);
}

void AddResult(v1::RunChainRequest& chain, int step) {
  v1::ChainResult* result = chain.add_results();
  result->set_step(step);
  result->set_output(0);
}

// Step 0 of the chains below: "abcdefgh" windowed to "bcdefg".
v1::RunChainRequest WindowOfAbc() {
  v1::RunChainRequest chain;
  ReadTensor(AddSlice(chain, 1, 6, 1, 6), "input", v1::UINT8, "abcdefgh", 8);
  return chain;
}

absl::StatusOr<std::vector<PlannedStep>> Plan(const v1::RunChainRequest& chain) {
  const ServiceOptions options;
  EXPECT_TRUE(CheckReferences(chain, options.max_chain_steps).ok());
  return PlanChain(chain, options, NeverStop, nullptr);
}

// Then two bytes of that, every other one from its second: "ce".
v1::RunChainRequest WindowOfWindow() {
  v1::RunChainRequest chain = WindowOfAbc();
  ReadStep(AddSlice(chain, 1, 3, 2, 2), "input", 0);
  AddResult(chain, 1);
  return chain;
}

TEST(ChainStepsTest, AWindowThatOnlyAWindowReadsIsAViewTheReaderCopiesThrough) {
  ASSERT_OK_AND_ASSIGN(std::vector<PlannedStep> steps, Plan(WindowOfWindow()));
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
v1::RunChainRequest ScatterBetweenWindows() {
  v1::RunChainRequest chain = WindowOfAbc();
  v1::ChainStep* scatter = chain.add_steps();
  scatter->mutable_scatter_elements()->set_axis(0);
  scatter->add_outputs()->add_sizes(6);
  ReadStep(scatter, "input", 0);
  ReadTensor(scatter, "indices", v1::INT64, std::string(8, '\0'), 1);
  ReadTensor(scatter, "updates", v1::UINT8, "z", 1);
  ReadStep(AddSlice(chain, 0, 3, 1, 3), "input", 1);
  AddResult(chain, 2);
  AddResult(chain, 0);
  return chain;
}

TEST(ChainStepsTest, WhatAnOperatorReadsAsBytesRunsAndIsReadUntilItsLastReader) {
  ASSERT_OK_AND_ASSIGN(std::vector<PlannedStep> steps, Plan(ScatterBetweenWindows()));
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
  v1::RunChainRequest chain = WindowOfWindow();
  chain.mutable_steps(1)->mutable_slice()->set_window_strides(0, 0);
  EXPECT_THAT(Plan(chain), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("steps[1].slice.window_strides[0]")));
}

}  // namespace
}  // namespace tensorop::server
