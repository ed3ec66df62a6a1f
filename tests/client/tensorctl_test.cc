// tensorctl as a user runs it against a real tensord: conformance in every
// style, run, put, fetch, handles, release, encode, health, replicas. Its
// usage errors, help and unreachable servers: tensorctl_usage_test.cc.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/case_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/public_cases.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::CommandResult;
using ::tensorop::testing::ConformanceCasesDir;
using ::tensorop::testing::RunCommand;
using ::tensorop::testing::TempFiles;
using ::tensorop::testing::TensorctlPath;
using ::tensorop::testing::TensordProcess;
using ::tensorop::testing::ViewCasesPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::SizeIs;

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
                                                {"--chunked"},
                                                {"--backend", "cpu", "--handles"},
                                                {"--backend", "opencl", "--handles"},
                                                {"--backend", "cpu", "--chain"},
                                                {"--backend", "opencl", "--chain"}}) {
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

// Cases of several steps, windows composed over padded, zero, permuted and
// negative strides and scatters before and after them (tests/conformance/):
// one RunChain with --chain (its windows fused into views), else a call per
// step, through handles with --handles (kept windows are views).
TEST_F(TensorctlTest, ViewCasesPassInEveryStyleOnBothBackends) {
  for (const char* backend : {"cpu", "opencl"}) {
    for (const char* style : {"--stream", "--shared_memory", "--handles", "--chain"}) {
      const std::vector<std::string> command = {
          TensorctlPath(), "conformance", "--target", server_->target(),
          "--backend",     backend,       style,      ViewCasesPath()};
      const CommandResult result = RunCommand(command);
      SCOPED_TRACE(absl::StrJoin(command, " "));
      EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
      EXPECT_THAT(Lines(result.out), ElementsAre("conformance: 16 passed, 0 failed"));
    }
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

TEST_F(TensorctlTest, PutFetchHandlesAndReleaseAHandle) {
  const std::string file = CaseFile({"slice/layout_padded_rows"});
  const CommandResult put = RunCommand(
      {TensorctlPath(), "put", "--target", server_->target(), "--ttl_seconds", "120", file});
  ASSERT_EQ(put.exit_code, 0) << put.out << put.err;
  const std::vector<std::string> put_lines = Lines(put.out);
  ASSERT_THAT(put_lines, SizeIs(1));
  const std::vector<std::string> fields = absl::StrSplit(put_lines[0], absl::MaxSplits(' ', 2));
  ASSERT_THAT(fields, SizeIs(3));
  EXPECT_EQ(fields[0], "slice/layout_padded_rows:input");
  const std::string id = fields[1];
  EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
  const nlohmann::json handle = nlohmann::json::parse(fields[2]);
  EXPECT_EQ(handle["id"], id);
  EXPECT_EQ(handle["dtype"], "uint8");
  EXPECT_EQ(handle["sizes"], nlohmann::json::parse("[2,3]"));
  EXPECT_EQ(handle["strides"], nlohmann::json::parse("[5,1]"));
  EXPECT_EQ(handle["byte_size"], 8);
  EXPECT_EQ(handle["expires_unix_ms"].get<int64_t>() - handle["last_use_unix_ms"].get<int64_t>(),
            120000);

  // A case file may name the handle as an input.
  const std::string case_file =
      files_.Write(absl::StrCat(R"({"name": "slice/by_handle", "op": "slice",
    "attrs": {"offsets": [0, 1], "window_sizes": [2, 2], "window_strides": [1, 1]},
    "inputs": {"input": {"handle": ")",
                                id, R"("}},
    "outputs": [{"sizes": [2, 2]}],
    "expect": {"outputs": [{"dtype": "uint8", "sizes": [2, 2], "data": [66, 67, 69, 70]}]}})"),
                   "tensorctl-handle-case", ".json");
  const CommandResult by_handle =
      RunCommand({TensorctlPath(), "conformance", "--target", server_->target(), case_file});
  EXPECT_EQ(by_handle.exit_code, 0) << by_handle.out << by_handle.err;
  EXPECT_THAT(Lines(by_handle.out), ElementsAre("conformance: 1 passed, 0 failed"));

  const CommandResult fetch =
      RunCommand({TensorctlPath(), "fetch", "--target", server_->target(), id});
  EXPECT_EQ(fetch.exit_code, 0) << fetch.err;
  EXPECT_EQ(fetch.out,
            R"({"dtype":"uint8","sizes":[2,3],"strides":[3,1],"data":[65,66,67,68,69,70]})"
            "\n");
  const CommandResult strided =
      RunCommand({TensorctlPath(), "fetch", "--target", server_->target(), "--strides", "1,2", id});
  EXPECT_EQ(strided.exit_code, 0) << strided.err;
  EXPECT_EQ(strided.out,
            R"({"dtype":"uint8","sizes":[2,3],"strides":[1,2],"data":[65,66,67,68,69,70]})"
            "\n");

  const CommandResult handles =
      RunCommand({TensorctlPath(), "handles", "--target", server_->target()});
  EXPECT_EQ(handles.exit_code, 0) << handles.err;
  // One JSON line per handle, this one among them.
  int listed = 0;
  for (const std::string& line : Lines(handles.out)) {
    listed += nlohmann::json::parse(line)["id"] == id ? 1 : 0;
  }
  EXPECT_EQ(listed, 1) << handles.out;

  const CommandResult release =
      RunCommand({TensorctlPath(), "release", "--target", server_->target(), id});
  EXPECT_EQ(release.exit_code, 0) << release.err;
  EXPECT_EQ(release.out, "released " + id + "\n");
  const CommandResult gone =
      RunCommand({TensorctlPath(), "fetch", "--target", server_->target(), id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.out, ::testing::StartsWith("NOT_FOUND: "));
  EXPECT_THAT(gone.out, HasSubstr("does not exist"));
  EXPECT_THAT(RunCommand({TensorctlPath(), "handles", "--target", server_->target()}).out,
              Not(HasSubstr(id)));
}

TEST_F(TensorctlTest, RunKeepPrintsHandlesWhoseBytesAreTheOutputs) {
  const std::string file = CaseFile({"slice/doc_example_1_positive_strides"});
  for (const char* style : {"", "--stream"}) {
    SCOPED_TRACE(style);
    std::vector<std::string> command = {TensorctlPath(),   "run",       "--keep", "--target",
                                        server_->target(), "--backend", "cpu"};
    if (*style != '\0') command.push_back(style);
    command.push_back(file);
    const CommandResult run = RunCommand(command);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::vector<std::string> lines = Lines(run.out);
    ASSERT_THAT(lines, SizeIs(1)) << run.out;
    const nlohmann::json output = nlohmann::json::parse(lines[0])["outputs"][0];
    EXPECT_FALSE(output.contains("data"));
    EXPECT_EQ(output["sizes"], nlohmann::json::parse("[1,1,2,2]"));
    const std::string id = output["handle"]["id"].get<std::string>();
    EXPECT_EQ(output["handle"]["byte_size"], 16);
    const CommandResult fetch =
        RunCommand({TensorctlPath(), "fetch", "--target", server_->target(), id});
    EXPECT_EQ(fetch.exit_code, 0) << fetch.err;
    EXPECT_EQ(nlohmann::json::parse(fetch.out)["data"],
              nlohmann::json::parse("[2.0,4.0,10.0,12.0]"));
    EXPECT_EQ(RunCommand({TensorctlPath(), "release", "--target", server_->target(), id}).exit_code,
              0);
  }
}

// A file with a case tensorctl cannot read among good ones: run answers the
// good ones on stdout as the server did, tells the other on stderr, exits 1.
TEST_F(TensorctlTest, RunTellsAnUnreadableCaseApartFromTheServersAnswers) {
  const std::string file = files_.Write(
      R"([{"name": "split/fine", "op": "split", "attrs": {"axis": 0},
      "inputs": {"input": {"dtype": "int32", "sizes": [2], "data": [1, 2]}},
      "outputs": [{"sizes": [2]}],
      "expect": {"outputs": [{"dtype": "int32", "sizes": [2], "data": [1, 2]}]}},
    {"op": "split"},
    {"name": "split/refused", "op": "split", "attrs": {"axis": 3},
      "inputs": {"input": {"dtype": "int32", "sizes": [2], "data": [1, 2]}},
      "outputs": [{"sizes": [2]}], "expect": {"error": "INVALID_ARGUMENT"}}])",
      "tensorctl-mixed", ".json");
  const CommandResult result =
      RunCommand({TensorctlPath(), "run", "--target", server_->target(), file});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "tensorctl: " + file + ": case #1: missing field \"name\"\n");
  const std::vector<std::string> lines = Lines(result.out);
  ASSERT_THAT(lines, SizeIs(2)) << result.out;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["name"], "split/fine");
  EXPECT_EQ(nlohmann::json::parse(lines[0])["outputs"][0]["data"], nlohmann::json::parse("[1,2]"));
  // The server's own refusal stays a JSON line.
  const nlohmann::json refused = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(refused["name"], "split/refused");
  EXPECT_EQ(refused["error"]["code"], "INVALID_ARGUMENT");
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

}  // namespace
}  // namespace tensorop::client
