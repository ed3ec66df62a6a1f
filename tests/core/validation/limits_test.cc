// Server limits applied by PlanOperator (core/operator.h, core/limits.h): bytes
// per request and elements per tensor are RESOURCE_EXHAUSTED with the numbers.
#include "core/limits.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/attrs.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::Eq;

class RequestLimitsTest : public ::testing::Test {
 protected:
  // A tensor over `elements` zeroed elements (default: product(sizes)), packed
  // unless strides are given. The fixture keeps the bytes alive.
  TensorView Tensor(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides = {},
                    int64_t elements = -1) {
    if (elements < 0) {
      elements = 1;
      for (int64_t size : sizes) elements *= size;
    }
    buffers_.emplace_back(static_cast<size_t>(elements * ElementSize(dtype)), std::byte{0});
    return TensorView{TensorDesc{dtype, std::move(sizes), std::move(strides)}, buffers_.back()};
  }

  // slice of a float32 [4, 6] input (96 bytes) into `output`.
  OpRequest SliceRequest(OutputDesc output) {
    OpRequest request;
    request.attrs = SliceAttrs{{0, 0}, {2, 3}, {1, 1}};
    request.inputs = {{"input", Tensor(DType::kFloat32, {4, 6})}};
    request.outputs = {std::move(output)};
    return request;
  }

  // Moving a std::vector keeps its heap buffer, so views stay valid as this grows.
  std::vector<std::vector<std::byte>> buffers_;
  Limits limits_;
};

TEST_F(RequestLimitsTest, RequestOverMaxRequestBytesNamesInputAndOutputBytes) {
  limits_.max_request_bytes = 40;
  EXPECT_THAT(PlanOperator(SliceRequest(OutputDesc{{2, 3}, {}}), limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 96 bytes of inputs and 24 bytes of outputs; "
                          "the limit is 40 in all")));
}

TEST_F(RequestLimitsTest, RequestOfExactlyMaxRequestBytesIsAccepted) {
  limits_.max_request_bytes = 96 + 24;
  ASSERT_OK_AND_ASSIGN(ExecutionPlan plan,
                       PlanOperator(SliceRequest(OutputDesc{{2, 3}, {}}), limits_));
  EXPECT_EQ(plan.bytes_moved, 24);
}

TEST_F(RequestLimitsTest, OneByteOverMaxRequestBytesIsRejected) {
  limits_.max_request_bytes = 96 + 24 - 1;
  EXPECT_THAT(PlanOperator(SliceRequest(OutputDesc{{2, 3}, {}}), limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 96 bytes of inputs and 24 bytes of outputs; "
                          "the limit is 119 in all")));
}

TEST_F(RequestLimitsTest, OutputPaddingCountsTowardRequestBytes) {
  // Rows of 3 at a pitch of 4: 1 + 4 + 2 = 7 elements, 28 bytes.
  limits_.max_request_bytes = 96 + 24;
  EXPECT_THAT(PlanOperator(SliceRequest(OutputDesc{{2, 3}, {4, 1}}), limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 96 bytes of inputs and 28 bytes of outputs; "
                          "the limit is 120 in all")));
}

TEST_F(RequestLimitsTest, InputBytesAreCountedAsReceived) {
  // A strided input whose buffer is longer than its extent counts in full.
  OpRequest request;
  request.attrs = SliceAttrs{{0, 0}, {2, 3}, {1, 1}};
  request.inputs = {{"input", Tensor(DType::kFloat32, {2, 3}, {4, 1}, 10)}};
  request.outputs = {OutputDesc{{2, 3}, {}}};
  limits_.max_request_bytes = 40 + 24 - 1;
  EXPECT_THAT(PlanOperator(request, limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 40 bytes of inputs and 24 bytes of outputs; "
                          "the limit is 63 in all")));
}

TEST_F(RequestLimitsTest, SplitCountsEveryOutput) {
  OpRequest request;
  request.attrs = SplitAttrs{0};
  request.inputs = {{"input", Tensor(DType::kFloat32, {4, 6})}};
  request.outputs = {OutputDesc{{1, 6}, {}}, OutputDesc{{3, 6}, {}}};
  limits_.max_request_bytes = 191;
  EXPECT_THAT(PlanOperator(request, limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 96 bytes of inputs and 96 bytes of outputs; "
                          "the limit is 191 in all")));
}

TEST_F(RequestLimitsTest, ScatterElementsCountsAllThreeInputs) {
  OpRequest request;
  request.attrs = ScatterElementsAttrs{0};
  request.inputs = {{"input", Tensor(DType::kFloat32, {3, 4})},
                    {"indices", Tensor(DType::kInt32, {2, 4})},
                    {"updates", Tensor(DType::kFloat32, {2, 4})}};
  limits_.max_request_bytes = 100;
  EXPECT_THAT(PlanOperator(request, limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 112 bytes of inputs and 48 bytes of outputs; "
                          "the limit is 100 in all")));
}

TEST_F(RequestLimitsTest, HugelyPaddedOutputIsResourceExhaustedUnderTheDefaultLimit) {
  OpRequest request;
  request.attrs = SplitAttrs{0};
  request.inputs = {{"input", Tensor(DType::kFloat64, {4})}};
  // (2 - 1) * 2^59 + 1 elements of 8 bytes: 2^62 + 8 bytes.
  request.outputs = {OutputDesc{{2}, {int64_t{1} << 59}}, OutputDesc{{2}, {}}};
  EXPECT_THAT(PlanOperator(request, Limits{}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 32 bytes of inputs and 4611686018427387928 "
                          "bytes of outputs; the limit is 4294967296 in all")));
}

TEST_F(RequestLimitsTest, OutputsTogetherPastTwoToThe63BytesAreResourceExhausted) {
  OpRequest request;
  request.attrs = SplitAttrs{0};
  request.inputs = {{"input", Tensor(DType::kFloat64, {4})}};
  request.outputs = {OutputDesc{{2}, {int64_t{1} << 59}}, OutputDesc{{2}, {int64_t{1} << 59}}};
  EXPECT_THAT(
      PlanOperator(request, Limits{}),
      StatusIs(absl::StatusCode::kResourceExhausted, Eq("the outputs need more than 2^63 bytes")));
}

TEST_F(RequestLimitsTest, HugeOutputPitchIsResourceExhausted) {
  // Columns 2^61 elements apart: a valid layout (3 * 2^61 + 2 elements fit in 64
  // bits) but far over the limit. Planning must not overflow on the way.
  OpRequest request;
  request.attrs = SliceAttrs{{0, 0}, {2, 4}, {1, 1}};
  request.inputs = {{"input", Tensor(DType::kUint8, {2, 4})}};
  request.outputs = {OutputDesc{{2, 4}, {1, int64_t{1} << 61}}};
  EXPECT_THAT(PlanOperator(request, Limits{}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("the request needs 8 bytes of inputs and 6917529027641081858 "
                          "bytes of outputs; the limit is 4294967296 in all")));
}

TEST_F(RequestLimitsTest, ValidationErrorsComeBeforeTheRequestLimit) {
  limits_.max_request_bytes = 1;
  OpRequest request = SliceRequest(OutputDesc{{2, 3}, {}});
  std::get<SliceAttrs>(request.attrs).window_strides = {1, 0};
  EXPECT_THAT(
      PlanOperator(request, limits_),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("slice.window_strides[1] must not be 0")));
}

TEST_F(RequestLimitsTest, MaxTensorElementsAppliesToEveryInputByName) {
  OpRequest request;
  request.attrs = ScatterElementsAttrs{0};
  request.inputs = {{"input", Tensor(DType::kFloat32, {3, 4})},
                    {"indices", Tensor(DType::kInt32, {5, 4})},
                    {"updates", Tensor(DType::kFloat32, {5, 4})}};
  limits_.max_tensor_elements = 15;
  EXPECT_THAT(PlanOperator(request, limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("indices.sizes [5, 4] hold 20 elements; the limit is 15")));
}

TEST_F(RequestLimitsTest, MaxTensorElementsAppliesToStridedSliceInput) {
  OpRequest request;
  StridedSliceAttrs attrs;
  request.attrs = attrs;
  request.inputs = {{"input", Tensor(DType::kUint8, {4, 6})}};
  limits_.max_tensor_elements = 23;
  EXPECT_THAT(PlanOperator(request, limits_),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("input.sizes [4, 6] hold 24 elements; the limit is 23")));
}

}  // namespace
}  // namespace tensorop
