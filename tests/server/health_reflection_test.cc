// grpc.health.v1 and server reflection on a real tensord. Debian ships no
// generated stubs for either, so the tests speak their (tiny) wire format.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/tensord_client.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr uint64_t kServing = 1;  // grpc.health.v1.HealthCheckResponse.SERVING

// HealthCheckRequest{service}; answers the response's status values.
grpc::Status CheckHealth(const std::string& target, const std::string& service,
                         std::vector<uint64_t>* statuses) {
  grpc::ClientContext context;
  RawCall call(Connect(target), kHealthCheck, &context);
  call.Write(WireString(1, service));
  call.WritesDone();
  if (std::optional<std::string> response = call.Read()) {
    *statuses = WireVarints(*response, 1);
  }
  return call.Finish();
}

TEST(HealthTest, ServerAndServiceAreServing) {
  TensordProcess server;
  for (const std::string service : {"", "tensorop.v1.TensorOp"}) {
    std::vector<uint64_t> statuses;
    grpc::Status status = CheckHealth(server.target(), service, &statuses);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_THAT(statuses, ElementsAre(kServing)) << "service \"" << service << "\"";
  }
}

TEST(HealthTest, UnknownServiceIsNotFound) {
  TensordProcess server;
  std::vector<uint64_t> statuses;
  grpc::Status status = CheckHealth(server.target(), "no.such.Service", &statuses);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ReflectionTest, ListsTheTensorOpService) {
  TensordProcess server;
  grpc::ClientContext context;
  RawCall call(Connect(server.target()),
               "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &context);
  // ServerReflectionRequest{list_services: "*"} (field 7).
  ASSERT_TRUE(call.Write(WireString(7, "*")));
  ASSERT_TRUE(call.WritesDone());
  std::optional<std::string> response = call.Read();
  ASSERT_TRUE(response.has_value());
  // ServerReflectionResponse.list_services_response (6) holds repeated
  // ServiceResponse (1), each with its name (1).
  std::vector<std::string> lists = WireStrings(*response, 6);
  ASSERT_EQ(lists.size(), 1u);
  std::vector<std::string> names;
  for (const std::string& service : WireStrings(lists[0], 1)) {
    for (const std::string& name : WireStrings(service, 1)) names.push_back(name);
  }
  EXPECT_THAT(names, Contains("tensorop.v1.TensorOp"));
  while (call.Read().has_value()) {
  }
  EXPECT_TRUE(call.Finish().ok());
}

}  // namespace
}  // namespace tensorop::testing
