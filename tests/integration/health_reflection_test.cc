// grpc.health.v1 and server reflection on a real tensord. Debian ships no
// generated stubs for either, so the tests speak their (tiny) wire format.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr uint64_t kServing = 1;     // grpc.health.v1.HealthCheckResponse.SERVING
constexpr uint64_t kNotServing = 2;  // NOT_SERVING

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

TEST(HealthTest, BackendsHaveTheirOwnServiceNames) {
  TensordProcess server;
  for (const std::string service : {"tensorop.cpu", "tensorop.opencl"}) {
    std::vector<uint64_t> statuses;
    ASSERT_TRUE(CheckHealth(server.target(), service, &statuses).ok()) << service;
    EXPECT_THAT(statuses, ElementsAre(kServing)) << service;
  }
}

TEST(HealthTest, OpenClIsNotServingWhileNoDeviceWorksAndTheServerStillIs) {
  // Every device execution fails, whatever the devices are called and however
  // many there are: one OPENCL request per device index breaks each (the CPU
  // answers it), until the server says the index is past the last device.
  TensordProcess server({"--inject_opencl_failures=1024", "--opencl_unhealthy_seconds=600"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  int devices = 0;
  for (; devices < 1024; ++devices) {
    v1::RunRequest request = DocSliceRequest(absl::StrCat("breaks-device-", devices));
    request.set_backend(v1::OPENCL);
    request.set_device_index(devices);
    grpc::ClientContext context;
    v1::RunResponse response;
    const grpc::Status status = stub->Run(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      EXPECT_THAT(
          status.error_message(),
          HasSubstr(absl::StrCat("device_index = ", devices, " is outside [0, ", devices, ")")));
      break;
    }
    ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << server.Log();
    EXPECT_EQ(response.backend(), "cpu");
  }
  ASSERT_GT(devices, 0) << "no OpenCL device: is pocl-opencl-icd installed?";
  // The health ticker looks once a second; give it a few.
  std::vector<uint64_t> statuses;
  for (int attempt = 0; attempt < 50; ++attempt) {
    ASSERT_TRUE(CheckHealth(server.target(), "tensorop.opencl", &statuses).ok());
    if (statuses == std::vector<uint64_t>{kNotServing}) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(statuses, ElementsAre(kNotServing));
  for (const std::string service : {"", "tensorop.cpu"}) {
    ASSERT_TRUE(CheckHealth(server.target(), service, &statuses).ok());
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
