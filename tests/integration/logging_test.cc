// tensord's stderr as operators read it (issue 46, item 6): every line JSON
// with a time and a level, every RPC logged with its method and peer (the
// small methods and refusals too), other libraries' output (PoCL's) turned
// into lines of the same kind, and --request_log choosing which calls get one.
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/telemetry/request_log.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// tensord's stderr as JSON lines. Every line is one, except in sanitizer
// builds, where other libraries' output stays as they wrote it (kept in
// `raw`, when given): tensord must not swallow a sanitizer's report.
std::vector<nlohmann::json> LogLines(const TensordProcess& server,
                                     std::vector<std::string>* raw = nullptr) {
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(server.Log(), '\n', absl::SkipEmpty())) {
    nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_discarded()) {
      lines.push_back(std::move(json));
    } else if (raw != nullptr && !server::kCapturesForeignStderr) {
      raw->emplace_back(line);
    } else {
      ADD_FAILURE() << "not JSON: " << line;
    }
  }
  return lines;
}

grpc::Status RunOnce(v1::TensorOp::Stub& stub, const v1::RunRequest& request) {
  grpc::ClientContext context;
  v1::RunResponse response;
  return stub.Run(&context, request, &response);
}

// Lines of calls to `method`, by status.
std::map<std::string, int> CallLines(const std::vector<nlohmann::json>& lines,
                                     const std::string& method) {
  std::map<std::string, int> counts;
  for (const nlohmann::json& line : lines) {
    if (line.value("method", "") == method) ++counts[line.value("status", "")];
  }
  return counts;
}

TEST(LoggingTest, EveryLineIsJsonWithTimeAndLevelAndEveryCallHasOne) {
  // PoCL's debug output: lines tensord does not write itself.
  setenv("POCL_DEBUG", "1", 1);
  TensordProcess server({"--backends=cpu,opencl"});
  unsetenv("POCL_DEBUG");
  auto channel = Connect(server.target());
  auto stub = v1::TensorOp::NewStub(channel);
  ASSERT_THAT(RunOnce(*stub, DocSliceRequest("fine")), GrpcOk());
  v1::RunRequest bad = DocSliceRequest("bad");
  bad.mutable_slice()->set_window_strides(0, 0);
  EXPECT_EQ(RunOnce(*stub, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    grpc::ClientContext context;
    v1::ListHandlesResponse page;
    ASSERT_THAT(stub->ListHandles(&context, v1::ListHandlesRequest(), &page), GrpcOk());
  }
  {
    grpc::ClientContext context;
    v1::ReleaseRequest release;
    release.add_ids("0123456789abcdef0123456789abcdef");
    v1::ReleaseResponse released;
    ASSERT_THAT(stub->Release(&context, release, &released), GrpcOk());
  }
  {
    grpc::ClientContext context;
    v1::RegisterSharedMemoryRequest request;
    request.set_region("r");
    request.set_key("tensorop-no-such-object");
    v1::RegisterSharedMemoryResponse response;
    EXPECT_EQ(stub->RegisterSharedMemory(&context, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {  // a Fetch refused before it streams
    grpc::ClientContext context;
    v1::FetchRequest fetch;
    fetch.set_id("0123456789abcdef0123456789abcdef");
    auto reader = stub->Fetch(&context, fetch);
    v1::ResultPart part;
    EXPECT_FALSE(reader->Read(&part));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    auto v2 = inference::GRPCInferenceService::NewStub(channel);
    grpc::ClientContext context;
    inference::ServerLiveResponse live;
    ASSERT_THAT(v2->ServerLive(&context, inference::ServerLiveRequest(), &live), GrpcOk());
  }
  ASSERT_EQ(server.Stop(), 0);

  std::vector<std::string> raw;
  const std::vector<nlohmann::json> lines = LogLines(server, &raw);
  bool foreign = false;
  for (const nlohmann::json& line : lines) {
    EXPECT_TRUE(line.contains("time")) << line.dump();
    EXPECT_THAT(line.value("level", ""), ::testing::AnyOf("info", "warning", "error", "debug"))
        << line.dump();
    foreign = foreign || line.value("source", "") == "stderr";
    if (line.contains("method")) {
      EXPECT_THAT(line.value("peer", ""), StartsWith("ipv4:127.0.0.1:")) << line.dump();
    }
  }
  if (server::kCapturesForeignStderr) {
    EXPECT_TRUE(foreign) << "no PoCL line was turned into JSON";
  } else {  // a sanitizer build: PoCL's lines as PoCL wrote them, tensord's all JSON
    EXPECT_FALSE(foreign);
    ASSERT_FALSE(raw.empty());
    EXPECT_THAT(raw, ::testing::Contains(HasSubstr("POCL: in fn")));
  }
  EXPECT_EQ(CallLines(lines, "Run"),
            (std::map<std::string, int>{{"OK", 1}, {"INVALID_ARGUMENT", 1}}));
  EXPECT_EQ(CallLines(lines, "ListHandles"), (std::map<std::string, int>{{"OK", 1}}));
  EXPECT_EQ(CallLines(lines, "Release"), (std::map<std::string, int>{{"OK", 1}}));
  EXPECT_EQ(CallLines(lines, "RegisterSharedMemory"),
            (std::map<std::string, int>{{"NOT_FOUND", 1}}));
  EXPECT_EQ(CallLines(lines, "Fetch"), (std::map<std::string, int>{{"NOT_FOUND", 1}}));
  EXPECT_EQ(CallLines(lines, "ServerLive"), (std::map<std::string, int>{{"OK", 1}}));
  // The startup events have their time and level too; the stop is the last line.
  EXPECT_EQ(lines.front().value("event", ""), "starting");
  EXPECT_EQ(lines.back().value("event", ""), "stopped");
}

// --request_log: every call, errors only, every error and one OK call in N, none.
TEST(LoggingTest, TheRequestLogFlagChoosesWhichCallsGetALine) {
  v1::RunRequest bad = DocSliceRequest("bad");
  bad.mutable_slice()->set_window_strides(0, 0);
  const std::vector<std::pair<std::string, std::map<std::string, int>>> cases = {
      {"all", {{"OK", 9}, {"INVALID_ARGUMENT", 1}}},
      {"errors", {{"INVALID_ARGUMENT", 1}}},
      {"sample:3", {{"OK", 3}, {"INVALID_ARGUMENT", 1}}},
      {"off", {}},
  };
  for (const auto& [policy, expected] : cases) {
    TensordProcess server({"--backends=cpu", "--request_log=" + policy});
    auto stub = v1::TensorOp::NewStub(Connect(server.target()));
    for (int i = 0; i < 9; ++i) ASSERT_THAT(RunOnce(*stub, DocSliceRequest("ok")), GrpcOk());
    EXPECT_EQ(RunOnce(*stub, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    stub.reset();  // no connection left for the stop to wait out
    ASSERT_EQ(server.Stop(), 0);
    const std::vector<nlohmann::json> lines = LogLines(server);
    EXPECT_EQ(CallLines(lines, "Run"), expected) << policy;
    // Events are not calls: always there.
    EXPECT_EQ(lines.back().value("event", ""), "stopped") << policy;
  }
}

}  // namespace
}  // namespace tensorop::testing
