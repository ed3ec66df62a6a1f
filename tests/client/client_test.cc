// The client against an in-process fake TensorOp service, which can answer in ways
// tensord never should: out of order, truncated, reaching past its data.
#include "client/client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

using ResultWriter = grpc::ServerWriterInterface<v1::ResultPart>;
using BidiStream = grpc::ServerReaderWriter<v1::RunResponse, v1::RunRequest>;
using ChunkedStream = grpc::ServerReaderWriter<v1::ResultPart, v1::RequestPart>;

// Each handler is whatever the test sets; unset ones are UNIMPLEMENTED.
class FakeTensorOp final : public v1::TensorOp::Service {
 public:
  std::function<grpc::Status(const v1::RunRequest&, v1::RunResponse*)> run;
  std::function<grpc::Status(const v1::RunRequest&, ResultWriter*)> run_stream;
  std::function<grpc::Status(BidiStream*)> run_bidi;
  std::function<grpc::Status(grpc::ServerContext*, ChunkedStream*)> run_chunked;
  std::function<grpc::Status(grpc::ServerReader<v1::PutPart>*, v1::TensorHandle*)> put;
  std::function<grpc::Status(const v1::FetchRequest&, ResultWriter*)> fetch;
  std::function<grpc::Status(const v1::ReleaseRequest&)> release;
  std::function<grpc::Status(const v1::ListHandlesRequest&, v1::ListHandlesResponse*)> list_handles;
  std::atomic<int> calls{0};

  grpc::Status Run(grpc::ServerContext*, const v1::RunRequest* request,
                   v1::RunResponse* response) override {
    ++calls;
    return run ? run(*request, response) : Unimplemented();
  }
  grpc::Status RunStream(grpc::ServerContext*, const v1::RunRequest* request,
                         grpc::ServerWriter<v1::ResultPart>* writer) override {
    ++calls;
    return run_stream ? run_stream(*request, writer) : Unimplemented();
  }
  grpc::Status RunBidi(grpc::ServerContext*, BidiStream* stream) override {
    ++calls;
    return run_bidi ? run_bidi(stream) : Unimplemented();
  }
  grpc::Status RunChunked(grpc::ServerContext* context, ChunkedStream* stream) override {
    ++calls;
    return run_chunked ? run_chunked(context, stream) : Unimplemented();
  }
  grpc::Status Put(grpc::ServerContext*, grpc::ServerReader<v1::PutPart>* reader,
                   v1::TensorHandle* handle) override {
    ++calls;
    return put ? put(reader, handle) : Unimplemented();
  }
  grpc::Status Fetch(grpc::ServerContext*, const v1::FetchRequest* request,
                     grpc::ServerWriter<v1::ResultPart>* writer) override {
    ++calls;
    return fetch ? fetch(*request, writer) : Unimplemented();
  }
  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse*) override {
    ++calls;
    return release ? release(*request) : Unimplemented();
  }
  grpc::Status ListHandles(grpc::ServerContext*, const v1::ListHandlesRequest* request,
                           v1::ListHandlesResponse* response) override {
    ++calls;
    return list_handles ? list_handles(*request, response) : Unimplemented();
  }

 private:
  static grpc::Status Unimplemented() { return {grpc::StatusCode::UNIMPLEMENTED, "not set"}; }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  Client MakeClient(ClientOptions options = {}) {
    return Client(absl::StrCat("127.0.0.1:", port_), std::move(options));
  }

  FakeTensorOp service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

v1::Tensor Uint8Tensor(std::vector<int64_t> sizes, std::vector<int64_t> strides, std::string data) {
  v1::Tensor tensor;
  tensor.set_dtype(v1::UINT8);
  for (int64_t size : sizes) tensor.add_sizes(size);
  for (int64_t stride : strides) tensor.add_strides(stride);
  tensor.set_data(std::move(data));
  return tensor;
}

v1::ResultPart Header(int index, int64_t byte_length, std::vector<int64_t> sizes) {
  v1::ResultPart part;
  v1::OutputHeader& header = *part.mutable_header();
  header.set_index(index);
  header.set_dtype(v1::UINT8);
  for (int64_t size : sizes) header.add_sizes(size);
  header.add_strides(1);
  header.set_byte_length(byte_length);
  header.set_backend("cpu");
  return part;
}

v1::ResultPart Chunk(std::string bytes) {
  v1::ResultPart part;
  part.set_chunk(std::move(bytes));
  return part;
}

v1::RunRequest Request(std::string id) {
  v1::RunRequest request;
  request.set_id(std::move(id));
  request.mutable_split()->set_axis(0);
  return request;
}

TEST(GrpcStatusTest, EveryCodeKeepsItsCodeAndMessage) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status =
        FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(code), "the message"));
    EXPECT_EQ(static_cast<int>(status.code()), code);
    EXPECT_EQ(status.message(), "the message");
    EXPECT_EQ(StatusCodeFromWire(code), status.code());
  }
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(StatusCodeFromWire(0), absl::StatusCode::kOk);
  EXPECT_EQ(StatusCodeFromWire(17), absl::StatusCode::kUnknown);
  EXPECT_EQ(StatusCodeFromWire(-1), absl::StatusCode::kUnknown);
}

TEST_F(ClientTest, RunReturnsOutputsAndBackend) {
  service_.run = [](const v1::RunRequest& request, v1::RunResponse* response) {
    response->set_id(request.id());
    response->set_backend("opencl:fake");
    *response->add_outputs() = Uint8Tensor({2, 2}, {1, 2}, "\1\3\2\4");
    return grpc::Status::OK;
  };
  ASSERT_OK_AND_ASSIGN(const Result result, MakeClient().Run(Request("a")));
  EXPECT_EQ(result.backend, "opencl:fake");
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(result.outputs[0].dtype, v1::UINT8);
  EXPECT_THAT(result.outputs[0].sizes, ElementsAre(2, 2));
  EXPECT_THAT(result.outputs[0].strides, ElementsAre(1, 2));
  EXPECT_EQ(result.outputs[0].data, "\1\3\2\4");
}

TEST_F(ClientTest, RunPassesTheServersStatusThrough) {
  service_.run = [](const v1::RunRequest&, v1::RunResponse*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "slice.window_strides[2] must not be 0");
  };
  EXPECT_THAT(
      MakeClient().Run(Request("a")),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("slice.window_strides[2] must not be 0")));
}

TEST_F(ClientTest, RunRejectsAnOutputThatReachesPastItsData) {
  service_.run = [](const v1::RunRequest&, v1::RunResponse* response) {
    *response->add_outputs() = Uint8Tensor({2, 3}, {3, 1}, "\1\2\3\4\5");
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().Run(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: output 0: data holds 5 bytes but strides "
                          "[3,1] over sizes [2,3] reach 6")));
}

TEST_F(ClientTest, RunStreamReassemblesChunks) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 5, {5}));
    writer->Write(Chunk("ab"));
    writer->Write(Chunk("cde"));
    writer->Write(Header(1, 0, {0}));
    writer->Write(Header(2, 3, {3}));
    writer->Write(Chunk("xyz"));
    return grpc::Status::OK;
  };
  std::vector<std::pair<int64_t, int64_t>> progress;
  ClientOptions options;
  options.progress = [&progress](const Progress& p) {
    EXPECT_EQ(p.direction, Progress::Direction::kDownload);
    progress.emplace_back(p.done, p.total);
  };
  ASSERT_OK_AND_ASSIGN(const Result result, MakeClient(options).RunStream(Request("a")));
  EXPECT_EQ(result.backend, "cpu");
  ASSERT_EQ(result.outputs.size(), 3u);
  EXPECT_EQ(result.outputs[0].data, "abcde");
  EXPECT_EQ(result.outputs[1].data, "");
  EXPECT_THAT(result.outputs[1].sizes, ElementsAre(0));
  EXPECT_EQ(result.outputs[2].data, "xyz");
  EXPECT_THAT(progress,
              ElementsAre(std::pair<int64_t, int64_t>{2, 5}, std::pair<int64_t, int64_t>{5, 5},
                          std::pair<int64_t, int64_t>{8, 8}));
}

TEST_F(ClientTest, RunStreamRejectsATruncatedOutput) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 8, {8}));
    writer->Write(Chunk("abcd"));
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: the stream ended 4 bytes short of "
                          "output 0")));
}

TEST_F(ClientTest, RunStreamSurvivesAbsurdByteLengths) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, INT64_MAX, {1}));  // must not be reserved up front
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: the stream ended 9223372036854775807 bytes "
                          "short of output 0")));
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 1, {1}));
    writer->Write(Chunk("a"));
    writer->Write(Header(1, INT64_MAX, {1}));  // the running total would overflow
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: output 1 has byte_length "
                          "9223372036854775807")));
}

TEST_F(ClientTest, RunStreamRejectsMoreBytesThanAnnounced) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 4, {4}));
    writer->Write(Chunk("abcdef"));
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: a chunk of 6 bytes exceeds what the headers "
                          "announced by 2")));
}

TEST_F(ClientTest, RunStreamRejectsHeadersOutOfOrder) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(1, 1, {1}));
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: expected the header of output 0, got "
                          "output 1")));
}

TEST_F(ClientTest, RunStreamRejectsAHeaderWhoseLayoutReachesPastItsBytes) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 2, {3}));
    writer->Write(Chunk("ab"));
    return grpc::Status::OK;
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: output 0: data holds 2 bytes but strides "
                          "[1] over sizes [3] reach 3")));
}

TEST_F(ClientTest, RunStreamReportsAnErrorAfterPartialData) {
  service_.run_stream = [](const v1::RunRequest&, ResultWriter* writer) {
    writer->Write(Header(0, 4, {4}));
    writer->Write(Chunk("ab"));
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "out of device memory");
  };
  EXPECT_THAT(MakeClient().RunStream(Request("a")),
              StatusIs(absl::StatusCode::kResourceExhausted, Eq("out of device memory")));
}

// Reads every request, then answers in reverse order; "bad" gets its own status.
grpc::Status AnswerInReverse(BidiStream* stream) {
  std::vector<v1::RunRequest> requests;
  v1::RunRequest request;
  while (stream->Read(&request)) requests.push_back(request);
  std::reverse(requests.begin(), requests.end());
  for (const v1::RunRequest& r : requests) {
    v1::RunResponse response;
    response.set_id(r.id());
    if (r.id() == "bad") {
      response.mutable_status()->set_code(grpc::StatusCode::INVALID_ARGUMENT);
      response.mutable_status()->set_message("split.axis is 9");
    } else {
      response.set_backend("cpu");
      *response.add_outputs() = Uint8Tensor({1}, {1}, r.id().substr(0, 1));
    }
    stream->Write(response);
  }
  return grpc::Status::OK;
}

TEST_F(ClientTest, RunBidiMatchesAnswersById) {
  service_.run_bidi = AnswerInReverse;
  const std::vector<absl::StatusOr<Result>> results =
      MakeClient().RunBidi({Request("x"), Request("bad"), Request("y"), Request("z")});
  ASSERT_EQ(results.size(), 4u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->outputs[0].data, "x");
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kInvalidArgument, Eq("split.axis is 9")));
  ASSERT_TRUE(results[2].ok()) << results[2].status();
  EXPECT_EQ(results[2]->outputs[0].data, "y");
  ASSERT_TRUE(results[3].ok()) << results[3].status();
  EXPECT_EQ(results[3]->outputs[0].data, "z");
}

TEST_F(ClientTest, RunBidiRefusesDuplicateIdsWithoutCalling) {
  service_.run_bidi = AnswerInReverse;
  const std::vector<absl::StatusOr<Result>> results =
      MakeClient().RunBidi({Request("a"), Request("b"), Request("a")});
  ASSERT_EQ(results.size(), 3u);
  for (const absl::StatusOr<Result>& result : results) {
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                                 Eq("RunBidi matches answers by id, and requests 0 and 2 share "
                                    "the id \"a\"")));
  }
  EXPECT_EQ(service_.calls.load(), 0);
}

TEST_F(ClientTest, RunBidiReportsRequestsLeftUnanswered) {
  service_.run_bidi = [](BidiStream* stream) {
    v1::RunRequest request;
    if (!stream->Read(&request)) return grpc::Status::OK;
    v1::RunResponse response;
    response.set_id(request.id());
    *response.add_outputs() = Uint8Tensor({1}, {1}, "1");
    stream->Write(response);
    while (stream->Read(&request)) {
    }
    return grpc::Status::OK;
  };
  const std::vector<absl::StatusOr<Result>> results =
      MakeClient().RunBidi({Request("first"), Request("second")});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kInternal,
                                   Eq("server broke the protocol: the stream ended without "
                                      "answering this request")));
}

TEST_F(ClientTest, RunBidiGivesTheStreamsErrorToUnansweredRequests) {
  service_.run_bidi = [](BidiStream* stream) {
    v1::RunRequest request;
    while (stream->Read(&request)) {
    }
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  };
  const std::vector<absl::StatusOr<Result>> results =
      MakeClient().RunBidi({Request("first"), Request("second")});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_THAT(results[0], StatusIs(absl::StatusCode::kResourceExhausted, Eq("queue full")));
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kResourceExhausted, Eq("queue full")));
}

TEST_F(ClientTest, RunBidiRejectsAnAnswerForAnUnknownId) {
  service_.run_bidi = [](BidiStream* stream) {
    v1::RunResponse response;
    response.set_id("stranger");
    stream->Write(response);
    v1::RunRequest request;
    while (stream->Read(&request)) {
    }
    return grpc::Status::OK;
  };
  const std::vector<absl::StatusOr<Result>> results = MakeClient().RunBidi({Request("a")});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(results[0], StatusIs(absl::StatusCode::kInternal,
                                   Eq("server broke the protocol: an answer for id \"stranger\", "
                                      "which no unanswered request has")));
}

// What the fake RunChunked received.
struct Upload {
  v1::RunRequest header;
  std::map<std::string, std::string> data;
  size_t largest_chunk = 0;
  int chunks = 0;
};

TEST_F(ClientTest, RunChunkedSendsTheRequestWithoutDataThenChunks) {
  Upload upload;
  service_.run_chunked = [&upload](grpc::ServerContext*, ChunkedStream* stream) {
    v1::RequestPart part;
    if (!stream->Read(&part) || !part.has_request()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request first");
    }
    upload.header = part.request();
    while (stream->Read(&part)) {
      upload.data[part.chunk().input()] += part.chunk().data();
      upload.largest_chunk = std::max(upload.largest_chunk, part.chunk().data().size());
      ++upload.chunks;
    }
    const std::string& echo = upload.data["input"];
    v1::ResultPart header =
        Header(0, static_cast<int64_t>(echo.size()), {static_cast<int64_t>(echo.size())});
    stream->Write(header);
    stream->Write(Chunk(echo));
    return grpc::Status::OK;
  };
  v1::RunRequest request = Request("chunky");
  request.set_backend(v1::CPU);
  request.add_outputs()->add_sizes(23);
  std::string input_bytes;
  for (int i = 0; i < 23; ++i) input_bytes.push_back(static_cast<char>('a' + i));
  (*request.mutable_inputs())["input"] = Uint8Tensor({23}, {}, input_bytes);
  (*request.mutable_inputs())["indices"] = Uint8Tensor({3}, {}, "ijk");

  std::vector<Progress> progress;
  ClientOptions options;
  options.progress = [&progress](const Progress& p) { progress.push_back(p); };
  ASSERT_OK_AND_ASSIGN(const Result result, MakeClient(options).RunChunked(request, 5));

  EXPECT_EQ(result.outputs[0].data, input_bytes);
  EXPECT_EQ(upload.header.id(), "chunky");
  EXPECT_EQ(upload.header.backend(), v1::CPU);
  EXPECT_TRUE(upload.header.has_split());
  ASSERT_EQ(upload.header.outputs_size(), 1);
  EXPECT_THAT(upload.header.outputs(0).sizes(), ElementsAre(23));
  ASSERT_EQ(upload.header.inputs().size(), 2u);
  EXPECT_EQ(upload.header.inputs().at("input").data(), "");
  EXPECT_THAT(upload.header.inputs().at("input").sizes(), ElementsAre(23));
  EXPECT_EQ(upload.header.inputs().at("input").dtype(), v1::UINT8);
  EXPECT_EQ(upload.header.inputs().at("indices").data(), "");
  EXPECT_EQ(upload.data["input"], input_bytes);
  EXPECT_EQ(upload.data["indices"], "ijk");
  EXPECT_EQ(upload.largest_chunk, 5u);
  EXPECT_EQ(upload.chunks, 6);  // 3 bytes in one chunk, 23 in five
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front().direction, Progress::Direction::kUpload);
  EXPECT_EQ(progress.front().done, 0);
  const auto last_upload = std::find_if(progress.rbegin(), progress.rend(), [](const Progress& p) {
    return p.direction == Progress::Direction::kUpload;
  });
  EXPECT_EQ(last_upload->done, 26);
  EXPECT_EQ(last_upload->total, 26);
  EXPECT_EQ(progress.back().direction, Progress::Direction::kDownload);
  EXPECT_EQ(progress.back().done, 23);
}

TEST_F(ClientTest, RunChunkedStopsUploadingWhenTheServerAnswersEarly) {
  service_.run_chunked = [](grpc::ServerContext*, ChunkedStream* stream) {
    v1::RequestPart part;
    stream->Read(&part);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "scatter_elements.axis is 7");
  };
  v1::RunRequest request = Request("big");
  (*request.mutable_inputs())["input"] = Uint8Tensor({32 << 20}, {}, std::string(32 << 20, 'x'));
  EXPECT_THAT(MakeClient().RunChunked(request, 4096),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("scatter_elements.axis is 7")));
}

TEST_F(ClientTest, DeadlineEndsACallThatNeverAnswers) {
  service_.run_chunked = [](grpc::ServerContext* context, ChunkedStream* stream) {
    v1::RequestPart part;
    while (stream->Read(&part)) {
    }
    // Everything is uploaded; answer nothing until the client gives up.
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return grpc::Status::OK;
  };
  ClientOptions options;
  options.deadline = absl::Milliseconds(300);
  v1::RunRequest request = Request("slow");
  (*request.mutable_inputs())["input"] = Uint8Tensor({4}, {}, "abcd");
  EXPECT_THAT(MakeClient(options).RunChunked(request),
              StatusIs(absl::StatusCode::kDeadlineExceeded, Eq("Deadline Exceeded")));
}

// ---- Handles -------------------------------------------------------------------

v1::TensorHandle Handle(std::string id, std::vector<int64_t> sizes) {
  v1::TensorHandle handle;
  handle.set_id(std::move(id));
  handle.set_dtype(v1::UINT8);
  for (int64_t size : sizes) handle.add_sizes(size);
  handle.add_strides(1);
  handle.set_backend("cpu");
  return handle;
}

TEST_F(ClientTest, RunReturnsAKeptOutputWithItsHandleAndNoData) {
  service_.run = [](const v1::RunRequest&, v1::RunResponse* response) {
    v1::Tensor& kept = *response->add_outputs();
    kept.set_dtype(v1::UINT8);
    kept.add_sizes(3);
    kept.add_strides(1);
    *kept.mutable_handle() = Handle("00ff", {3});
    *response->add_outputs() = Uint8Tensor({2}, {1}, "ab");
    return grpc::Status::OK;
  };
  v1::RunRequest request = Request("a");
  request.add_outputs()->set_keep(true);
  request.add_outputs();
  ASSERT_OK_AND_ASSIGN(const Result result, MakeClient().Run(request));
  ASSERT_EQ(result.outputs.size(), 2u);
  ASSERT_TRUE(result.outputs[0].handle.has_value());
  EXPECT_EQ(result.outputs[0].handle->id(), "00ff");
  EXPECT_THAT(result.outputs[0].sizes, ElementsAre(3));
  EXPECT_EQ(result.outputs[0].data, "");
  EXPECT_FALSE(result.outputs[1].handle.has_value());
  EXPECT_EQ(result.outputs[1].data, "ab");

  // Kept, yet answered without a handle: not an answer to this request.
  v1::RunRequest both_kept = request;
  both_kept.mutable_outputs(1)->set_keep(true);
  EXPECT_THAT(MakeClient().Run(both_kept),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: output 1 was kept, yet the answer has no "
                          "handle")));
}

TEST_F(ClientTest, RunStreamTakesAKeptOutputsHeaderWithoutChunks) {
  service_.run_stream = [](const v1::RunRequest& request, ResultWriter* writer) {
    v1::ResultPart kept = Header(0, 0, {4});
    *kept.mutable_header()->mutable_handle() = Handle("abcd", {4});
    if (request.id() == "lying") kept.mutable_header()->set_byte_length(4);
    writer->Write(kept);
    writer->Write(Header(1, 2, {2}));
    writer->Write(Chunk("xy"));
    return grpc::Status::OK;
  };
  ASSERT_OK_AND_ASSIGN(const Result result, MakeClient().RunStream(Request("a")));
  ASSERT_EQ(result.outputs.size(), 2u);
  ASSERT_TRUE(result.outputs[0].handle.has_value());
  EXPECT_EQ(result.outputs[0].handle->id(), "abcd");
  EXPECT_EQ(result.outputs[0].data, "");
  EXPECT_EQ(result.outputs[1].data, "xy");
  EXPECT_THAT(MakeClient().RunStream(Request("lying")),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: output 0 was kept, yet 4 bytes are "
                          "announced for it")));
}

TEST_F(ClientTest, PutSendsTheHeaderThenTheLayoutsBytesInChunks) {
  v1::PutHeader header;
  std::vector<std::string> chunks;
  service_.put = [&](grpc::ServerReader<v1::PutPart>* reader, v1::TensorHandle* handle) {
    v1::PutPart part;
    if (!reader->Read(&part) || !part.has_header()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no header first");
    }
    header = part.header();
    while (reader->Read(&part)) chunks.push_back(part.chunk());
    *handle = Handle("0123", {header.sizes().begin(), header.sizes().end()});
    return grpc::Status::OK;
  };
  // Padded rows, and two bytes past the layout's last element: 2 rows of 3
  // with stride 4 take 7 bytes.
  const HostTensor tensor{v1::UINT8, {2, 3}, {4, 1}, "abc_defXY"};
  std::vector<Progress> progress;
  ClientOptions options;
  options.progress = [&progress](const Progress& p) { progress.push_back(p); };
  ASSERT_OK_AND_ASSIGN(
      const v1::TensorHandle handle,
      MakeClient(options).Put(tensor, {.backend = v1::CPU, .ttl_seconds = 90, .chunk_bytes = 3}));
  EXPECT_EQ(handle.id(), "0123");
  EXPECT_EQ(header.dtype(), v1::UINT8);
  EXPECT_THAT(header.sizes(), ElementsAre(2, 3));
  EXPECT_THAT(header.strides(), ElementsAre(4, 1));
  EXPECT_EQ(header.backend(), v1::CPU);
  EXPECT_FALSE(header.has_device_index());
  EXPECT_EQ(header.ttl_seconds(), 90);
  EXPECT_THAT(chunks, ElementsAre("abc", "_de", "f"));
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().done, 7);
  EXPECT_EQ(progress.back().total, 7);

  // Packed bytes go as they are, even when wrong: the server judges them.
  chunks.clear();
  ASSERT_OK(MakeClient().Put(HostTensor{v1::UINT8, {2}, {}, "abc"}).status());
  EXPECT_THAT(chunks, ElementsAre("abc"));
  EXPECT_THAT(header.strides(), ElementsAre());
  EXPECT_EQ(header.backend(), v1::AUTO);
  EXPECT_EQ(header.ttl_seconds(), 0);
}

TEST_F(ClientTest, PutPassesTheServersStatusThrough) {
  service_.put = [](grpc::ServerReader<v1::PutPart>* reader, v1::TensorHandle*) {
    v1::PutPart part;
    reader->Read(&part);
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "header.backend: handles live in host");
  };
  EXPECT_THAT(
      MakeClient().Put(HostTensor{v1::UINT8, {1 << 20}, {}, std::string(1 << 20, 'x')},
                       {.backend = v1::OPENCL, .chunk_bytes = 1024}),
      StatusIs(absl::StatusCode::kUnimplemented, Eq("header.backend: handles live in host")));
}

TEST_F(ClientTest, FetchReassemblesOneTensor) {
  v1::FetchRequest asked;
  service_.fetch = [&asked](const v1::FetchRequest& request, ResultWriter* writer) {
    asked = request;
    if (request.id() == "two") {
      writer->Write(Header(0, 1, {1}));
      writer->Write(Chunk("a"));
      writer->Write(Header(1, 1, {1}));
      writer->Write(Chunk("b"));
      return grpc::Status::OK;
    }
    if (request.id() == "gone") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no handle \"gone\"");
    }
    writer->Write(Header(0, 4, {4}));
    writer->Write(Chunk("ab"));
    writer->Write(Chunk("cd"));
    return grpc::Status::OK;
  };
  const std::vector<int64_t> strides = {1};
  ASSERT_OK_AND_ASSIGN(const HostTensor tensor, MakeClient().Fetch("0123", strides));
  EXPECT_EQ(asked.id(), "0123");
  EXPECT_THAT(asked.strides(), ElementsAre(1));
  EXPECT_EQ(tensor.dtype, v1::UINT8);
  EXPECT_THAT(tensor.sizes, ElementsAre(4));
  EXPECT_EQ(tensor.data, "abcd");
  EXPECT_FALSE(tensor.handle.has_value());
  EXPECT_THAT(MakeClient().Fetch("gone"),
              StatusIs(absl::StatusCode::kNotFound, Eq("no handle \"gone\"")));
  EXPECT_THAT(asked.strides(), ElementsAre());
  EXPECT_THAT(MakeClient().Fetch("two"),
              StatusIs(absl::StatusCode::kInternal,
                       Eq("server broke the protocol: Fetch answered 2 outputs; expected one "
                          "tensor with its data")));
}

// A handle of an older server names no replica: calls on it go over the
// target; one naming a replica goes there, here the fake's own address.
TEST_F(ClientTest, CallsOnHandlesGoToTheirReplicaOrOverTheTarget) {
  int runs = 0;
  service_.run = [&runs](const v1::RunRequest& request, v1::RunResponse* response) {
    ++runs;
    response->set_id(request.id());
    return grpc::Status::OK;
  };
  Client client = MakeClient();
  v1::TensorHandle old_server;
  old_server.set_id("0123456789abcdef0123456789abcdef");
  v1::RunRequest request = Request("a");
  ReferTo(old_server, (*request.mutable_inputs())["input"]);
  ASSERT_OK(client.Run(request).status());
  v1::TensorHandle here = old_server;
  here.set_replica(absl::StrCat("127.0.0.1:", port_));
  ReferTo(here, (*request.mutable_inputs())["input"]);
  EXPECT_EQ(request.inputs().at("input").handle().replica(), here.replica());
  ASSERT_OK(client.Run(request).status());
  EXPECT_EQ(runs, 2);

  // Handles of two replicas: refused before anything is sent.
  v1::TensorHandle there = here;
  there.set_replica("127.0.0.1:1");
  ReferTo(there, (*request.mutable_inputs())["updates"]);
  EXPECT_THAT(client.Run(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("inputs[\"input\"] lives on replica ", here.replica(),
                                    " and inputs[\"updates\"] on replica 127.0.0.1:1; a call "
                                    "reads handles of one replica")));
  EXPECT_EQ(runs, 2);
  // Nothing listens at a replica's address: it is unreachable, naming it and
  // the handle's first characters only.
  request.mutable_inputs()->erase("input");
  EXPECT_THAT(client.Run(request),
              StatusIs(absl::StatusCode::kUnavailable,
                       ::testing::StartsWith("replica 127.0.0.1:1 holding 01234567... is "
                                             "unreachable: ")));
}

TEST_F(ClientTest, ReleaseSendsTheIdsAndListAllHandlesReadsEveryPage) {
  std::vector<std::string> released;
  service_.release = [&released](const v1::ReleaseRequest& request) {
    released.assign(request.ids().begin(), request.ids().end());
    return grpc::Status::OK;
  };
  ASSERT_OK(MakeClient().Release({"a1", "b2"}));
  EXPECT_THAT(released, ElementsAre("a1", "b2"));

  std::vector<std::pair<int, std::string>> pages;  // page_size, page_token
  service_.list_handles = [&pages](const v1::ListHandlesRequest& request,
                                   v1::ListHandlesResponse* response) {
    pages.emplace_back(request.page_size(), request.page_token());
    if (request.page_token().empty()) {
      *response->add_handles() = Handle("01", {1});
      *response->add_handles() = Handle("02", {2});
      response->set_next_page_token("02");
    } else {
      *response->add_handles() = Handle("03", {3});
    }
    return grpc::Status::OK;
  };
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::TensorHandle> handles, MakeClient().ListAllHandles());
  ASSERT_EQ(handles.size(), 3u);
  EXPECT_EQ(handles[0].id(), "01");
  EXPECT_EQ(handles[2].id(), "03");
  EXPECT_THAT(handles[2].sizes(), ElementsAre(3));
  EXPECT_THAT(
      pages, ElementsAre(std::pair<int, std::string>{0, ""}, std::pair<int, std::string>{0, "02"}));
  ASSERT_OK_AND_ASSIGN(const v1::ListHandlesResponse page, MakeClient().ListHandles(5, "02"));
  EXPECT_EQ(page.handles_size(), 1);
  EXPECT_EQ(page.next_page_token(), "");
  EXPECT_EQ(pages.back(), (std::pair<int, std::string>{5, "02"}));
}

TEST(UnreachableTest, EveryCallIsUnavailable) {
  // A bound socket that never listens: connecting to it is refused, and holding
  // it keeps the port from being reused while the test runs.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  Client client(absl::StrCat("127.0.0.1:", ntohs(address.sin_port)));
  // round_robin's words for "every replica refused the connection".
  const std::string kRefused = "connections to all backends failing";
  EXPECT_THAT(client.Run(Request("a")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kRefused)));
  EXPECT_THAT(client.RunStream(Request("a")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kRefused)));
  EXPECT_THAT(client.RunChunked(Request("a")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kRefused)));
  const std::vector<absl::StatusOr<Result>> results = client.RunBidi({Request("a")});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(results[0], StatusIs(absl::StatusCode::kUnavailable, HasSubstr(kRefused)));
  close(fd);
}

}  // namespace
}  // namespace tensorop::client
