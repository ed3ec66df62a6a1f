// The check every hostile-client test makes during and after an attack: a
// normal request, on a connection of its own, answers correctly within 1 s.
#ifndef TENSOROP_TESTS_INTEGRATION_NORMAL_ANSWER_H_
#define TENSOROP_TESTS_INTEGRATION_NORMAL_ANSWER_H_

#include <chrono>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {

inline void ExpectNormalAnswer(const TensordProcess& server) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::TensorOp::NewStub(
      grpc::CreateCustomChannel(server.target(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  v1::RunResponse response;
  grpc::Status status = stub->Run(&context, DocSliceRequest("normal"), &response);
  ASSERT_THAT(status, GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_INTEGRATION_NORMAL_ANSWER_H_
