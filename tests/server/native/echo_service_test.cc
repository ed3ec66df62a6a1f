// The echo baseline's answers: the real answer's shape, zero data, nothing run.
#include "server/native/echo_service.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/set_ints.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::SetInts;
using ::testing::ElementsAre;

v1::RunRequest Float32Input(std::initializer_list<int64_t> sizes, int64_t elements) {
  v1::RunRequest request;
  request.set_id("echo-1");
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::FLOAT32);
  SetInts(input.mutable_sizes(), sizes);
  input.set_data(std::string(static_cast<size_t>(elements) * 4, '\x7f'));
  return request;
}

TEST(EchoServiceTest, OutputTakesTheRequestedSizesPackedAndZeroed) {
  v1::RunRequest request = Float32Input({4, 4}, 16);
  request.mutable_slice();
  SetInts(request.add_outputs()->mutable_sizes(), {2, 3});
  v1::RunResponse response;
  ASSERT_TRUE(FillEchoResponse(request, 1 << 20, &response).ok());
  EXPECT_EQ(response.id(), "echo-1");
  EXPECT_EQ(response.backend(), "echo");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).dtype(), v1::FLOAT32);
  EXPECT_THAT(response.outputs(0).sizes(), ElementsAre(2, 3));
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(3, 1));
  EXPECT_EQ(response.outputs(0).data(), std::string(24, '\0'));
}

TEST(EchoServiceTest, RequestedStridesSpanTheirPadding) {
  v1::RunRequest request = Float32Input({4, 4}, 16);
  v1::OutputDesc* output = request.add_outputs();
  SetInts(output->mutable_sizes(), {2, 2});
  SetInts(output->mutable_strides(), {8, 1});
  v1::RunResponse response;
  ASSERT_TRUE(FillEchoResponse(request, 1 << 20, &response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(8, 1));
  EXPECT_EQ(response.outputs(0).data().size(), 10u * 4);  // 1 + 1*8 + 1*1 elements
}

TEST(EchoServiceTest, WithoutOutputDescriptionsTheInputShapeComesBack) {
  v1::RunRequest request = Float32Input({3, 0, 2}, 0);
  v1::RunResponse response;
  ASSERT_TRUE(FillEchoResponse(request, 1 << 20, &response).ok());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(response.outputs(0).sizes(), ElementsAre(3, 0, 2));
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(2, 2, 1));
  EXPECT_EQ(response.outputs(0).data(), "");
}

TEST(EchoServiceTest, NoInputIsInvalidArgument) {
  v1::RunRequest request;
  v1::RunResponse response;
  const absl::Status status = FillEchoResponse(request, 1 << 20, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "echo: the request has no input \"input\"");
}

TEST(EchoServiceTest, OutputsPastTheMessageLimitAreResourceExhausted) {
  v1::RunRequest request = Float32Input({4, 4}, 16);
  SetInts(request.add_outputs()->mutable_sizes(), {1024, 1024});
  v1::RunResponse response;
  const absl::Status status = FillEchoResponse(request, 1 << 20, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(response.outputs_size(), 0);
}

}  // namespace
}  // namespace tensorop::server
