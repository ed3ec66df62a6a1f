// Tensors that stay on the server (Put, OutputDesc.keep, Fetch, Release,
// ListHandles) against a real tensord. (About 780 lines: host and device
// handles and their views share the fixtures and helpers above the tests.)
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<float> OneToSixteen() {
  std::vector<float> values(16);
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i + 1);
  return values;
}

v1::Tensor HandleTensor(const std::string& id) {
  v1::Tensor tensor;
  tensor.mutable_handle()->set_id(id);
  return tensor;
}

// The doc slice ([1,1,4,4] 1..16 -> 2, 4, 10, 12) of `input`.
v1::RunRequest DocSliceOf(v1::Tensor input, bool keep) {
  v1::RunRequest request =
      SliceRequest("doc", std::move(input), {0, 0, 0, 1}, {1, 1, 4, 3}, {1, 1, 2, 2}, {1, 1, 2, 2});
  request.mutable_outputs(0)->set_keep(keep);
  request.set_backend(v1::CPU);
  return request;
}

class HandlesTest : public ::testing::Test {
 protected:
  explicit HandlesTest(std::vector<std::string> flags = {})
      : server_(std::move(flags)), stub_(v1::TensorOp::NewStub(Connect(server_.target()))) {}
  // Handles left would hold the server for its grace period on the way out.
  ~HandlesTest() override { ReleaseEveryHandle(*stub_); }

  // Puts the doc slice's input; its handle.
  v1::TensorHandle PutDocInput() {
    v1::TensorHandle handle;
    EXPECT_THAT(
        PutTensor(*stub_, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), &handle),
        GrpcOk());
    return handle;
  }

  grpc::Status Run(const v1::RunRequest& request, v1::RunResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->Run(&context, request, response);
  }

  // Fetches `id` whole: its header and bytes.
  grpc::Status Fetch(const std::string& id, std::vector<int64_t> strides, v1::OutputHeader* header,
                     std::string* data) {
    return FetchTensor(*stub_, id, strides, header, data);
  }

  grpc::Status Release(std::vector<std::string> ids) {
    grpc::ClientContext context;
    v1::ReleaseRequest request;
    for (std::string& id : ids) request.add_ids(std::move(id));
    v1::ReleaseResponse response;
    return stub_->Release(&context, request, &response);
  }

  TensordProcess server_;
  std::unique_ptr<v1::TensorOp::Stub> stub_;
};

TEST_F(HandlesTest, APutTensorIsAnInputAndAKeptOutputFetchesByteExact) {
  const v1::TensorHandle input = PutDocInput();
  EXPECT_THAT(input.id(), MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(input.replica(), server_.target());
  EXPECT_EQ(input.dtype(), v1::FLOAT32);
  EXPECT_THAT(input.sizes(), ElementsAre(1, 1, 4, 4));
  EXPECT_THAT(input.strides(), ElementsAre(16, 16, 4, 1));
  EXPECT_EQ(input.backend(), "cpu");
  EXPECT_EQ(input.byte_size(), 64);
  EXPECT_EQ(input.expires_unix_ms() - input.last_use_unix_ms(), 600'000);

  // Read in place; the answer carries the bytes.
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/false), &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));

  // Kept: the answer carries the layout and a handle, no bytes. A window on
  // a handle is a view of its bytes: rows 2 apart, every other column, from
  // element 1; the size-1 dimensions stride 0.
  response.Clear();
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/true), &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  const v1::Tensor& kept = response.outputs(0);
  EXPECT_EQ(kept.location_case(), v1::Tensor::kHandle);
  EXPECT_THAT(kept.sizes(), ElementsAre(1, 1, 2, 2));
  EXPECT_THAT(kept.strides(), ElementsAre(0, 0, 8, 2));
  EXPECT_EQ(kept.handle().byte_size(), (1 + 8 + 2) * 4);
  EXPECT_EQ(kept.handle().view_of(), input.id());
  EXPECT_EQ(kept.handle().byte_offset(), 4);
  EXPECT_NE(kept.handle().id(), input.id());

  v1::OutputHeader header;
  std::string data;
  ASSERT_THAT(Fetch(kept.handle().id(), {}, &header, &data), GrpcOk());
  EXPECT_THAT(header.sizes(), ElementsAre(1, 1, 2, 2));
  EXPECT_EQ(header.byte_length(), 16);
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{2, 4, 10, 12}));
  // With the caller's strides: padding reads as zero.
  header.Clear();
  data.clear();
  ASSERT_THAT(Fetch(kept.handle().id(), {8, 8, 4, 1}, &header, &data), GrpcOk());
  EXPECT_THAT(header.strides(), ElementsAre(8, 8, 4, 1));
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{2, 4, 0, 0, 10, 12}));
  // The input is fetched as it was put.
  data.clear();
  ASSERT_THAT(Fetch(input.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(data, Pack(OneToSixteen()));
}

TEST_F(HandlesTest, StreamedAndBidiCallsKeepOutputsToo) {
  const v1::TensorHandle input = PutDocInput();
  grpc::ClientContext stream_context;
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader =
      stub_->RunStream(&stream_context, DocSliceOf(HandleTensor(input.id()), /*keep=*/true));
  std::vector<v1::ResultPart> parts;
  v1::ResultPart part;
  while (reader->Read(&part)) parts.push_back(part);
  ASSERT_THAT(reader->Finish(), GrpcOk());
  ASSERT_EQ(parts.size(), 1u);  // the header alone
  EXPECT_EQ(parts[0].header().byte_length(), 0);
  EXPECT_THAT(parts[0].header().handle().id(), MatchesRegex("[0-9a-f]{32}"));

  grpc::ClientContext bidi_context;
  auto bidi = stub_->RunBidi(&bidi_context);
  ASSERT_TRUE(bidi->Write(DocSliceOf(HandleTensor(input.id()), /*keep=*/true)));
  bidi->WritesDone();
  v1::RunResponse response;
  ASSERT_TRUE(bidi->Read(&response));
  ASSERT_THAT(bidi->Finish(), GrpcOk());
  EXPECT_EQ(response.status().code(), 0) << response.status().message();
  ASSERT_EQ(response.outputs_size(), 1);
  v1::OutputHeader header;
  std::string data;
  ASSERT_THAT(Fetch(response.outputs(0).handle().id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{2, 4, 10, 12}));
  // Two views: the input's bytes are held once.
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 3);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 64);
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"slice\"}"), 2);
}

TEST_F(HandlesTest, AReleasedHandleIsNotFoundNamingOnlyItsFirstCharacters) {
  const v1::TensorHandle input = PutDocInput();
  ASSERT_THAT(Release({input.id(), "no-such-id"}), GrpcOk());
  v1::RunResponse response;
  const grpc::Status status = Run(DocSliceOf(HandleTensor(input.id()), false), &response);
  EXPECT_THAT(status, GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                                   AllOf(HasSubstr("inputs[\"input\"].handle: handle " +
                                                   input.id().substr(0, 8) + "... does not exist"),
                                         Not(HasSubstr(input.id())))));
  v1::OutputHeader header;
  std::string data;
  EXPECT_THAT(Fetch(input.id(), {}, &header, &data),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("does not exist")));
  EXPECT_THAT(server_.Log(), Not(HasSubstr(input.id())));
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 0);
}

TEST_F(HandlesTest, ALayoutBesideAHandleMustBeTheHandles) {
  const v1::TensorHandle input = PutDocInput();
  v1::Tensor tensor = HandleTensor(input.id());
  tensor.set_dtype(v1::INT32);
  v1::RunResponse response;
  EXPECT_THAT(Run(DocSliceOf(tensor, false), &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("inputs[\"input\"].dtype is INT32 but handle " +
                                     input.id().substr(0, 8) + "... holds FLOAT32")));
  tensor.set_dtype(v1::FLOAT32);
  for (int64_t size : {1, 1, 4, 4}) tensor.add_sizes(size);
  ASSERT_THAT(Run(DocSliceOf(tensor, false), &response), GrpcOk());
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
}

TEST_F(HandlesTest, BadPutsAreRefusedNamingTheProblem) {
  v1::TensorHandle handle;
  // Data past the layout, short of it, a missing dtype, a device backend.
  v1::Tensor tensor = MakeTensor(v1::FLOAT32, {2}, Pack(std::vector<float>{1, 2, 3}));
  EXPECT_THAT(PutTensor(*stub_, tensor, &handle),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "Put: part 2 brings the data to 12 bytes; the header's layout takes "
                           "exactly 8"));
  tensor = MakeTensor(v1::FLOAT32, {4}, Pack(std::vector<float>{1, 2, 3}));
  EXPECT_THAT(PutTensor(*stub_, tensor, &handle),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "Put: the stream ended after 12 of the 16 bytes the header's layout "
                           "takes"));
  tensor = MakeTensor(v1::DTYPE_UNSPECIFIED, {4}, "");
  EXPECT_THAT(PutTensor(*stub_, tensor, &handle),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("header.dtype: 0 (DTYPE_UNSPECIFIED) is not a dtype")));
  tensor = MakeTensor(v1::UINT8, {2, -1}, "");
  EXPECT_THAT(
      PutTensor(*stub_, tensor, &handle),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "header.sizes[1] must be >= 0, got -1"));
  // A chunk first.
  grpc::ClientContext context;
  auto writer = stub_->Put(&context, &handle);
  v1::PutPart chunk;
  chunk.set_chunk("abc");
  writer->Write(chunk);
  writer->WritesDone();
  EXPECT_THAT(writer->Finish(), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                             "Put: the first part must be a header, not a chunk"));
  // The server still serves.
  EXPECT_EQ(PutDocInput().byte_size(), 64);
}

TEST_F(HandlesTest, SixtyFourConcurrentRunsReadOneHandle) {
  const v1::TensorHandle input = PutDocInput();
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> results(64);
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] {
      v1::RunResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      if (stub_->Run(&context, DocSliceOf(HandleTensor(input.id()), false), &response).ok() &&
          response.outputs_size() == 1) {
        results[i] = Unpack<float>(response.outputs(0).data());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::vector<float>& result : results) {
    EXPECT_EQ(result, (std::vector<float>{2, 4, 10, 12}));
  }
}

TEST_F(HandlesTest, ListHandlesPagesThroughTheCallersHandles) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(PutDocInput().id());
  std::sort(ids.begin(), ids.end());
  v1::ListHandlesRequest request;
  request.set_page_size(2);
  v1::ListHandlesResponse page;
  grpc::ClientContext first;
  ASSERT_THAT(stub_->ListHandles(&first, request, &page), GrpcOk());
  ASSERT_EQ(page.handles_size(), 2);
  EXPECT_EQ(page.handles(0).id(), ids[0]);
  EXPECT_EQ(page.handles(1).id(), ids[1]);
  ASSERT_FALSE(page.next_page_token().empty());
  request.set_page_token(page.next_page_token());
  grpc::ClientContext second;
  ASSERT_THAT(stub_->ListHandles(&second, request, &page), GrpcOk());
  ASSERT_EQ(page.handles_size(), 1);
  EXPECT_EQ(page.handles(0).id(), ids[2]);
  EXPECT_EQ(page.next_page_token(), "");
  request.set_page_size(1001);
  grpc::ClientContext third;
  EXPECT_THAT(
      stub_->ListHandles(&third, request, &page),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "page_size must be in [0, 1000], got 1001"));
}

class HandleLimitsTest : public HandlesTest {
 protected:
  HandleLimitsTest()
      : HandlesTest({"--handle_ttl_seconds=1", "--handle_max_ttl_seconds=2",
                     "--max_resident_bytes_per_client=100"}) {}
};

TEST_F(HandleLimitsTest, HandlesExpireAfterTheirTtlAndPutsAskUpToTheMaximum) {
  const v1::TensorHandle input = PutDocInput();
  EXPECT_EQ(input.expires_unix_ms() - input.last_use_unix_ms(), 1000);
  v1::TensorHandle asked;
  ASSERT_THAT(PutTensor(*stub_, MakeTensor(v1::UINT8, {4}, "abcd"), &asked, /*ttl_seconds=*/60),
              GrpcOk());
  EXPECT_EQ(asked.expires_unix_ms() - asked.last_use_unix_ms(), 2000);  // clamped
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  v1::RunResponse response;
  EXPECT_THAT(Run(DocSliceOf(HandleTensor(input.id()), false), &response),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("does not exist")));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_expiries_total"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 0);
}

TEST_F(HandleLimitsTest, AClientsResidentBytesAreBoundedByItsQuota) {
  const v1::TensorHandle first = PutDocInput();  // 64 of 100 bytes
  v1::TensorHandle second;
  EXPECT_THAT(
      PutTensor(*stub_, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), &second),
      GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                   HasSubstr("from 64 to 128, over --max_resident_bytes_per_client=100")));
  // A kept output counts too (a copy: its input is not a handle).
  v1::RunRequest request =
      DocSliceOf(MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), /*keep=*/true);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());  // 16 bytes: 80 of 100
  request.mutable_slice()->set_offsets(3, 0);      // [1, 1, 2, 4]: 32 bytes more
  request.mutable_slice()->set_window_sizes(3, 4);
  request.mutable_slice()->set_window_strides(3, 1);
  request.mutable_outputs(0)->set_sizes(3, 4);
  EXPECT_THAT(Run(request, &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("keeping the 32 bytes of outputs[0] of request \"doc\"")));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_quota_refusals_total"), 2);
  ASSERT_THAT(Release({first.id()}), GrpcOk());
  ASSERT_THAT(
      Run(DocSliceOf(MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), true), &response),
      GrpcOk());
}

// Split along rows into two kept halves of [1, 1, 2, 4] on `input`.
v1::RunRequest KeptHalvesOf(const std::string& input) {
  v1::RunRequest request;
  request.set_id("halves");
  request.set_backend(v1::CPU);
  request.mutable_split()->set_axis(2);
  (*request.mutable_inputs())["input"] = HandleTensor(input);
  for (int i = 0; i < 2; ++i) {
    v1::OutputDesc* output = request.add_outputs();
    for (int64_t size : {1, 1, 2, 4}) output->add_sizes(size);
    output->set_keep(true);
  }
  return request;
}

TEST_F(HandlesTest, KeptWindowsAreViewsHoldingTheirBaseUntilTheLastGoes) {
  const int64_t reserved_before = MetricValue(server_, "tensorop_memory_reserved_bytes");
  const v1::TensorHandle input = PutDocInput();
  v1::RunResponse response;
  ASSERT_THAT(Run(KeptHalvesOf(input.id()), &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 2);
  const v1::TensorHandle top = response.outputs(0).handle();
  const v1::TensorHandle bottom = response.outputs(1).handle();
  EXPECT_EQ(top.view_of(), input.id());
  EXPECT_EQ(bottom.view_of(), input.id());
  EXPECT_EQ(top.byte_offset(), 0);
  EXPECT_EQ(bottom.byte_offset(), 32);
  EXPECT_THAT(bottom.strides(), ElementsAre(0, 0, 4, 1));
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"split\"}"), 2);
  // One buffer, three handles' bookkeeping.
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 64);
  constexpr int64_t kHeld = 64 + 3 * 1024;
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", reserved_before + kHeld),
            reserved_before + kHeld);

  // A view of a view shares the first base.
  v1::RunRequest column = SliceRequest("column", HandleTensor(bottom.id()), {0, 0, 0, 3},
                                       {1, 1, 2, 1}, {1, 1, 1, 1}, {1, 1, 2, 1});
  column.mutable_outputs(0)->set_keep(true);
  column.set_backend(v1::CPU);
  ASSERT_THAT(Run(column, &response), GrpcOk());
  const v1::TensorHandle last = response.outputs(0).handle();
  EXPECT_EQ(last.view_of(), input.id());
  EXPECT_EQ(last.byte_offset(), 32 + 12);

  // The base released: its id is gone, its bytes live on in the views.
  ASSERT_THAT(Release({input.id()}), GrpcOk());
  v1::OutputHeader header;
  std::string data;
  EXPECT_THAT(Fetch(input.id(), {}, &header, &data),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("does not exist")));
  data.clear();
  ASSERT_THAT(Fetch(bottom.id(), {}, &header, &data), GrpcOk());
  EXPECT_THAT(header.strides(), ElementsAre(8, 8, 4, 1));  // packed, as asked by default
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{9, 10, 11, 12, 13, 14, 15, 16}));
  data.clear();
  ASSERT_THAT(Fetch(last.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{12, 16}));
  data.clear();
  ASSERT_THAT(Fetch(top.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 64);

  // The last view released frees the bytes.
  ASSERT_THAT(Release({top.id(), bottom.id()}), GrpcOk());
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 64);
  ASSERT_THAT(Release({last.id()}), GrpcOk());
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_resident_bytes{backend=\"cpu\"}", 0), 0);
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", reserved_before),
            reserved_before);
}

TEST_F(HandlesTest, ReversedWindowsAskedStridesAndInlineInputsAreCopies) {
  const v1::TensorHandle input = PutDocInput();
  v1::RunRequest reversed = SliceRequest("reversed", HandleTensor(input.id()), {0, 0, 0, 0},
                                         {1, 1, 4, 4}, {1, 1, -1, 1}, {1, 1, 4, 4});
  reversed.mutable_outputs(0)->set_keep(true);
  reversed.set_backend(v1::CPU);
  v1::RunRequest strided = DocSliceOf(HandleTensor(input.id()), /*keep=*/true);
  for (int64_t stride : {4, 4, 2, 1}) strided.mutable_outputs(0)->add_strides(stride);
  v1::RunRequest inline_input =
      DocSliceOf(MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), /*keep=*/true);
  for (v1::RunRequest* request : {&reversed, &strided, &inline_input}) {
    v1::RunResponse response;
    ASSERT_THAT(Run(*request, &response), GrpcOk()) << request->id();
    EXPECT_EQ(response.outputs(0).handle().view_of(), "") << request->id();
  }
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"slice\"}"), 0);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"),
            64 + 64 + 16 + 16);  // the strided copy spans 4 elements
}

class HandleMessageLimitTest : public HandlesTest {
 protected:
  HandleMessageLimitTest() : HandlesTest({"--max_message_bytes=65536", "--chunk_bytes=32768"}) {}
};

TEST_F(HandleMessageLimitTest, AKeptOutputLargerThanAMessageIsAnsweredByRun) {
  v1::TensorHandle input;
  ASSERT_THAT(
      PutTensor(*stub_, MakeTensor(v1::UINT8, {256, 1024}, std::string(256 * 1024, 'x')), &input,
                /*ttl_seconds=*/0, /*chunk_bytes=*/32768),
      GrpcOk());
  v1::RunRequest request =
      SliceRequest("big", HandleTensor(input.id()), {0, 0}, {128, 1024}, {1, 1}, {128, 1024});
  request.mutable_outputs(0)->set_keep(true);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());  // 128 KiB kept: only its handle is answered
  EXPECT_EQ(response.outputs(0).handle().byte_size(), 128 * 1024);
  // Answered, the same bytes are over the limit.
  request.mutable_outputs(0)->set_keep(false);
  EXPECT_THAT(Run(request, &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("(131072 of output data), more than the server's message "
                                     "limit of 65536 bytes")));
}

class HandleCountTest : public HandlesTest {
 protected:
  HandleCountTest() : HandlesTest({"--max_handles_per_client=2"}) {}
};

TEST_F(HandleCountTest, ViewsCountInTheHandleQuota) {
  const v1::TensorHandle input = PutDocInput();
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/true), &response), GrpcOk());
  EXPECT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/true), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("handles, over --max_handles_per_client=2")));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_quota_refusals_total"), 1);
  // Both halves or neither: the first view made is released again.
  ASSERT_THAT(Release({response.outputs(0).handle().id()}), GrpcOk());
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/true), &response), GrpcOk());
  ASSERT_THAT(Release({response.outputs(0).handle().id()}), GrpcOk());
  EXPECT_THAT(Run(KeptHalvesOf(input.id()), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("outputs[1] of request \"halves\"")));
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 1);
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"slice\"}"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"split\"}"), 1);  // made, released
}

TEST_F(HandleLimitsTest, AViewInUseKeepsItsExpiredBasesBytesCounted) {
  const v1::TensorHandle input = PutDocInput();  // 1 s to live
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(input.id()), /*keep=*/true), &response), GrpcOk());
  const std::string view = response.outputs(0).handle().id();
  // Used every 400 ms the view lives; the base, unused, expires.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    v1::OutputHeader header;
    std::string data;
    ASSERT_THAT(Fetch(view, {}, &header, &data), GrpcOk());
    EXPECT_EQ(Unpack<float>(data), (std::vector<float>{2, 4, 10, 12}));
  }
  v1::OutputHeader header;
  std::string data;
  EXPECT_THAT(Fetch(input.id(), {}, &header, &data),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("does not exist")));
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));  // and now the view
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_resident_bytes{backend=\"cpu\"}", 0), 0);
}

TEST_F(HandlesTest, AClientThatGoesAwayMidPutLeavesNothingBehind) {
  const int64_t reserved_before = MetricValue(server_, "tensorop_memory_reserved_bytes");
  grpc::ClientContext context;
  v1::TensorHandle handle;
  std::unique_ptr<grpc::ClientWriter<v1::PutPart>> writer = stub_->Put(&context, &handle);
  v1::PutPart part;
  part.mutable_header()->set_dtype(v1::UINT8);
  part.mutable_header()->add_sizes(4 << 20);
  ASSERT_TRUE(writer->Write(part));
  part.set_chunk(std::string(1 << 20, 'x'));
  ASSERT_TRUE(writer->Write(part));
  // The server holds the tensor's 4 MiB once it has read the header: cancelled
  // before that, there would be nothing to leave behind.
  ASSERT_EQ(MetricValueOnceItIs(server_, "tensorop_resident_bytes{backend=\"cpu\"}", 4 << 20),
            4 << 20);
  context.TryCancel();  // gone with 1 of its 4 MiB sent
  EXPECT_THAT(writer->Finish(), GrpcStatusIs(grpc::StatusCode::CANCELLED, ::testing::_));
  // The server lets go as the call ends there, after the client saw it end.
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", reserved_before),
            reserved_before);
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_resident_bytes{backend=\"cpu\"}", 0), 0);
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 0);
  EXPECT_EQ(PutDocInput().byte_size(), 64);  // and the server still serves
}

TEST(HandleRestartTest, ARestartLosesEveryHandle) {
  // Holding a handle, it drains for its grace period before it exits.
  auto server = std::make_unique<TensordProcess>(
      std::vector<std::string>{"--shutdown_grace_seconds=1", "--drain_seconds=0"});
  const std::string target = server->target();
  v1::TensorHandle handle;
  {
    auto stub = v1::TensorOp::NewStub(Connect(target));
    ASSERT_THAT(
        PutTensor(*stub, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), &handle),
        GrpcOk());
  }
  EXPECT_EQ(server->Stop(), 0);
  // The new process listens on the old address too (--address repeats).
  server = std::make_unique<TensordProcess>(std::vector<std::string>{"--address=" + target});
  auto stub = v1::TensorOp::NewStub(Connect(target));
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, DocSliceOf(HandleTensor(handle.id()), false), &response),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           HasSubstr("inputs[\"input\"].handle: handle " +
                                     handle.id().substr(0, 8) + "... does not exist on replica ")));
}

// Handles on an OpenCL device (PoCL here; any device in the pool).
class DeviceHandlesTest : public HandlesTest {
 protected:
  explicit DeviceHandlesTest(std::vector<std::string> flags = {}) : HandlesTest(std::move(flags)) {}

  v1::TensorHandle PutOnDevice(const v1::Tensor& tensor) {
    v1::TensorHandle handle;
    EXPECT_THAT(PutTensor(*stub_, tensor, &handle, 0, int64_t{1} << 20, v1::OPENCL), GrpcOk());
    return handle;
  }
  v1::TensorHandle PutDocInputOnDevice() {
    return PutOnDevice(MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())));
  }
};

TEST_F(DeviceHandlesTest, APutOnOpenClStaysThereAndOpsRunWhereItIs) {
  const v1::TensorHandle input = PutDocInputOnDevice();
  EXPECT_EQ(input.backend(), "opencl");
  EXPECT_EQ(input.device_index(), 0);
  EXPECT_EQ(input.byte_size(), 64);

  // AUTO runs where the input is, reading it in place.
  v1::RunRequest request = DocSliceOf(HandleTensor(input.id()), /*keep=*/false);
  request.set_backend(v1::AUTO);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  EXPECT_THAT(response.backend(), StartsWith("opencl:"));
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_copies_total"), 0);

  // CPU asked for: the input comes to host memory for the call, counted.
  request.set_backend(v1::CPU);
  ASSERT_THAT(Run(request, &response), GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_copies_total"), 1);

  // A kept output stays on the device; Fetch brings it, packed or strided.
  // (Reversed, it is a copy, not a view: no layout says a reversed window.)
  request = SliceRequest("reversed doc", HandleTensor(input.id()), {0, 0, 0, 1}, {1, 1, 4, 3},
                         {1, 1, -2, 2}, {1, 1, 2, 2});
  request.mutable_outputs(0)->set_keep(true);
  request.set_backend(v1::OPENCL);
  ASSERT_THAT(Run(request, &response), GrpcOk());
  const v1::TensorHandle& kept = response.outputs(0).handle();
  EXPECT_EQ(kept.backend(), "opencl");
  EXPECT_EQ(kept.view_of(), "");
  v1::OutputHeader header;
  std::string data;
  ASSERT_THAT(Fetch(kept.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{14, 16, 6, 8}));
  data.clear();
  ASSERT_THAT(Fetch(kept.id(), {8, 8, 4, 1}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{14, 16, 0, 0, 6, 8}));
  data.clear();
  ASSERT_THAT(Fetch(input.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(data, Pack(OneToSixteen()));
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"opencl\"}"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"opencl\"}"), 64 + 16);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 0);
}

TEST_F(DeviceHandlesTest, ScatterReadsIndicesAndUpdatesOnTheDevice) {
  // [2, 3] zeros; row 0 of the updates to row 1, row 1 to row 0.
  const v1::Tensor input = MakeTensor(v1::INT32, {2, 3}, Pack(std::vector<int32_t>(6, 0)));
  const v1::Tensor indices =
      MakeTensor(v1::INT64, {2, 3}, Pack(std::vector<int64_t>{1, 1, 1, 0, 0, 0}));
  const v1::Tensor updates =
      MakeTensor(v1::INT32, {2, 3}, Pack(std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  v1::RunRequest request;
  request.set_id("scatter");
  request.mutable_scatter_elements()->set_axis(0);
  (*request.mutable_inputs())["input"] = HandleTensor(PutOnDevice(input).id());
  (*request.mutable_inputs())["indices"] = HandleTensor(PutOnDevice(indices).id());
  (*request.mutable_inputs())["updates"] = HandleTensor(PutOnDevice(updates).id());
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  EXPECT_THAT(response.backend(), StartsWith("opencl:"));
  EXPECT_EQ(Unpack<int32_t>(response.outputs(0).data()), (std::vector<int32_t>{4, 5, 6, 1, 2, 3}));
  // A bad index on the device is found before any work, named as ever.
  (*request.mutable_inputs())["indices"] = HandleTensor(
      PutOnDevice(MakeTensor(v1::INT64, {2, 3}, Pack(std::vector<int64_t>{1, 1, 1, 0, 2, 0})))
          .id());
  EXPECT_THAT(Run(request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("indices[1, 1] = 2 is outside [-2, 2)")));
}

TEST_F(DeviceHandlesTest, KeptWindowsOfADeviceTensorAreViewsThatStayOnTheDevice) {
  const v1::TensorHandle input = PutDocInputOnDevice();
  v1::RunRequest halves = KeptHalvesOf(input.id());
  halves.set_backend(v1::AUTO);
  v1::RunResponse response;
  ASSERT_THAT(Run(halves, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_THAT(response.backend(), StartsWith("opencl:"));  // where the views are
  const v1::TensorHandle top = response.outputs(0).handle();
  const v1::TensorHandle bottom = response.outputs(1).handle();
  for (const v1::TensorHandle* view : {&top, &bottom}) {
    EXPECT_EQ(view->view_of(), input.id());
    EXPECT_EQ(view->backend(), "opencl");
    EXPECT_EQ(view->device_index(), 0);
  }
  EXPECT_EQ(bottom.byte_offset(), 32);
  EXPECT_EQ(MetricValue(server_, "tensorop_views_total{op=\"split\"}"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"opencl\"}"), 3);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"opencl\"}"), 64);

  // A view of a view, 12 bytes further into the device buffer.
  v1::RunRequest column = SliceRequest("column", HandleTensor(bottom.id()), {0, 0, 0, 3},
                                       {1, 1, 2, 1}, {1, 1, 1, 1}, {1, 1, 2, 1});
  column.mutable_outputs(0)->set_keep(true);
  column.set_backend(v1::AUTO);
  ASSERT_THAT(Run(column, &response), GrpcOk());
  const v1::TensorHandle last = response.outputs(0).handle();
  EXPECT_EQ(last.view_of(), input.id());
  EXPECT_EQ(last.byte_offset(), 32 + 12);

  // Fetches and ops read each view from its offset in the base, on the device.
  v1::OutputHeader header;
  std::string data;
  ASSERT_THAT(Fetch(bottom.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{9, 10, 11, 12, 13, 14, 15, 16}));
  data.clear();
  ASSERT_THAT(Fetch(last.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{12, 16}));
  v1::RunRequest every_other = SliceRequest("every other", HandleTensor(bottom.id()), {0, 0, 0, 0},
                                            {1, 1, 2, 4}, {1, 1, 1, 2}, {1, 1, 2, 2});
  every_other.set_backend(v1::AUTO);
  ASSERT_THAT(Run(every_other, &response), GrpcOk());
  EXPECT_THAT(response.backend(), StartsWith("opencl:"));
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{9, 11, 13, 15}));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_copies_total"), 0);

  // A scatter's updates past their buffer's byte 0 come to host memory once
  // (device kernels read updates from byte 0), as its indices do for their
  // check before any work; the result is the same.
  const v1::TensorHandle zeros =
      PutOnDevice(MakeTensor(v1::FLOAT32, {1, 1, 2, 4}, Pack(std::vector<float>(8, 0))));
  const v1::TensorHandle rows = PutOnDevice(
      MakeTensor(v1::INT64, {1, 1, 2, 4}, Pack(std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0, 0})));
  v1::RunRequest scatter;
  scatter.set_id("scatter a view");
  scatter.mutable_scatter_elements()->set_axis(2);
  (*scatter.mutable_inputs())["input"] = HandleTensor(zeros.id());
  (*scatter.mutable_inputs())["indices"] = HandleTensor(rows.id());
  (*scatter.mutable_inputs())["updates"] = HandleTensor(bottom.id());
  ASSERT_THAT(Run(scatter, &response), GrpcOk());
  EXPECT_THAT(response.backend(), StartsWith("opencl:"));
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()),
            (std::vector<float>{13, 14, 15, 16, 9, 10, 11, 12}));
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_copies_total"), 2);

  // The base released, its device bytes live on until the last view goes.
  ASSERT_THAT(Release({input.id(), top.id(), bottom.id()}), GrpcOk());
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"opencl\"}"), 64 + 32 + 64);
  data.clear();
  ASSERT_THAT(Fetch(last.id(), {}, &header, &data), GrpcOk());
  EXPECT_EQ(Unpack<float>(data), (std::vector<float>{12, 16}));
  ASSERT_THAT(Release({last.id()}), GrpcOk());
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_resident_bytes{backend=\"opencl\"}", 32 + 64),
            32 + 64);
}

class DeviceHandleLimitsTest : public DeviceHandlesTest {
 protected:
  DeviceHandleLimitsTest() : DeviceHandlesTest({"--opencl_max_resident_bytes=100"}) {}
};

TEST_F(DeviceHandleLimitsTest, EachDevicesResidentBytesAreBounded) {
  const v1::TensorHandle first = PutDocInputOnDevice();  // 64 of 100 bytes
  v1::TensorHandle second;
  EXPECT_THAT(PutTensor(*stub_, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())),
                        &second, 0, int64_t{1} << 20, v1::OPENCL),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("64 bytes more on OpenCL device 0 would pass its limit of 100 "
                                     "resident bytes (--opencl_max_resident_bytes; 64 held)")));
  // Refused for room, the device is still healthy: ops on it run there.
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceOf(HandleTensor(first.id()), false), &response), GrpcOk());
  ASSERT_THAT(Release({first.id()}), GrpcOk());
  EXPECT_EQ(PutDocInputOnDevice().byte_size(), 64);
}

class DeviceFailureTest : public DeviceHandlesTest {
 protected:
  DeviceFailureTest() : DeviceHandlesTest({"--inject_opencl_failures=1"}) {}
};

TEST_F(DeviceFailureTest, AFailedDeviceLosesItsHandlesAndNothingFallsBackToTheCpu) {
  const v1::TensorHandle input = PutDocInputOnDevice();
  v1::RunResponse response;
  // A view runs nothing on the device: the injected failure is still to come.
  v1::RunRequest halves = KeptHalvesOf(input.id());
  halves.set_backend(v1::AUTO);
  ASSERT_THAT(Run(halves, &response), GrpcOk());
  const std::string view = response.outputs(1).handle().id();
  ASSERT_EQ(response.outputs(1).handle().view_of(), input.id());
  v1::RunRequest request = DocSliceOf(HandleTensor(input.id()), /*keep=*/false);
  request.set_backend(v1::AUTO);
  const std::string lost = "inputs[\"input\"].handle: handle " + input.id().substr(0, 8) +
                           "... was lost: OpenCL device 0 failed";
  EXPECT_THAT(Run(request, &response), GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                                                    HasSubstr(lost + " (OpenCL device 0 failed: "
                                                                     "injected")));
  EXPECT_THAT(Run(request, &response), GrpcStatusIs(grpc::StatusCode::NOT_FOUND, lost));
  v1::OutputHeader header;
  std::string data;
  EXPECT_THAT(
      Fetch(input.id(), {}, &header, &data),
      GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("was lost: OpenCL device 0 failed")));
  // The views made of it are lost with it.
  EXPECT_THAT(
      Fetch(view, {}, &header, &data),
      GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("handle " + view.substr(0, 8) +
                                                          "... was lost: OpenCL device 0 failed")));
  EXPECT_EQ(MetricValue(server_, "tensorop_handles_lost_total"), 3);
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"opencl\"}"), 0);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"opencl\"}"), 0);
  // The server still serves.
  ASSERT_THAT(Run(DocSliceOf(MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(OneToSixteen())), false),
                  &response),
              GrpcOk());
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
}

}  // namespace
}  // namespace tensorop::testing
