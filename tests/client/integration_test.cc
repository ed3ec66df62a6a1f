// The client and tensorctl against the real tensord: every public conformance
// case through each of the four RPCs, compared exactly, and tensorctl's commands
// as a user runs them.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/case_compare.h"
#include "client/case_format.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::CommandResult;
using ::tensorop::testing::ConformanceCasesDir;
using ::tensorop::testing::RunCommand;
using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TempFiles;
using ::tensorop::testing::TensorctlPath;
using ::tensorop::testing::TensordProcess;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

// The public cases, read once. A case that does not parse fails its test (and
// LoadCasesTest.ReadsEveryPublicCase says why).
const std::vector<LoadedCase>& PublicCases() {
  static const auto* const cases = [] {
    absl::StatusOr<std::vector<LoadedCase>> loaded = LoadCases(ConformanceCasesDir());
    if (!loaded.ok()) {
      std::fprintf(stderr, "cannot load the public cases: %s\n",
                   loaded.status().ToString().c_str());
      return new std::vector<LoadedCase>();
    }
    return new std::vector<LoadedCase>(*std::move(loaded));
  }();
  return *cases;
}

std::vector<std::string> PublicCaseNames() {
  std::vector<std::string> names;
  for (const LoadedCase& loaded : PublicCases()) names.push_back(loaded.name);
  return names;
}

const LoadedCase& PublicCase(const std::string& name) {
  for (const LoadedCase& loaded : PublicCases()) {
    if (loaded.name == name) return loaded;
  }
  std::abort();
}

// ---- Every public case through every call ------------------------------------

enum class Call { kRun, kRunStream, kRunChunked, kRunBidi };

std::string CallName(Call call) {
  switch (call) {
    case Call::kRun:
      return "Run";
    case Call::kRunStream:
      return "RunStream";
    case Call::kRunChunked:
      return "RunChunked";
    case Call::kRunBidi:
      return "RunBidi";
  }
  return "";
}

// For gtest's messages: the call's name, not its bytes.
void PrintTo(Call call, std::ostream* os) { *os << CallName(call); }

// Every backend: the oneTBB workers and the OpenCL device pool (PoCL here).
constexpr v1::Backend kBackends[] = {v1::CPU, v1::OPENCL};

class PublicCaseTest : public ::testing::TestWithParam<std::tuple<Call, v1::Backend, std::string>> {
 protected:
  static void SetUpTestSuite() { server_ = new TensordProcess(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    bidi_results_.clear();
  }

  // Every parsed public case in one RunBidi stream per backend (ids are the
  // names), once.
  static const absl::StatusOr<Result>& BidiResult(v1::Backend backend, const std::string& name) {
    std::map<std::string, absl::StatusOr<Result>>& results_by_name = bidi_results_[backend];
    if (results_by_name.empty()) {
      std::vector<v1::RunRequest> requests;
      for (const LoadedCase& loaded : PublicCases()) {
        if (!loaded.parsed.ok()) continue;
        requests.push_back(loaded.parsed->request);
        requests.back().set_backend(backend);
      }
      Client client(server_->target());
      std::vector<absl::StatusOr<Result>> results = client.RunBidi(requests);
      for (size_t i = 0; i < requests.size(); ++i) {
        results_by_name.emplace(requests[i].id(), std::move(results[i]));
      }
    }
    return results_by_name.at(name);
  }

  static TensordProcess* server_;
  static std::map<v1::Backend, std::map<std::string, absl::StatusOr<Result>>> bidi_results_;
};

TensordProcess* PublicCaseTest::server_ = nullptr;
std::map<v1::Backend, std::map<std::string, absl::StatusOr<Result>>> PublicCaseTest::bidi_results_;

TEST_P(PublicCaseTest, MatchesExactly) {
  const auto& [call, backend, name] = GetParam();
  const LoadedCase& loaded = PublicCase(name);
  ASSERT_TRUE(loaded.parsed.ok()) << loaded.parsed.status();
  const Case& c = *loaded.parsed;
  v1::RunRequest request = c.request;
  request.set_backend(backend);
  Client client(server_->target());
  absl::StatusOr<Result> result;
  switch (call) {
    case Call::kRun:
      result = client.Run(request);
      break;
    case Call::kRunStream:
      result = client.RunStream(request);
      break;
    case Call::kRunChunked:
      // 3 bytes: every element of every dtype but int8/uint8 straddles chunks.
      result = client.RunChunked(request, 3);
      break;
    case Call::kRunBidi:
      result = BidiResult(backend, name);
      break;
  }
  EXPECT_EQ(FindMismatch(c, result), std::nullopt) << "server log:\n" << server_->Log();
  if (result.ok()) {
    // Where it ran is where it was asked to run: the device, not a fallback.
    EXPECT_THAT(result->backend, MatchesRegex(backend == v1::OPENCL ? "opencl:.+" : "cpu"));
  }
}

std::string TestName(const ::testing::TestParamInfo<PublicCaseTest::ParamType>& info) {
  std::string name = absl::StrCat(CallName(std::get<0>(info.param)), "_",
                                  absl::AsciiStrToLower(v1::Backend_Name(std::get<1>(info.param))),
                                  "_", std::get<2>(info.param));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Conformance, PublicCaseTest,
                         ::testing::Combine(::testing::Values(Call::kRun, Call::kRunStream,
                                                              Call::kRunChunked, Call::kRunBidi),
                                            ::testing::ValuesIn(kBackends),
                                            ::testing::ValuesIn(PublicCaseNames())),
                         TestName);

// ---- Transfers larger than one message --------------------------------------

// A split of one uint8 [bytes] input into one output: a copy.
v1::RunRequest CopyRequest(int64_t bytes) {
  v1::RunRequest request;
  request.set_id("copy");
  request.mutable_split()->set_axis(0);
  request.add_outputs()->add_sizes(bytes);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(bytes);
  std::string& data = *input.mutable_data();
  data.resize(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) data[i] = static_cast<char>((i * 7919) >> 3);
  return request;
}

TEST(LargeTransferTest, ChunkedUploadAndStreamedResultNeedNoRaisedMessageLimit) {
  // The server accepts messages of at most 2 MiB; the tensor is 8 MiB each way.
  TensordProcess server({"--max_message_bytes=2097152"});
  constexpr int64_t kBytes = int64_t{8} << 20;
  const v1::RunRequest request = CopyRequest(kBytes);
  int64_t uploaded = 0;
  int64_t downloaded = 0;
  ClientOptions options;
  options.progress = [&](const Progress& p) {
    (p.direction == Progress::Direction::kUpload ? uploaded : downloaded) = p.done;
  };
  Client client(server.target(), options);

  ASSERT_OK_AND_ASSIGN(const Result result, client.RunChunked(request, int64_t{1} << 20));
  ASSERT_THAT(result.outputs, SizeIs(1));
  EXPECT_THAT(result.outputs[0].sizes, ElementsAre(kBytes));
  EXPECT_TRUE(result.outputs[0].data == request.inputs().at("input").data());
  EXPECT_EQ(uploaded, kBytes);
  EXPECT_EQ(downloaded, kBytes);

  // The same request in one message is over the server's limit.
  EXPECT_THAT(client.Run(request),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("larger than max")));
}

// ---- tensorctl ----------------------------------------------------------------

class TensorctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TensordProcess(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // A file holding the named public cases (as one JSON array), removed at the end.
  std::string CaseFile(const std::vector<std::string>& names) {
    nlohmann::json cases = nlohmann::json::array();
    for (const char* file : {"slice.json", "split.json"}) {
      std::ifstream in(ConformanceCasesDir() + "/" + file);
      for (nlohmann::json& c : nlohmann::json::parse(in)) {
        const std::string name = c["name"].get<std::string>();
        if (std::find(names.begin(), names.end(), name) != names.end()) cases.push_back(c);
      }
    }
    EXPECT_THAT(cases, SizeIs(names.size()));
    return files_.Write(cases.dump(), "tensorctl-cases", ".json");
  }

  static std::vector<std::string> Lines(const std::string& text) {
    return absl::StrSplit(text, '\n', absl::SkipEmpty());
  }

  static TensordProcess* server_;
  TempFiles files_;
};

TensordProcess* TensorctlTest::server_ = nullptr;

TEST_F(TensorctlTest, ConformancePassesEveryPublicCase) {
  const std::string summary =
      absl::StrCat("conformance: ", PublicCases().size(), " passed, 0 failed");
  for (const std::vector<std::string>& style : {std::vector<std::string>{"--backend", "cpu"},
                                                {"--backend", "opencl"},
                                                {"--backend", "cpu", "--stream"},
                                                {"--backend", "opencl", "--stream"},
                                                {"--chunked"}}) {
    std::vector<std::string> command = {TensorctlPath(), "conformance", "--target",
                                        server_->target()};
    command.insert(command.end(), style.begin(), style.end());
    command.push_back(ConformanceCasesDir());
    const CommandResult result = RunCommand(command);
    SCOPED_TRACE(absl::StrJoin(command, " "));
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_THAT(Lines(result.out), ElementsAre(summary));
  }
}

TEST_F(TensorctlTest, ConformanceReportsAFailureAndExitsOne) {
  // A case whose expectation is wrong: the server's right answer must fail it.
  const std::string path = files_.Write(
      R"({"name": "split/wrong", "op": "split", "attrs": {"axis": 0},
    "inputs": {"input": {"dtype": "int32", "sizes": [2], "data": [1, 2]}},
    "outputs": [{"sizes": [2]}],
    "expect": {"outputs": [{"dtype": "int32", "sizes": [2], "data": [1, 3]}]}})",
      "tensorctl-wrong", ".json");
  const CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target", server_->target(), path});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(Lines(result.out),
              ElementsAre("FAIL split/wrong: outputs[0]: element [1] is 2, expected 3 (1 of 2 "
                          "elements differ)",
                          "conformance: 0 passed, 1 failed"));
}

TEST_F(TensorctlTest, RunPrintsOneJsonLinePerCase) {
  const std::string file =
      CaseFile({"slice/doc_example_1_positive_strides", "slice/invalid_zero_stride"});
  const CommandResult result =
      RunCommand({TensorctlPath(), "run", "--target", server_->target(), "--backend", "cpu", file});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_THAT(lines, SizeIs(2)) << result.out;

  const nlohmann::json valid = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(valid["name"], "slice/doc_example_1_positive_strides");
  EXPECT_EQ(valid["backend"], "cpu");
  ASSERT_EQ(valid["outputs"].size(), 1u);
  const nlohmann::json& output = valid["outputs"][0];
  EXPECT_EQ(output["dtype"], "float32");
  EXPECT_EQ(output["sizes"], nlohmann::json::parse("[1,1,2,2]"));
  EXPECT_EQ(output["strides"], nlohmann::json::parse("[4,4,2,1]"));
  EXPECT_EQ(output["data"], nlohmann::json::parse("[2.0,4.0,10.0,12.0]"));
  EXPECT_FALSE(valid.contains("error"));

  const nlohmann::json invalid = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(invalid["name"], "slice/invalid_zero_stride");
  EXPECT_EQ(invalid["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ(invalid["error"]["message"], "slice.window_strides[1] must not be 0");
  EXPECT_FALSE(invalid.contains("outputs"));
}

TEST_F(TensorctlTest, RunStreamPrintsTheSameLines) {
  const std::string file = CaseFile({"slice/int64_exact", "split/doc_example_1_axis_2"});
  const CommandResult unary =
      RunCommand({TensorctlPath(), "run", "--target", server_->target(), file});
  const CommandResult stream =
      RunCommand({TensorctlPath(), "run", "--stream", "--target", server_->target(), file});
  EXPECT_EQ(unary.exit_code, 0) << unary.err;
  EXPECT_EQ(stream.exit_code, 0) << stream.err;
  EXPECT_EQ(stream.out, unary.out);
  const std::vector<std::string> lines = Lines(unary.out);
  ASSERT_THAT(lines, SizeIs(2));
  // 64-bit values beyond 2^53 come back as strings.
  EXPECT_EQ(nlohmann::json::parse(lines[0])["outputs"][0]["data"],
            nlohmann::json::parse(R"([7, "-4611686018427387907", "4611686018427387905"])"));
}

TEST_F(TensorctlTest, EncodeWritesTheCasesRunRequest) {
  const CommandResult result =
      RunCommand({TensorctlPath(), "encode", ConformanceCasesDir() + "/slice.json", "--case",
                  "slice/layout_padded_rows"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  v1::RunRequest decoded;
  ASSERT_TRUE(decoded.ParseFromString(result.out));
  const LoadedCase& loaded = PublicCase("slice/layout_padded_rows");
  ASSERT_TRUE(loaded.parsed.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(decoded, loaded.parsed->request))
      << decoded.DebugString();
  EXPECT_EQ(decoded.id(), "slice/layout_padded_rows");
  EXPECT_EQ(decoded.inputs().at("input").data(), std::string("ABC\0\0DEF\0\0", 10));
}

TEST_F(TensorctlTest, EncodeOfAnUnknownCaseIsAUsageError) {
  const CommandResult result = RunCommand(
      {TensorctlPath(), "encode", ConformanceCasesDir() + "/slice.json", "--case", "slice/nope"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.out, "");
  EXPECT_THAT(result.err, HasSubstr("no case named \"slice/nope\""));
}

TEST_F(TensorctlTest, HealthPrintsServingAndExitsZero) {
  const CommandResult server =
      RunCommand({TensorctlPath(), "health", "--target", server_->target()});
  EXPECT_EQ(server.exit_code, 0) << server.err;
  EXPECT_EQ(server.out, "SERVING\n");
  const CommandResult cpu = RunCommand(
      {TensorctlPath(), "health", "--target", server_->target(), "--service", "tensorop.cpu"});
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.out, "SERVING\n");
}

TEST_F(TensorctlTest, HealthOfAnUnknownServiceExitsOne) {
  const CommandResult result = RunCommand(
      {TensorctlPath(), "health", "--target", server_->target(), "--service", "tensorop.tpu"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "NOT_FOUND: service name unknown\n");
}

TEST_F(TensorctlTest, ConformanceThroughAListOfReplicas) {
  // The same server twice is still a list: the ipv4: target and its
  // round_robin channel carry every case.
  const CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target",
                  server_->target() + "," + server_->target(), ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.out, absl::StrCat("conformance: ", PublicCases().size(), " passed, 0 failed\n"));
}

TEST_F(TensorctlTest, ConformanceThroughADnsName) {
  // gRPC's DNS resolver, as with dns:///tensord-headless.NS.svc.cluster.local.
  const std::string port = server_->target().substr(server_->target().rfind(':') + 1);
  const CommandResult result = RunCommand({TensorctlPath(), "conformance", "--target",
                                           "dns:///localhost:" + port, ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.out, absl::StrCat("conformance: ", PublicCases().size(), " passed, 0 failed\n"));
}

TEST(TensorctlUsageTest, HealthNotServingOrUnreachableExitsOne) {
  TensordProcess cpu_only({"--backends=cpu"});
  const CommandResult opencl = RunCommand(
      {TensorctlPath(), "health", "--target", cpu_only.target(), "--service", "tensorop.opencl"});
  EXPECT_EQ(opencl.exit_code, 1);
  EXPECT_EQ(opencl.out, "NOT_SERVING\n");
  const std::string target = cpu_only.target();
  ASSERT_EQ(cpu_only.Stop(), 0);
  const CommandResult gone = RunCommand({TensorctlPath(), "health", "--target", target});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.out, ::testing::StartsWith("UNAVAILABLE: "));
}

TEST(TensorctlUsageTest, HealthSaysNotServingWhileTheServerDrains) {
  TensordProcess server({"--drain_seconds=3", "--backends=cpu"});
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  CommandResult result;
  for (int i = 0; i < 100; ++i) {
    result = RunCommand({TensorctlPath(), "health", "--target", server.target()});
    if (result.out != "SERVING\n") break;
  }
  // Not UNAVAILABLE: tensorctl health reaches a replica its health excludes.
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "NOT_SERVING\n");
}

TEST(TensorctlUsageTest, MalformedTargetListIsAUsageError) {
  const CommandResult result = RunCommand({TensorctlPath(), "conformance", "--target",
                                           "127.0.0.1:1,replica-b:2", ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensorctl: target entry 1 \"replica-b:2\" is not an IP "
                                    "address with a port"));
  const CommandResult health =
      RunCommand({TensorctlPath(), "health", "--target", "h:1", ConformanceCasesDir()});
  EXPECT_EQ(health.exit_code, 2);
  EXPECT_THAT(health.err, HasSubstr("tensorctl: health takes no case files"));
}

TEST(TensorctlUsageTest, MissingTargetIsAUsageError) {
  const CommandResult result = RunCommand({TensorctlPath(), "run", ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensorctl: --target ADDR is required\nusage:"));
  const CommandResult unknown = RunCommand({TensorctlPath(), "frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("tensorctl: unknown command \"frobnicate\""));
}

// The same names as tensord's --backend (proto/backend_name.h).
TEST(TensorctlUsageTest, UnknownBackendIsAUsageError) {
  for (const std::string backend : {"gpu", "CPU", "opencl:0", ""}) {
    const CommandResult result = RunCommand({TensorctlPath(), "run", "--target", "127.0.0.1:1",
                                             "--backend", backend, ConformanceCasesDir()});
    EXPECT_EQ(result.exit_code, 2) << backend;
    EXPECT_THAT(result.err,
                HasSubstr("tensorctl: --backend is auto, cpu or opencl, not \"" + backend + "\""));
  }
  const CommandResult tensord = RunCommand({::tensorop::testing::TensordPath(), "--backend=gpu"});
  EXPECT_EQ(tensord.exit_code, 2);
  EXPECT_THAT(tensord.err, HasSubstr("tensord: --backend=gpu: expected auto, cpu or opencl"));
}

TEST(TensorctlUsageTest, RunExitsNonZeroWhenNothingListens) {
  // Bound but never listening: connections are refused.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string file = ConformanceCasesDir() + "/split.json";
  const CommandResult result =
      RunCommand({TensorctlPath(), "run", "--target",
                  absl::StrCat("127.0.0.1:", ntohs(address.sin_port)), file});
  close(fd);
  EXPECT_EQ(result.exit_code, 1);
  ASSERT_OK_AND_ASSIGN(const std::vector<LoadedCase> cases, LoadCases(file));
  const std::vector<std::string> lines = absl::StrSplit(result.out, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(cases.size()));
  for (const std::string& line : lines) {
    EXPECT_EQ(nlohmann::json::parse(line)["error"]["code"], "UNAVAILABLE") << line;
  }
}

}  // namespace
}  // namespace tensorop::client
