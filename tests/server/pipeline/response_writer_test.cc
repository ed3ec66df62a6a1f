// The copy-free answers and chunk reads (server/pipeline/response_writer.h,
// server/wire/chunk_part.h) against protobuf's own serializer and parser, byte for
// byte.
#include "server/pipeline/response_writer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/support/byte_buffer.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "tensorop/v1/tensorop.pb.h"
#include "tests/support/layout.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::MakeLayout;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

// A buffer of `layout` with bytes 1, 2, 3, ... (wrapping), zero where padding.
OutputBuffer Filled(const Layout& layout, std::string* bytes) {
  absl::StatusOr<OutputBuffer> buffer = AllocateOutput(layout, nullptr);
  EXPECT_TRUE(buffer.ok());
  bytes->assign(static_cast<size_t>(layout.buffer_bytes()), '\0');
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = static_cast<char>(i % 251 + 1);
  std::memcpy(buffer->get(), bytes->data(), bytes->size());
  return *std::move(buffer);
}

void ExpectSameAsProtobuf(const std::vector<Layout>& layouts, const std::string& id,
                          const std::string& backend, const v1::Status* status) {
  OutputBuffers outputs;
  v1::RunResponse expected;
  expected.set_id(id);
  for (const Layout& layout : layouts) {
    std::string bytes;
    outputs.layouts.push_back(layout);
    outputs.buffers.push_back(Filled(layout, &bytes));
    ToProtoTensor(layout, std::as_bytes(std::span(bytes)), expected.add_outputs());
  }
  expected.set_backend(backend);
  if (status != nullptr) *expected.mutable_status() = *status;
  grpc::ByteBuffer out;
  SerializeRunResponse(id, outputs, backend, status, &out);
  EXPECT_EQ(Flatten(out), expected.SerializeAsString());
  EXPECT_TRUE(outputs.layouts.empty());
  EXPECT_TRUE(outputs.buffers.empty());
}

TEST(ResponseWriterTest, RunResponsesAreByteExactWithProtobuf) {
  const Layout big = MakeLayout(DType::kUint8, {3, 100000}, {100000, 1});
  const Layout padded = MakeLayout(DType::kFloat32, {2, 3}, {8, 2});
  const Layout scalar = MakeLayout(DType::kInt64, {}, {});
  const Layout empty = MakeLayout(DType::kFloat16, {0, 4}, {4, 1});
  ExpectSameAsProtobuf({big}, "req-1", "cpu", nullptr);
  ExpectSameAsProtobuf({padded, scalar, empty, big}, "", "opencl:pthread-x", nullptr);
  ExpectSameAsProtobuf({}, "none", "cpu", nullptr);
  v1::Status ok;
  ExpectSameAsProtobuf({scalar, padded}, std::string(300, 'i'), "cpu", &ok);
  v1::Status error;
  error.set_code(3);
  error.set_message("input.sizes[0] must be ...");
  ExpectSameAsProtobuf({}, "bad", "", &error);
}

TEST(ResponseWriterTest, OutputContentsAreByteExactWithProtobuf) {
  // A ModelInferResponse's raw_output_contents (its last field) from output
  // buffers: one named twice, an empty one, forwarded slices, and a buffer no
  // entry names (freed).
  const std::vector<Layout> layouts = {
      MakeLayout(DType::kUint8, {3, 100000}, {100000, 1}), MakeLayout(DType::kInt64, {}, {}),
      MakeLayout(DType::kFloat16, {0, 4}, {4, 1}), MakeLayout(DType::kUint8, {8}, {1}),
      MakeLayout(DType::kFloat32, {2, 2}, {2, 1})};
  OutputBuffers outputs;
  std::vector<std::string> bytes(layouts.size());
  for (size_t k = 0; k < layouts.size(); ++k) {
    outputs.layouts.push_back(layouts[k]);
    outputs.buffers.push_back(Filled(layouts[k], &bytes[k]));
  }
  outputs.forwarded.resize(layouts.size());
  bytes[3] = "received";
  outputs.forwarded[3] = {grpc::Slice(std::string("rec")), grpc::Slice(std::string("eived"))};
  inference::ModelInferResponse head;
  head.set_model_name("split");
  head.set_model_version("1");
  head.set_id(std::string(200, 'i'));
  (*head.mutable_parameters())["backend"].set_string_param("cpu");
  head.add_outputs()->set_name("output_0");
  const std::vector<int> contents = {3, 0, 1, 0, 2};
  inference::ModelInferResponse expected = head;
  for (int k : contents) expected.add_raw_output_contents(bytes[static_cast<size_t>(k)]);
  grpc::ByteBuffer out;
  SerializeWithOutputContents(head, inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                              contents, outputs, &out);
  EXPECT_EQ(Flatten(out), expected.SerializeAsString());
  EXPECT_TRUE(outputs.layouts.empty());
  EXPECT_TRUE(outputs.buffers.empty());
  EXPECT_TRUE(outputs.forwarded.empty());
}

TEST(ResponseWriterTest, OnlyLayoutsWithPaddingAreZeroed) {
  EXPECT_TRUE(CoversBuffer(MakeLayout(DType::kUint8, {4, 5}, {5, 1})));
  EXPECT_TRUE(CoversBuffer(MakeLayout(DType::kUint8, {4, 5}, {1, 4})));  // transposed
  EXPECT_FALSE(CoversBuffer(MakeLayout(DType::kUint8, {4, 5}, {6, 1})));
  const Layout padded = MakeLayout(DType::kInt32, {3, 3}, {5, 1});
  absl::StatusOr<OutputBuffer> buffer = AllocateOutput(padded, nullptr);
  ASSERT_TRUE(buffer.ok());
  for (int64_t i = 0; i < padded.buffer_bytes(); ++i) {
    ASSERT_EQ(static_cast<int>(buffer->get()[i]), 0) << "byte " << i;
  }
}

TEST(ResponseWriterTest, ChunkPartsAreByteExactWithProtobuf) {
  const Layout layout = MakeLayout(DType::kUint8, {300000}, {1});
  std::string bytes;
  SharedOutput shared = Share(Filled(layout, &bytes));
  for (const auto& [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {0, 127}, {5, 128}, {1000, 100000}, {0, 300000}}) {
    v1::ResultPart expected;
    expected.set_chunk(bytes.substr(static_cast<size_t>(offset), static_cast<size_t>(length)));
    grpc::ByteBuffer out;
    SerializeChunkPart(shared, offset, length, &out);
    EXPECT_EQ(Flatten(out), expected.SerializeAsString()) << offset << "+" << length;
  }
  // The slices keep the buffer alive after its owner let go.
  grpc::ByteBuffer held;
  SerializeChunkPart(shared, 10, 20, &held);
  shared.reset();
  EXPECT_EQ(Flatten(held).substr(2), bytes.substr(10, 20));
}

TEST(ResponseWriterTest, ChunkPartsOfReceivedSlicesAreByteExactAcrossTheirEdges) {
  std::string bytes(300, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 1);
  // Slices of 1, 99, 100 and 100 bytes, as gRPC might have received them.
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t size : {size_t{1}, size_t{99}, size_t{100}, size_t{100}}) {
    slices.emplace_back(bytes.data() + at, size);
    at += size;
  }
  for (const auto& [offset, length] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 300}, {0, 1}, {1, 99}, {0, 100}, {50, 200}, {99, 2}, {299, 1}, {150, 0}}) {
    v1::ResultPart expected;
    expected.set_chunk(bytes.substr(static_cast<size_t>(offset), static_cast<size_t>(length)));
    grpc::ByteBuffer out;
    SerializeChunkPart(slices, offset, length, &out);
    EXPECT_EQ(Flatten(out), expected.SerializeAsString()) << offset << "+" << length;
  }
}

// `text` cut into slices of `piece` bytes, as gRPC hands received messages over.
grpc::ByteBuffer Sliced(const std::string& text, size_t piece) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < text.size(); at += piece) {
    slices.emplace_back(text.data() + at, std::min(piece, text.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(ChunkPartViewTest, ReadsTheChunksProtobufWritesFromAnySlicing) {
  v1::RequestPart part;
  part.mutable_chunk()->set_input("updates");
  std::string data(70000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13);
  part.mutable_chunk()->set_data(data);
  const std::string wire = part.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{4096}, wire.size()}) {
    std::optional<ChunkPartView> view = ChunkPartView::Of(Sliced(wire, piece));
    ASSERT_TRUE(view.has_value()) << piece;
    EXPECT_EQ(view->input(), "updates");
    EXPECT_EQ(view->data_bytes(), 70000);
    std::string copied(70002, 'x');
    view->CopyDataTo(0, 70000, reinterpret_cast<std::byte*>(copied.data()) + 1);
    EXPECT_EQ(copied, "x" + data + "x");
    // Any part of them: across slice ends, and none.
    for (const auto& [from, length] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 1}, {1, 4097}, {4095, 2}, {69999, 1}, {12345, 0}, {3, 69997}}) {
      std::string part(static_cast<size_t>(length) + 2, 'x');
      view->CopyDataTo(from, length, reinterpret_cast<std::byte*>(part.data()) + 1);
      EXPECT_EQ(part,
                "x" + data.substr(static_cast<size_t>(from), static_cast<size_t>(length)) + "x")
          << piece << ": " << from << "+" << length;
    }
  }
}

TEST(ChunkPartViewTest, LeavesEveryOtherFormToProtobuf) {
  v1::RequestPart request_part;
  request_part.mutable_request()->set_id("x");
  v1::RequestPart chunk;
  chunk.mutable_chunk()->set_input("input");
  chunk.mutable_chunk()->set_data("abc");
  const std::string wire = chunk.SerializeAsString();
  const std::vector<std::string> others = {
      request_part.SerializeAsString(),
      wire + wire,                      // the chunk field twice (protobuf merges)
      wire.substr(0, wire.size() - 1),  // cut short
      wire + "\x08\x01",                // a trailing unknown field
      std::string("\x12\x0c\x12\x03"
                  "abc"
                  "\x0a\x05"
                  "input",
                  14),  // fields out of order
      "",
  };
  for (const std::string& bytes : others) {
    EXPECT_FALSE(ChunkPartView::Of(Sliced(bytes, 5)).has_value())
        << ::testing::PrintToString(bytes);
  }
  // Data without a name, and an empty chunk: recognised, named "".
  v1::RequestPart unnamed;
  unnamed.mutable_chunk()->set_data("zz");
  std::optional<ChunkPartView> view = ChunkPartView::Of(Sliced(unnamed.SerializeAsString(), 1));
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->input(), "");
  EXPECT_EQ(view->data_bytes(), 2);
}

// A request with two inputs carrying data, one without, and every other kind
// of field.
v1::RunRequest RequestWithData(const std::string& input_data, const std::string& indices_data) {
  v1::RunRequest request;
  request.set_id("lift");
  request.mutable_scatter_elements()->set_axis(1);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(static_cast<int64_t>(input_data.size()));
  input.add_strides(1);
  input.set_data(input_data);
  v1::Tensor& indices = (*request.mutable_inputs())["indices"];
  indices.set_dtype(v1::INT64);
  indices.add_sizes(2);
  indices.set_data(indices_data);
  v1::Tensor& updates = (*request.mutable_inputs())["updates"];
  updates.set_dtype(v1::UINT8);
  updates.mutable_shared_memory()->set_region("r");
  request.add_outputs()->add_sizes(3);
  request.set_backend(v1::CPU);
  request.set_device_index(0);
  return request;
}

TEST(RequestDataViewTest, TakesTheInputsDataOutOfAnySlicing) {
  std::string input_data(70000, '\0');
  for (size_t i = 0; i < input_data.size(); ++i) input_data[i] = static_cast<char>(i * 11);
  const std::string indices_data(16, '\x05');
  const v1::RunRequest request = RequestWithData(input_data, indices_data);
  const std::string wire = request.SerializeAsString();
  v1::RunRequest without_data = request;
  for (auto& [name, tensor] : *without_data.mutable_inputs()) tensor.clear_data();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{4096}, wire.size()}) {
    std::optional<RequestDataView> view = RequestDataView::Of(Sliced(wire, piece));
    ASSERT_TRUE(view.has_value()) << piece;
    v1::RunRequest rest;
    ASSERT_TRUE(rest.ParseFromString(view->rest()));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(rest, without_data))
        << piece << ": " << rest.ShortDebugString();
    std::map<std::string, std::string> data;
    for (size_t i = 0; i < view->inputs().size(); ++i) {
      const RequestDataView::InputData& input = view->inputs()[i];
      std::string bytes(static_cast<size_t>(input.bytes), 'x');
      view->MoveDataTo(i, reinterpret_cast<std::byte*>(bytes.data()));
      data[input.input] = bytes;
    }
    EXPECT_EQ(data, (std::map<std::string, std::string>{
                        {"indices", indices_data}, {"input", input_data}, {"updates", ""}}));
  }
}

TEST(RequestDataViewTest, TakesLargeRepeatedBytesOutOfAnySlicing) {
  // A ModelInferRequest whose raw_input_contents are a small entry, a large
  // one, an empty one and another large one, between its other fields.
  std::string large(70000, '\0'), other(66000, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 11);
  for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<char>(i * 3 + 1);
  inference::ModelInferRequest request;
  request.set_model_name("slice");
  request.set_id("r");
  (*request.mutable_parameters())["backend"].set_string_param("cpu");
  request.add_inputs()->set_name("offsets");
  request.add_outputs()->set_name("output");
  for (const std::string& entry : {std::string("12345678"), large, std::string(), other}) {
    request.add_raw_input_contents(entry);
  }
  const std::string wire = request.SerializeAsString();
  inference::ModelInferRequest without_large = request;
  without_large.mutable_raw_input_contents(1)->clear();
  without_large.mutable_raw_input_contents(3)->clear();
  constexpr int kField = inference::ModelInferRequest::kRawInputContentsFieldNumber;
  for (size_t piece : {size_t{1}, size_t{3}, size_t{4096}, wire.size()}) {
    std::optional<RequestDataView> view =
        RequestDataView::OfRepeatedBytes(Sliced(wire, piece), kField, 65536);
    ASSERT_TRUE(view.has_value()) << piece;
    inference::ModelInferRequest rest;
    ASSERT_TRUE(rest.ParseFromString(view->rest()));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(rest, without_large))
        << piece << ": " << rest.ShortDebugString();
    ASSERT_EQ(view->inputs().size(), 4u);
    EXPECT_EQ(view->inputs()[0].bytes, 0);
    EXPECT_EQ(view->inputs()[2].bytes, 0);
    view->Name(3, "input");
    EXPECT_EQ(view->inputs()[3].input, "input");
    for (const auto& [index, expected] : {std::pair<size_t, const std::string*>{1, &large},
                                          std::pair<size_t, const std::string*>{3, &other}}) {
      ASSERT_EQ(view->inputs()[index].bytes, static_cast<int64_t>(expected->size()));
      std::string bytes(expected->size(), 'x');
      view->MoveDataTo(index, reinterpret_cast<std::byte*>(bytes.data()));
      EXPECT_TRUE(bytes == *expected) << piece << ": entry " << index;
    }
  }
  // Nothing that large, more entries than a request has inputs, and bytes
  // protobuf's serializer does not write: no view.
  EXPECT_FALSE(RequestDataView::OfRepeatedBytes(Sliced(wire, 7), kField, 70001).has_value());
  inference::ModelInferRequest many = request;
  for (size_t i = 0; i < RequestDataView::kMaxRepeatedEntries; ++i) many.add_raw_input_contents();
  EXPECT_FALSE(
      RequestDataView::OfRepeatedBytes(Sliced(many.SerializeAsString(), 4096), kField, 65536)
          .has_value());
  EXPECT_FALSE(
      RequestDataView::OfRepeatedBytes(Sliced(wire.substr(0, wire.size() - 1), 7), kField, 65536)
          .has_value());
}

TEST(RequestDataViewTest, LeavesAnEmptyDataFieldInTheRest) {
  v1::RunRequest request;
  (*request.mutable_inputs())["input"].set_data("");  // a oneof's member, set
  std::optional<RequestDataView> view = RequestDataView::Of(Sliced(request.SerializeAsString(), 5));
  ASSERT_TRUE(view.has_value());
  ASSERT_EQ(view->inputs().size(), 1u);
  EXPECT_EQ(view->inputs()[0].bytes, 0);
  v1::RunRequest rest;
  ASSERT_TRUE(rest.ParseFromString(view->rest()));
  EXPECT_EQ(rest.inputs().at("input").location_case(), v1::Tensor::kData);
}

TEST(RequestDataViewTest, LeavesEveryOtherFormToProtobuf) {
  const std::string wire = RequestWithData("abc", "12345678").SerializeAsString();
  v1::RunRequest one;
  (*one.mutable_inputs())["input"].set_data("abc");
  const std::string entry = one.SerializeAsString();
  // The same Tensor with its data twice (protobuf keeps the last).
  const std::string tensor_twice = std::string(
      "\x32\x12\x0a\x05input\x12\x09\x22\x02"
      "ab\x22\x03xyz",
      20);
  // Data and a handle, its oneof, in either order (protobuf keeps the last).
  const std::string data_then_handle = std::string(
      "\x32\x11\x0a\x05input\x12\x08\x22\x02"
      "ab\x32\x02\x0a\x00",
      19);
  const std::string handle_then_data = std::string(
      "\x32\x11\x0a\x05input\x12\x08\x32\x02\x0a\x00\x22\x02"
      "ab",
      19);
  const std::vector<std::string> others = {
      entry + entry,  // an input named twice (protobuf keeps the last)
      tensor_twice, data_then_handle, handle_then_data,
      // A tag padded to 6 bytes: protobuf refuses it, but would accept the
      // same field's canonical 5 bytes (found by run_fuzzer).
      std::string("\xb2\xb2\xbd\xfd\xff\x00\x00", 7), wire.substr(0, wire.size() - 1),  // cut short
      std::string("\x32\x00", 2),  // an entry without a key
      std::string("\x0b\x0c", 2),  // a group
  };
  for (const std::string& bytes : others) {
    EXPECT_FALSE(RequestDataView::Of(Sliced(bytes, 5)).has_value())
        << ::testing::PrintToString(bytes);
  }
  v1::RunRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(tensor_twice));  // valid protobuf all the same
  EXPECT_EQ(parsed.inputs().at("input").data(), "xyz");
  ASSERT_TRUE(parsed.ParseFromString(data_then_handle));
  EXPECT_TRUE(parsed.inputs().at("input").has_handle());
  ASSERT_TRUE(parsed.ParseFromString(handle_then_data));
  EXPECT_EQ(parsed.inputs().at("input").data(), "ab");
}

}  // namespace
}  // namespace tensorop::server
