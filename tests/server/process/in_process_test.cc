// tensord's reactors in this process (InProcessServer): each call style
// answers, and once its calls are done their memory is back, the engine's
// budget at the bytes it held before them and no call open. A reservation a
// reactor forgot shows here as bytes past that baseline, named by call style,
// and one that outlived its call as a report of the call's ledger.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/server/process/in_process_server.h"
#include "tests/support/eventually.h"
#include "tests/support/grpc_matchers.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// OPERATORS.md's slice example's output (DocSliceRequest).
const std::vector<float> kDocSliceOutput = {2, 4, 10, 12};

class InProcessServerTest : public ::testing::Test {
 protected:
  InProcessServerTest() {
    // Every build checks the calls here, not only the sanitizer builds.
    server_.engine().budget().SetUnbalancedCallHandler(
        [this](absl::string_view call, int64_t bytes) {
          const std::lock_guard<std::mutex> lock(mu_);
          unbalanced_.push_back(absl::StrCat(call, " ended holding ", bytes, " bytes"));
        });
  }

  // Whether the engine came back to the state before the calls: no call
  // open, nothing reserved past `baseline_` (a reactor ends just after its
  // answer reaches the client, so this is waited for).
  void ExpectSettled(const std::string& after) {
    const server::Engine& engine = server_.engine();
    EXPECT_TRUE(Eventually([&] {
      return engine.open_calls() == 0 && engine.budget().reserved() == baseline_;
    })) << after
        << ": " << engine.open_calls() << " calls open, " << engine.budget().reserved() - baseline_
        << " bytes reserved past the baseline";
    const std::lock_guard<std::mutex> lock(mu_);
    EXPECT_THAT(unbalanced_, ::testing::IsEmpty()) << after;
  }

  // Before the server: its calls' ledgers report here until it stopped.
  std::mutex mu_;
  std::vector<std::string> unbalanced_;  // what the calls' ledgers reported
  // The buffer pool off: a freed output buffer is not kept reserved.
  InProcessServer server_{{"--backends=cpu", "--buffer_pool_bytes=0"}};
  const int64_t baseline_ = server_.engine().budget().reserved();
  std::unique_ptr<v1::TensorOp::Stub> stub_ = v1::TensorOp::NewStub(Connect(server_.target()));
};

TEST_F(InProcessServerTest, EachCallStyleAnswersAndGivesItsMemoryBack) {
  const v1::RunRequest request = DocSliceRequest("doc");
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub_->Run(&context, request, &response), GrpcOk());
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(Unpack<float>(response.outputs(0).data()), kDocSliceOutput);
  }
  ExpectSettled("Run");
  {
    grpc::ClientContext context;
    auto reader = stub_->RunStream(&context, request);
    v1::ResultPart part;
    int headers = 0;
    std::string data;
    while (reader->Read(&part)) {
      if (part.has_header()) ++headers;
      data += part.chunk();
    }
    ASSERT_THAT(reader->Finish(), GrpcOk());
    EXPECT_EQ(headers, 1);
    EXPECT_EQ(Unpack<float>(data), kDocSliceOutput);
  }
  ExpectSettled("RunStream");
  {
    grpc::ClientContext context;
    auto stream = stub_->RunBidi(&context);
    for (const char* id : {"first", "second"}) {
      v1::RunRequest named = request;
      named.set_id(id);
      ASSERT_TRUE(stream->Write(named));
    }
    ASSERT_TRUE(stream->WritesDone());
    v1::RunResponse response;
    std::vector<std::string> ids;
    while (stream->Read(&response)) {
      ids.push_back(response.id());
      ASSERT_EQ(response.outputs_size(), 1);
      EXPECT_EQ(Unpack<float>(response.outputs(0).data()), kDocSliceOutput);
    }
    ASSERT_THAT(stream->Finish(), GrpcOk());
    EXPECT_THAT(ids, ElementsAre("first", "second"));
  }
  ExpectSettled("RunBidi");
  {
    // 2 MiB: its input is read where gRPC received it.
    const ReversedRows rows = ReversedRowsCase();
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub_->Run(&context, rows.Request("rows"), &response), GrpcOk());
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(Unpack<float>(response.outputs(0).data()), rows.expected);
  }
  ExpectSettled("Run of 2 MiB");
}

TEST_F(InProcessServerTest, RefusedCallsGiveTheirMemoryBack) {
  v1::RunRequest outside = DocSliceRequest("outside");
  outside.mutable_slice()->set_offsets(3, 2);  // the window passes the input's end
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub_->Run(&context, outside, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("slice.offsets[3]")));
  ExpectSettled("a Run refused by validation");
  grpc::ClientContext stream_context;
  auto reader = stub_->RunStream(&stream_context, outside);
  v1::ResultPart part;
  EXPECT_FALSE(reader->Read(&part));
  EXPECT_THAT(reader->Finish(),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("slice.offsets[3]")));
  ExpectSettled("a RunStream refused by validation");
}

}  // namespace
}  // namespace tensorop::testing
