#include "server/wire/wire_bound.h"

#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/wire/convert.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {
namespace {

using ::testing::HasSubstr;

grpc::ByteBuffer Bytes(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

v1::RunRequest SmallRequest() {
  v1::RunRequest request;
  request.set_id("a");
  request.mutable_slice()->add_offsets(0);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(1000);
  input.set_data(std::string(1000, 'x'));
  request.add_outputs()->add_sizes(10);
  return request;
}

TEST(WireBoundTest, ABoundCoversTheDataAndStaysNearTheWireSize) {
  const std::string wire = SmallRequest().SerializeAsString();
  absl::StatusOr<int64_t> bound = ParsedBytesBound(Bytes(wire), *v1::RunRequest::descriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, 1000);
  EXPECT_LE(*bound, 1000 + 4096);
}

TEST(WireBoundTest, APackedFieldCountsEightBytesAndMorePerWireByte) {
  v1::RunRequest request = SmallRequest();
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  for (int i = 0; i < 100000; ++i) input.add_sizes(1);  // one byte each on the wire
  const std::string wire = request.SerializeAsString();
  absl::StatusOr<int64_t> bound = ParsedBytesBound(Bytes(wire), *v1::RunRequest::descriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, 8 * 100000);
  v1::RunRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  // The tensor's own footprint: protobuf 3.21's SpaceUsedLong of a whole
  // RunRequest walks its inputs map through a repeated field the map may not
  // have built, which crashes under ThreadSanitizer.
  EXPECT_GE(*bound, static_cast<int64_t>(parsed.inputs().at("input").SpaceUsedLong()));
}

TEST(WireBoundTest, GarbageIsInvalidArgumentNamingTheType) {
  absl::StatusOr<int64_t> bound =
      ParsedBytesBound(Bytes("\xff\xff\xff garbage"), *v1::RunRequest::descriptor());
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bound.status().message()), HasSubstr("tensorop.v1.RunRequest"));
  // Truncated: a length past the end.
  const std::string wire = SmallRequest().SerializeAsString();
  EXPECT_FALSE(
      ParsedBytesBound(Bytes(wire.substr(0, wire.size() - 10)), *v1::RunRequest::descriptor())
          .ok());
}

TEST(WireBoundTest, RunResponseBytesIsTheSerializedSize) {
  Layout layout;
  layout.dtype = DType::kUint8;
  layout.sizes = {3, 300};
  layout.strides = {300, 1};
  layout.element_count = 900;
  layout.buffer_elements = 900;
  Layout empty = layout;
  empty.sizes = {0, 300};
  empty.element_count = 0;
  empty.buffer_elements = 0;
  for (bool with_status : {false, true}) {
    v1::RunResponse response;
    response.set_id("id");
    response.set_backend("cpu");
    if (with_status) response.mutable_status()->set_message("");
    for (const Layout& each : {layout, empty}) {
      v1::Tensor* tensor = response.add_outputs();
      SetTensorLayout(each, tensor);
      // As the server answers: an empty output has no data field.
      if (each.buffer_bytes() > 0) {
        tensor->set_data(std::string(static_cast<size_t>(each.buffer_bytes()), '\0'));
      }
    }
    EXPECT_EQ(RunResponseBytes("id", "cpu", with_status, "", {layout, empty}),
              static_cast<int64_t>(response.ByteSizeLong()));
  }
}

}  // namespace
}  // namespace tensorop::server
