// HealthStatuses through real gRPC servers on loopback: Check and Watch as
// grpc.health.v1 says, one set of statuses behind two servers (tensord's main
// server and its --health_address listener), and a Shutdown that ends every
// Watch.
#include "server/security/health_statuses.h"

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/grpc_matchers.h"

namespace tensorop::server {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::tensorop::testing::GrpcOk;
using ::tensorop::testing::GrpcStatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A server on a loopback port with only `statuses`' health service.
struct HealthServer {
  explicit HealthServer(HealthStatuses& statuses) : service(statuses.NewService()) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~HealthServer() { server->Shutdown(); }

  // Check of `name`, its answer in `response`.
  grpc::Status Check(const std::string& name, HealthCheckResponse* response) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(name);
    return stub->Check(&context, request, response);
  }

  std::unique_ptr<grpc::Service> service;  // outlives the server
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub;
};

// A Watch of `name` on `server`, read one status at a time.
struct Watch {
  Watch(HealthServer& server, const std::string& name) {
    HealthCheckRequest request;
    request.set_service(name);
    reader = server.stub->Watch(&context, request);
  }
  HealthCheckResponse::ServingStatus Next() {
    HealthCheckResponse response;
    EXPECT_TRUE(reader->Read(&response));
    return response.status();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader;
};

TEST(HealthStatusesTest, CheckAnswersTheStatusSetAndNotFoundForOthers) {
  HealthStatuses statuses;
  HealthServer server(statuses);
  statuses.SetServingStatus("", true);
  statuses.SetServingStatus("tensorop.v1.TensorOp", false);
  HealthCheckResponse response;
  ASSERT_THAT(server.Check("", &response), GrpcOk());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_THAT(server.Check("tensorop.v1.TensorOp", &response), GrpcOk());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_THAT(server.Check("other", &response),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("service name unknown")));
}

TEST(HealthStatusesTest, AWatchIsToldEveryChangeOnEveryServerSharingTheStatuses) {
  HealthStatuses statuses;
  HealthServer main(statuses);
  HealthServer listener(statuses);
  Watch on_main(main, "tensorop.cpu");
  Watch on_listener(listener, "tensorop.cpu");
  EXPECT_EQ(on_main.Next(), HealthCheckResponse::SERVICE_UNKNOWN);
  EXPECT_EQ(on_listener.Next(), HealthCheckResponse::SERVICE_UNKNOWN);
  statuses.SetServingStatus("tensorop.cpu", true);
  EXPECT_EQ(on_main.Next(), HealthCheckResponse::SERVING);
  EXPECT_EQ(on_listener.Next(), HealthCheckResponse::SERVING);
  statuses.SetServingStatus("another", false);  // not this watch's service
  statuses.SetServingStatus(false);             // every service
  EXPECT_EQ(on_main.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(on_listener.Next(), HealthCheckResponse::NOT_SERVING);
  for (Watch* watch : {&on_main, &on_listener}) {
    watch->context.TryCancel();
    HealthCheckResponse ignored;
    while (watch->reader->Read(&ignored)) {
    }
    EXPECT_THAT(watch->reader->Finish(), GrpcStatusIs(grpc::StatusCode::CANCELLED, ::testing::_));
  }
}

TEST(HealthStatusesTest, ShutdownEndsEveryWatchAndLaterSetsAreIgnored) {
  HealthStatuses statuses;
  HealthServer server(statuses);
  statuses.SetServingStatus("", true);
  Watch watch(server, "");
  EXPECT_EQ(watch.Next(), HealthCheckResponse::SERVING);
  statuses.Shutdown();
  std::vector<HealthCheckResponse::ServingStatus> told;
  HealthCheckResponse response;
  while (watch.reader->Read(&response)) told.push_back(response.status());
  EXPECT_THAT(told, ElementsAre(HealthCheckResponse::NOT_SERVING));
  EXPECT_THAT(watch.reader->Finish(),
              GrpcStatusIs(grpc::StatusCode::UNAVAILABLE, HasSubstr("tensord is stopping")));

  statuses.SetServingStatus("", true);
  ASSERT_THAT(server.Check("", &response), GrpcOk());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  // A watch begun after the shutdown is told so and ended at once.
  Watch late(server, "");
  EXPECT_EQ(late.Next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(late.reader->Read(&response));
  EXPECT_THAT(late.reader->Finish(),
              GrpcStatusIs(grpc::StatusCode::UNAVAILABLE, HasSubstr("tensord is stopping")));
}

}  // namespace
}  // namespace tensorop::server
