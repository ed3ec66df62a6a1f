// `tensord --echo`, the load-test baseline, as a client sees it: Run answers
// the real answer's shape with zero data; nothing else is served, logged or
// counted.
#include <memory>
#include <string>

#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(EchoTest, RunAnswersTheShapeOfTheRealAnswerWithZeros) {
  TensordProcess server({"--echo"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  v1::RunResponse response;
  ASSERT_THAT(stub->Run(&context, DocSliceRequest("echoed"), &response), GrpcOk());
  EXPECT_EQ(response.id(), "echoed");
  EXPECT_EQ(response.backend(), "echo");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).dtype(), v1::FLOAT32);
  EXPECT_THAT(response.outputs(0).sizes(), ElementsAre(1, 1, 2, 2));
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(4, 4, 2, 1));
  EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(0, 0, 0, 0));

  // Not logged, not counted: the baseline is the gRPC stack alone.
  EXPECT_THAT(server.Log(), Not(HasSubstr("\"method\":\"Run\"")));
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_THAT(scrape->body, Not(HasSubstr("tensorop_requests_total{")));
}

TEST(EchoTest, OtherMethodsAreUnimplemented) {
  TensordProcess server({"--echo"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  auto reader = stub->RunStream(&context, DocSliceRequest("stream"));
  v1::ResultPart part;
  EXPECT_FALSE(reader->Read(&part));
  EXPECT_THAT(reader->Finish(), GrpcStatusIs(grpc::StatusCode::UNIMPLEMENTED, _));
}

}  // namespace
}  // namespace tensorop::testing
