// What an operator reads off a running tensord: one version on every binary
// and surface, and W3C trace context carried from callers into the request
// log and back in the answers (gRPC metadata and v2 HTTP headers).
#include <memory>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "client/client.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";
constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// The version after "NAME " on the single line `out`.
std::string VersionOf(const std::string& name, const CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, ::testing::StartsWith(name + " "));
  std::string version = result.out.substr(std::min(result.out.size(), name.size() + 1));
  if (!version.empty() && version.back() == '\n') version.pop_back();
  return version;
}

TEST(VersionTest, EveryBinaryAndSurfaceReportsTheSameVersion) {
  const std::string version = VersionOf("tensord", RunCommand({TensordPath(), "--version"}));
  // The project version, then git describe's part when built from a checkout.
  EXPECT_TRUE(std::regex_match(version, std::regex(R"([0-9]+\.[0-9]+\.[0-9]+(\+[0-9A-Za-z.]+)?)")))
      << version;
  EXPECT_EQ(VersionOf("tensorctl", RunCommand({TensorctlPath(), "--version"})), version);

  TensordProcess server(
      {"--backends=cpu", "--metrics_address=127.0.0.1:0", "--http_address=127.0.0.1:0"});
  EXPECT_THAT(server.Log(),
              HasSubstr("\"level\":\"info\",\"event\":\"starting\",\"detail\":\"tensord " +
                        version + "\"}"));
  httplib::Client metrics("127.0.0.1", server.metrics_port());
  auto scraped = metrics.Get("/metrics");
  ASSERT_TRUE(scraped);
  EXPECT_THAT(scraped->body, HasSubstr("\ntensorop_build_info{version=\"" + version + "\"} 1\n"));

  auto v2 = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  inference::ServerMetadataResponse metadata;
  ASSERT_THAT(v2->ServerMetadata(&context, {}, &metadata), GrpcOk());
  EXPECT_EQ(metadata.version(), version);
  httplib::Client http("127.0.0.1", server.http_port());
  auto answer = http.Get("/v2");
  ASSERT_TRUE(answer);
  EXPECT_EQ(Json::parse(answer->body)["version"], version);
}

TEST(VersionTest, TensorctlHelpPrintsTheUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    const CommandResult result = RunCommand({TensorctlPath(), flag});
    EXPECT_EQ(result.exit_code, 0) << flag;
    EXPECT_THAT(result.out, ::testing::StartsWith("usage:\n")) << flag;
    EXPECT_THAT(result.out, HasSubstr("tensorctl conformance [--target ADDR]")) << flag;
    EXPECT_EQ(result.err, "") << flag;
  }
  // A mistake still is a usage error, on stderr.
  const CommandResult wrong = RunCommand({TensorctlPath(), "frobnicate"});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.err, HasSubstr("unknown command \"frobnicate\""));
}

// A Run with `traceparent` (when not null) in its metadata: the answer's
// initial metadata "traceparent", or "" when it has none.
std::string RunWithTraceparent(const TensordProcess& server, const std::string& id,
                               const char* traceparent) {
  auto stub = v1::TensorOp::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  if (traceparent != nullptr) context.AddMetadata("traceparent", traceparent);
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, DocSliceRequest(id), &response), GrpcOk());
  const auto& answered = context.GetServerInitialMetadata();
  const auto found = answered.find("traceparent");
  return found == answered.end() ? "" : std::string(found->second.data(), found->second.size());
}

TEST(TraceTest, ARunJoinsTheCallersTraceInTheLogAndTheAnswer) {
  TensordProcess server({"--backends=cpu"});
  const std::string answered = RunWithTraceparent(server, "traced", kTraceparent);
  // tensord's span: the caller's trace id and flags, a span id of its own.
  std::smatch parts;
  ASSERT_TRUE(std::regex_match(answered, parts, std::regex("00-([0-9a-f]{32})-([0-9a-f]{16})-01")))
      << answered;
  EXPECT_EQ(parts[1], kTraceId);
  const std::string span = parts[2];
  EXPECT_NE(span, kCallerSpan);
  const Json line = Json::parse(AwaitLogLine(server, {"\"id\":\"traced\""}));
  EXPECT_EQ(line["status"], "OK");
  EXPECT_EQ(line["trace_id"], kTraceId);
  EXPECT_EQ(line["span_id"], span);
  EXPECT_EQ(line["parent_span_id"], kCallerSpan);
}

TEST(TraceTest, MalformedOrAbsentTraceparentsAreIgnored) {
  TensordProcess server({"--backends=cpu"});
  EXPECT_EQ(RunWithTraceparent(server, "malformed",
                               "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
            "");
  EXPECT_EQ(RunWithTraceparent(server, "garbage", "not a traceparent"), "");
  EXPECT_EQ(RunWithTraceparent(server, "absent", nullptr), "");
  for (const char* id : {"malformed", "garbage", "absent"}) {
    const std::string line = AwaitLogLine(server, {std::string("\"id\":\"") + id + "\""});
    EXPECT_THAT(line, HasSubstr("\"status\":\"OK\"")) << id;
    EXPECT_THAT(line, Not(HasSubstr("trace_id"))) << id;
  }
}

TEST(TraceTest, TheCppClientSendsTheTraceOfItsScope) {
  TensordProcess server({"--backends=cpu"});
  client::Client client(server.target());
  {
    client::TraceScope scope(kTraceparent);
    EXPECT_EQ(client::TraceScope::Current(), kTraceparent);
    ASSERT_TRUE(client.Run(DocSliceRequest("in-scope")).ok());
  }
  EXPECT_EQ(client::TraceScope::Current(), "");
  ASSERT_TRUE(client.Run(DocSliceRequest("after-scope")).ok());
  const Json traced = Json::parse(AwaitLogLine(server, {"\"id\":\"in-scope\""}));
  EXPECT_EQ(traced["trace_id"], kTraceId);
  EXPECT_EQ(traced["parent_span_id"], kCallerSpan);
  EXPECT_FALSE(Json::parse(AwaitLogLine(server, {"\"id\":\"after-scope\""})).contains("trace_id"));
}

TEST(TraceTest, AnHttpInferJoinsTheCallersTrace) {
  TensordProcess server({"--backends=cpu", "--http_address=127.0.0.1:0"});
  constexpr char kSliceJson[] = R"({"id":"h","inputs":[
    {"name":"input","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]},
    {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
    {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
    {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";
  httplib::Client http("127.0.0.1", server.http_port());
  auto traced = http.Post("/v2/models/slice/infer", {{"traceparent", kTraceparent}}, kSliceJson,
                          "application/json");
  ASSERT_TRUE(traced);
  ASSERT_EQ(traced->status, 200) << traced->body;
  const std::string answered = traced->get_header_value("traceparent");
  ASSERT_THAT(answered,
              ::testing::MatchesRegex(std::string("00-") + kTraceId + "-[0-9a-f]{16}-01"));
  const Json line = Json::parse(AwaitLogLine(server, {"\"method\":\"HttpInfer\"", kTraceId}));
  EXPECT_EQ(line["span_id"], answered.substr(36, 16));
  EXPECT_EQ(line["parent_span_id"], kCallerSpan);

  auto untraced = http.Post("/v2/models/slice/infer", {{"traceparent", "00-zz"}}, kSliceJson,
                            "application/json");
  ASSERT_TRUE(untraced);
  EXPECT_EQ(untraced->status, 200) << untraced->body;
  EXPECT_FALSE(untraced->has_header("traceparent"));
}

}  // namespace
}  // namespace tensorop::testing
