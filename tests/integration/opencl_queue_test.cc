// OPENCL requests past --opencl_queue_depth against a real tensord (PoCL here):
// they wait for a slot instead of being refused, and every answer is exact.
// Nothing here depends on the device's name, the core count or timing: the
// server is given more workers than the queue has slots, whatever the machine.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"
#include "tests/support/text_lines.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr int kRequests = 32;

// Request `i`: a uint8 vector of its own length and bytes, reversed by a
// stride -1 Slice; `expected` gets the answer's bytes.
v1::RunRequest ReversedBytesRequest(int i, std::string* expected) {
  const int64_t length = 1000 + 37 * i;
  std::string data(static_cast<size_t>(length), '\0');
  for (int64_t j = 0; j < length; ++j) data[j] = static_cast<char>((j * 7 + i * 13) & 0xff);
  expected->assign(data.rbegin(), data.rend());
  v1::RunRequest request = SliceRequest(absl::StrCat(i), MakeTensor(v1::UINT8, {length}, data), {0},
                                        {length}, {-1}, {length});
  request.set_backend(v1::OPENCL);
  return request;
}

std::string ScrapeMetrics(const TensordProcess& server) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  return result ? result->body : std::string();
}

TEST(OpenClQueueTest, RunBidiWithMoreOpenClRequestsInFlightThanTheQueueDepthAnswersEvery) {
  TensordProcess server({"--opencl_queue_depth=1", "--worker_threads=8"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  std::map<std::string, std::string> expected;
  grpc::ClientContext context;
  auto stream = stub->RunBidi(&context);
  // All written before any is read: up to the stream's window in flight at once.
  for (int i = 0; i < kRequests; ++i) {
    std::string bytes;
    v1::RunRequest request = ReversedBytesRequest(i, &bytes);
    expected[request.id()] = std::move(bytes);
    ASSERT_TRUE(stream->Write(request));
  }
  ASSERT_TRUE(stream->WritesDone());
  std::map<std::string, int> seen;
  v1::RunResponse response;
  while (stream->Read(&response)) {
    ++seen[response.id()];
    EXPECT_EQ(response.status().code(), 0) << response.id() << ": " << response.status().message();
    EXPECT_THAT(response.backend(), StartsWith("opencl:")) << response.id();
    ASSERT_EQ(response.outputs_size(), 1) << response.id();
    EXPECT_TRUE(response.outputs(0).data() == expected[response.id()])
        << "request " << response.id() << ": the answer's bytes differ";
  }
  ASSERT_THAT(stream->Finish(), GrpcOk()) << server.Log();
  EXPECT_THAT(seen, SizeIs(kRequests));
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;

  // Nobody waits any more; the wait histogram is exposed (how many waited
  // depends on the machine, so only its presence is checked).
  const std::string text = ScrapeMetrics(server);
  const std::vector<std::string> waiting = LinesStartingWith(text, "tensorop_opencl_waiting{");
  ASSERT_FALSE(waiting.empty()) << text;
  for (const std::string& line : waiting) {
    EXPECT_THAT(line, HasSubstr("index=\""));
    EXPECT_TRUE(absl::EndsWith(line, "} 0")) << line;
  }
  EXPECT_THAT(text, HasSubstr("# TYPE tensorop_opencl_wait_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("tensorop_opencl_wait_seconds_count{device=\""));
}

TEST(OpenClQueueTest, UnaryOpenClRunsPastTheQueueDepthAreAllAnswered) {
  TensordProcess server({"--opencl_queue_depth=1", "--worker_threads=8"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  // Asynchronous unary calls, all started before any finishes.
  grpc::CompletionQueue queue;
  struct Call {
    grpc::ClientContext context;
    v1::RunResponse response;
    grpc::Status status;
    std::string expected;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kRequests; ++i) {
    auto call = std::make_unique<Call>();
    v1::RunRequest request = ReversedBytesRequest(i, &call->expected);
    auto reader = stub->AsyncRun(&call->context, request, &queue);
    reader->Finish(&call->response, &call->status, call.get());
    calls.push_back(std::move(call));
  }
  for (int i = 0; i < kRequests; ++i) {
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(queue.Next(&tag, &ok));
    ASSERT_TRUE(ok);
  }
  for (const std::unique_ptr<Call>& call : calls) {
    ASSERT_THAT(call->status, GrpcOk()) << server.Log();
    EXPECT_THAT(call->response.backend(), StartsWith("opencl:"));
    ASSERT_EQ(call->response.outputs_size(), 1);
    EXPECT_TRUE(call->response.outputs(0).data() == call->expected)
        << "request " << call->response.id() << ": the answer's bytes differ";
  }
  queue.Shutdown();
}

}  // namespace
}  // namespace tensorop::testing
