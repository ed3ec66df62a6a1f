// The client and tensorctl against the real tensord: every public conformance
// case through each of the four RPCs and through handles, compared exactly,
// handles (Put, Fetch, Release, ListHandles, kept outputs), and tensorctl's
// commands as a user runs them. (About 1100 lines: one real tensord shared by
// every test here, which a split would start once per file.)
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
#include <utility>
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
using ::tensorop::testing::ViewCasesPath;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
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

// ---- Handles: Put, Fetch, Release, ListHandles, kept outputs ---------------------

class HandleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TensordProcess(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static TensordProcess* server_;
};

TensordProcess* HandleTest::server_ = nullptr;

// int16 [3,4] holding 0x0100 + 0 .. 0x0100 + 11 (every byte distinct from its
// neighbour), packed.
HostTensor Int16Tensor() {
  HostTensor tensor{v1::INT16, {3, 4}, {}, ""};
  for (int i = 0; i < 12; ++i) {
    tensor.data.push_back(static_cast<char>(i));
    tensor.data.push_back(1);
  }
  return tensor;
}

TEST_F(HandleTest, PutThenFetchIsByteExactPackedAndPadded) {
  Client client(server_->target());
  const HostTensor tensor = Int16Tensor();
  // 5-byte chunks: elements straddle chunks.
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle handle,
                       client.Put(tensor, {.ttl_seconds = 60, .chunk_bytes = 5}));
  EXPECT_THAT(handle.id(), MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(handle.dtype(), v1::INT16);
  EXPECT_THAT(handle.sizes(), ElementsAre(3, 4));
  EXPECT_THAT(handle.strides(), ElementsAre(4, 1));
  EXPECT_EQ(handle.backend(), "cpu");
  EXPECT_EQ(handle.device_index(), 0);
  EXPECT_EQ(handle.byte_size(), 24);
  EXPECT_EQ(handle.expires_unix_ms() - handle.last_use_unix_ms(), 60000);

  ASSERT_OK_AND_ASSIGN(const HostTensor packed, client.Fetch(handle.id()));
  EXPECT_EQ(packed.dtype, v1::INT16);
  EXPECT_THAT(packed.sizes, ElementsAre(3, 4));
  EXPECT_THAT(packed.strides, ElementsAre(4, 1));
  EXPECT_TRUE(packed.data == tensor.data);

  // Rows padded to 6 elements: 2 * 6 + 4 = 16 elements, the padding zero.
  const std::vector<int64_t> padded_strides = {6, 1};
  ASSERT_OK_AND_ASSIGN(const HostTensor padded, client.Fetch(handle.id(), padded_strides));
  EXPECT_THAT(padded.strides, ElementsAre(6, 1));
  const std::string zeros(4, '\0');
  EXPECT_TRUE(padded.data == tensor.data.substr(0, 8) + zeros + tensor.data.substr(8, 8) + zeros +
                                 tensor.data.substr(16, 8))
      << padded.data.size();

  // A strided tensor is put with its layout's bytes only (the case format's
  // padded rows carry trailing padding), and keeps its strides.
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle strided,
                       client.Put(HostTensor{v1::UINT8, {2, 3}, {5, 1}, "ABC__DEF__"}));
  EXPECT_THAT(strided.strides(), ElementsAre(5, 1));
  EXPECT_EQ(strided.byte_size(), 8);
  ASSERT_OK_AND_ASSIGN(const HostTensor unpadded, client.Fetch(strided.id()));
  EXPECT_EQ(unpadded.data, "ABCDEF");
  ASSERT_OK(client.Release({handle.id(), strided.id()}));
}

TEST_F(HandleTest, PutRejectsBytesThatDoNotFillTheLayout) {
  Client client(server_->target());
  EXPECT_THAT(client.Put(HostTensor{v1::UINT8, {2, 3}, {}, "ABCDE"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("Put: the stream ended after 5 of the 6 bytes the header's layout "
                          "takes")));
  EXPECT_THAT(client.Put(HostTensor{v1::UINT8, {2}, {}, "AB"},
                         {.backend = v1::OPENCL, .device_index = 1'000'000}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("header.device_index = 1000000 is outside [0, ")));
}

TEST_F(HandleTest, APutOnOpenClFetchesByteExact) {
  Client client(server_->target());
  ASSERT_OK_AND_ASSIGN(
      const v1::TensorHandle handle,
      client.Put(HostTensor{v1::UINT8, {2, 3}, {5, 1}, "ABC__DEF__"}, {.backend = v1::OPENCL}));
  EXPECT_EQ(handle.backend(), "opencl");
  ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(handle.id()));
  EXPECT_EQ(fetched.data, "ABCDEF");
  ASSERT_OK(client.Release({handle.id()}));
}

TEST_F(HandleTest, SliceOfAHandleKeepsItsOutputUntilReleased) {
  Client client(server_->target());
  // int32 [4,4] holding 0..15.
  HostTensor input{v1::INT32, {4, 4}, {}, ""};
  for (int32_t i = 0; i < 16; ++i) input.data.append(reinterpret_cast<const char*>(&i), 4);
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle put, client.Put(input));

  // Rows 1 and 2, columns 0 and 2: [[4, 6], [8, 10]].
  v1::RunRequest request;
  request.set_id("kept-slice");
  request.set_backend(v1::CPU);
  v1::SliceAttrs& slice = *request.mutable_slice();
  slice.mutable_offsets()->Add(1);
  slice.mutable_offsets()->Add(0);
  slice.mutable_window_sizes()->Add(2);
  slice.mutable_window_sizes()->Add(4);
  slice.mutable_window_strides()->Add(1);
  slice.mutable_window_strides()->Add(2);
  (*request.mutable_inputs())["input"].mutable_handle()->set_id(put.id());
  v1::OutputDesc& output = *request.add_outputs();
  output.add_sizes(2);
  output.add_sizes(2);
  output.set_keep(true);

  const std::string expected = [] {
    std::string bytes;
    for (int32_t value : {4, 6, 8, 10}) bytes.append(reinterpret_cast<const char*>(&value), 4);
    return bytes;
  }();
  std::vector<std::string> kept_ids;
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "RunStream" : "Run");
    ASSERT_OK_AND_ASSIGN(const Result result,
                         stream ? client.RunStream(request) : client.Run(request));
    EXPECT_EQ(result.backend, "cpu");
    ASSERT_THAT(result.outputs, SizeIs(1));
    const HostTensor& kept = result.outputs[0];
    ASSERT_TRUE(kept.handle.has_value());
    EXPECT_EQ(kept.data, "");
    EXPECT_EQ(kept.dtype, v1::INT32);
    EXPECT_THAT(kept.sizes, ElementsAre(2, 2));
    EXPECT_THAT(kept.handle->id(), MatchesRegex("[0-9a-f]{32}"));
    EXPECT_NE(kept.handle->id(), put.id());
    EXPECT_EQ(kept.handle->dtype(), v1::INT32);
    EXPECT_THAT(kept.handle->sizes(), ElementsAre(2, 2));
    // A view of the put tensor: its rows 4 apart, every other column, from row 1.
    EXPECT_THAT(kept.handle->strides(), ElementsAre(4, 2));
    EXPECT_EQ(kept.handle->byte_size(), (1 + 4 + 2) * 4);
    EXPECT_EQ(kept.handle->view_of(), put.id());
    EXPECT_EQ(kept.handle->byte_offset(), 16);
    ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(kept.handle->id()));
    EXPECT_THAT(fetched.sizes, ElementsAre(2, 2));
    EXPECT_TRUE(fetched.data == expected);
    kept_ids.push_back(kept.handle->id());
  }

  kept_ids.push_back(put.id());
  ASSERT_OK(client.Release(kept_ids));
  EXPECT_THAT(client.Run(request),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("inputs[\"input\"].handle"), HasSubstr("does not exist"))));
  EXPECT_THAT(client.Fetch(kept_ids[0]),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
  // Releasing again, or an id never made, is still OK.
  EXPECT_TRUE(client.Release({put.id(), "not-a-handle"}).ok());
}

TEST(HandleListTest, ListHandlesPagesThroughTheCallersHandles) {
  TensordProcess server;  // its own: exactly these handles
  Client client(server.target());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(const v1::TensorHandle handle,
                         client.Put(HostTensor{v1::UINT8, {i + 1}, {}, std::string(i + 1, 'x')}));
    ids.push_back(handle.id());
  }
  auto listed_ids = [&client]() {
    std::vector<std::string> listed;
    absl::StatusOr<std::vector<v1::TensorHandle>> handles = client.ListAllHandles();
    EXPECT_TRUE(handles.ok()) << handles.status();
    for (const v1::TensorHandle& handle : handles.value_or(std::vector<v1::TensorHandle>{})) {
      listed.push_back(handle.id());
    }
    return listed;
  };
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(listed_ids(), sorted);  // by id

  ASSERT_OK_AND_ASSIGN(const v1::ListHandlesResponse first, client.ListHandles(2));
  ASSERT_EQ(first.handles_size(), 2);
  EXPECT_EQ(first.handles(0).id(), sorted[0]);
  EXPECT_EQ(first.handles(1).byte_size(), first.handles(1).sizes(0));
  EXPECT_FALSE(first.next_page_token().empty());
  ASSERT_OK_AND_ASSIGN(const v1::ListHandlesResponse second,
                       client.ListHandles(2, first.next_page_token()));
  ASSERT_EQ(second.handles_size(), 1);
  EXPECT_EQ(second.handles(0).id(), sorted[2]);
  EXPECT_EQ(second.next_page_token(), "");
  EXPECT_THAT(client.ListHandles(1001), StatusIs(absl::StatusCode::kInvalidArgument,
                                                 Eq("page_size must be in [0, 1000], got 1001")));

  ASSERT_OK(client.Release(ids));
  EXPECT_THAT(listed_ids(), SizeIs(0));
}

TEST_F(HandleTest, RunWithHandlesMatchesEveryPublicCase) {
  Client client(server_->target());
  for (v1::Backend backend : kBackends) {
    for (const LoadedCase& loaded : PublicCases()) {
      ASSERT_TRUE(loaded.parsed.ok()) << loaded.parsed.status();
      v1::RunRequest request = loaded.parsed->request;
      request.set_backend(backend);
      EXPECT_EQ(FindMismatch(*loaded.parsed, RunWithHandles(client, request)), std::nullopt)
          << v1::Backend_Name(backend) << " " << loaded.name;
    }
  }
  // Nothing is left behind.
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::TensorHandle> left, client.ListAllHandles());
  EXPECT_EQ(left.size(), 0u);
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
      EXPECT_THAT(Lines(result.out), ElementsAre("conformance: 7 passed, 0 failed"));
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

TEST(TensorctlUsageTest, HandleFlagsAreCheckedBeforeAnyCall) {
  const std::string target = "127.0.0.1:1";
  const std::string cases = ConformanceCasesDir();
  for (const auto& [command, message] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"run", "--handles", "--stream", cases},
            "--stream, --chunked, --shared_memory, --handles and --chain exclude each other"},
           {{"run", "--keep", "--handles", cases},
            "--keep excludes --shared_memory, --handles and --chain"},
           {{"put", "--chain", cases}, "--chain is for run and conformance"},
           {{"conformance", "--keep", cases}, "--keep is for run"},
           {{"put", "--handles", cases}, "--handles is for run and conformance"},
           {{"fetch", "--ttl_seconds", "5", "abc"}, "--ttl_seconds is for put"},
           {{"put", "--ttl_seconds", "-1", cases}, "--ttl_seconds is a number of seconds >= 0"},
           {{"fetch", "--strides", "1,x", "abc"}, "--strides is a comma-separated list"},
           {{"fetch", "a", "b"}, "fetch takes one handle ID"},
           {{"release"}, "release takes one or more handle IDs"},
           {{"handles", "abc"}, "handles takes no arguments"},
           {{"put"}, "no case files given"}}) {
    std::vector<std::string> argv = {TensorctlPath(), command[0], "--target", target};
    argv.insert(argv.end(), command.begin() + 1, command.end());
    const CommandResult result = RunCommand(argv);
    SCOPED_TRACE(absl::StrJoin(argv, " "));
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_THAT(result.err, HasSubstr("tensorctl: " + message));
    EXPECT_EQ(result.out, "");
  }
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

// Without --target, tensorctl asks localhost:50051 (tensord's default port).
TEST(TensorctlUsageTest, TargetDefaultsToLocalhost50051) {
  // Only where the port is free: a tensord listening there too (besides the
  // port TensordProcess picks).
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(probe, 0);
  const int on = 1;
  setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(50051);
  const bool port_free = bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(probe);
  if (!port_free) GTEST_SKIP() << "127.0.0.1:50051 is in use here";
  TensordProcess server({"--address=127.0.0.1:50051", "--backends=cpu"});
  const CommandResult health = RunCommand({TensorctlPath(), "health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
  const std::string file = ConformanceCasesDir() + "/split.json";
  const CommandResult run = RunCommand({TensorctlPath(), "run", file});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(run.out, RunCommand({TensorctlPath(), "run", "--target", server.target(), file}).out);
}

// A usage error is one line on stderr: what is wrong, the flag or command a
// slip most likely meant, and the --help to read; exit 2, nothing on stdout.
TEST(TensorctlUsageTest, AUsageErrorIsOneLineWithAHint) {
  const std::string cases = ConformanceCasesDir();
  for (const auto& [argv, line] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"run", "--tagret", "127.0.0.1:1", cases},
            "unknown flag --tagret; did you mean --target? (tensorctl run --help)"},
           {{"conformance", "--stram", cases},
            "unknown flag --stram; did you mean --stream? (tensorctl conformance --help)"},
           {{"put", "--shared-memory", cases},
            "unknown flag --shared-memory; did you mean --shared_memory? (tensorctl put --help)"},
           {{"fetch", "-target", "h:1", "abc"},
            "unknown flag -target; did you mean --target? (tensorctl fetch --help)"},
           {{"health", "--servce", "tensorop.cpu"},
            "unknown flag --servce; did you mean --service? (tensorctl health --help)"},
           {{"run", "--frobnicate", cases}, "unknown flag --frobnicate (tensorctl run --help)"},
           {{"conformace", cases},
            "unknown command \"conformace\"; did you mean conformance? (tensorctl --help)"},
           {{"frobnicate"},
            "unknown command \"frobnicate\"; the commands are run, conformance, encode, health, "
            "put, fetch, release, handles, shm-register, shm-unregister or shm-status "
            "(tensorctl --help)"},
           {{},
            "the first word is a command: run, conformance, encode, health, put, fetch, release, "
            "handles, shm-register, shm-unregister or shm-status (tensorctl --help)"},
           {{"run", "--keep", "--chain", cases},
            "--keep excludes --shared_memory, --handles and --chain (tensorctl run --help)"},
           {{"encode", cases + "/slice.json"},
            "encode needs --case NAME (tensorctl encode --help)"}}) {
    std::vector<std::string> command = {TensorctlPath()};
    command.insert(command.end(), argv.begin(), argv.end());
    const CommandResult result = RunCommand(command);
    SCOPED_TRACE(absl::StrJoin(command, " "));
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "tensorctl: " + line + "\n");
    EXPECT_EQ(result.out, "");
  }
}

// tensorctl COMMAND --help (or tensorctl help COMMAND): that command's usage
// on stdout, exit 0: its synopsis, what it does, each of its flags, an example.
TEST(TensorctlUsageTest, EachCommandHasItsOwnHelp) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"run",
       {"--target ADDR", "--backend B", "--stream", "--chunked", "--shared_memory", "--handles",
        "--chain", "--keep", "--tls", "--token_file FILE"}},
      {"conformance", {"--target ADDR", "--backend B", "--stream", "--chain", "--ca_file PEM"}},
      {"encode", {"--case NAME", "--backend B"}},
      {"health", {"--target ADDR", "--service NAME", "--cert_file PEM", "--key_file PEM"}},
      {"put", {"--target ADDR", "--backend B", "--ttl_seconds N"}},
      {"fetch", {"--target ADDR", "--strides S,S,..."}},
      {"release", {"--target ADDR"}},
      {"handles", {"--target ADDR"}},
      {"shm-register", {"--target ADDR", "--region NAME", "--key KEY", "--byte_size N"}},
      {"shm-unregister", {"--target ADDR", "--region NAME"}},
      {"shm-status", {"--target ADDR", "--region NAME"}}};
  for (const auto& [command, flags] : commands) {
    SCOPED_TRACE(command);
    const CommandResult result = RunCommand({TensorctlPath(), command, "--help"});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_EQ(result.err, "");
    EXPECT_THAT(result.out, ::testing::StartsWith("usage: tensorctl " + command + " "));
    EXPECT_THAT(result.out, HasSubstr("\nflags:\n"));
    EXPECT_THAT(result.out, HasSubstr("\nexample:\n  tensorctl " + command + " "));
    for (const std::string& flag : flags) EXPECT_THAT(result.out, HasSubstr("\n  " + flag + " "));
    // Not the global usage, and the same text however asked for.
    EXPECT_THAT(result.out, Not(HasSubstr("tensorctl --version")));
    EXPECT_EQ(RunCommand({TensorctlPath(), "help", command}).out, result.out);
    EXPECT_EQ(RunCommand({TensorctlPath(), command, "-h", "x.json"}).out, result.out);
  }
  const CommandResult run = RunCommand({TensorctlPath(), "run", "--help"});
  EXPECT_THAT(run.out, HasSubstr("\n  --target ADDR        the server (default localhost:50051)"));
  EXPECT_THAT(run.out, HasSubstr("\nexample:\n  tensorctl run --target localhost:50051 "));
  // Encode does not connect: no target, no security flags.
  const CommandResult encode = RunCommand({TensorctlPath(), "encode", "--help"});
  EXPECT_THAT(encode.out, Not(HasSubstr("--target")));
  EXPECT_THAT(encode.out, Not(HasSubstr("--tls")));
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

// A loopback port bound but never listening: connections to it are refused.
class RefusedPort {
 public:
  RefusedPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot bind a loopback port";
    }
    target_ = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  }
  ~RefusedPort() { close(fd_); }
  const std::string& target() const { return target_; }

 private:
  int fd_ = -1;
  std::string target_;
};

// A server that cannot be reached is one line on stderr, "tensorctl: cannot
// connect to ADDR: " and gRPC's reason, and exit 1, for every command that
// connects (health keeps its own answer, above): no line per case, no
// failures counted.
TEST(TensorctlUsageTest, AnUnreachableServerIsOneLineAndExitOne) {
  RefusedPort refused;
  const std::string cases = ConformanceCasesDir();
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"run", cases + "/split.json"},
                                             {"run", "--stream", cases},
                                             {"conformance", cases},
                                             {"conformance", "--handles", cases},
                                             {"put", cases + "/slice.json"},
                                             {"fetch", "0123456789abcdef0123456789abcdef"},
                                             {"release", "0123456789abcdef0123456789abcdef"},
                                             {"handles"},
                                             {"shm-status"},
                                             {"shm-unregister", "--region", "r"}}) {
    std::vector<std::string> command = {TensorctlPath(), argv[0], "--target", refused.target()};
    command.insert(command.end(), argv.begin() + 1, argv.end());
    const CommandResult result = RunCommand(command);
    SCOPED_TRACE(absl::StrJoin(command, " "));
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_THAT(result.err,
                ::testing::StartsWith("tensorctl: cannot connect to " + refused.target() + ": "));
    EXPECT_THAT(result.err, HasSubstr("Connection refused"));
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  // A Unix socket that is not there, likewise.
  const CommandResult unix_socket = RunCommand(
      {TensorctlPath(), "conformance", "--target", "unix:///nonexistent/tensord.sock", cases});
  EXPECT_EQ(unix_socket.exit_code, 1);
  EXPECT_EQ(unix_socket.out, "");
  EXPECT_THAT(
      unix_socket.err,
      ::testing::StartsWith("tensorctl: cannot connect to unix:///nonexistent/tensord.sock: "));
}

// A server that accepts connections and never answers: the first contact
// gives up at the connect deadline, in one line, not at each call's.
TEST(TensorctlUsageTest, AServerThatNeverAnswersIsOneLineAtTheConnectDeadline) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 16), 0);  // the kernel completes handshakes; nobody speaks HTTP/2
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string target = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  const CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target", target, ConformanceCasesDir()});
  close(fd);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, "tensorctl: cannot connect to " + target + ": no answer within 5s\n");
}

// What tensorctl itself cannot read is told on stderr as its own error, not
// printed as a server's answer: a case without a name (run, put, encode), a
// case file that is not JSON or not there. No server is asked.
TEST(TensorctlUsageTest, ACaseTensorctlCannotReadIsItsOwnErrorOnStderr) {
  TempFiles files;
  const std::string nameless = files.Write(
      R"({"op": "split", "attrs": {"axis": 0},
    "inputs": {"input": {"dtype": "int32", "sizes": [2], "data": [1, 2]}},
    "outputs": [{"sizes": [2]}], "expect": {"error": "INVALID_ARGUMENT"}})",
      "tensorctl-nameless", ".json");
  RefusedPort refused;  // never asked: every case is unreadable
  for (const char* command : {"run", "put"}) {
    const CommandResult result =
        RunCommand({TensorctlPath(), command, "--target", refused.target(), nameless});
    SCOPED_TRACE(command);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, "tensorctl: " + nameless + ": case #0: missing field \"name\"\n");
  }
  const CommandResult encode = RunCommand({TensorctlPath(), "encode", nameless, "--case", "#0"});
  EXPECT_EQ(encode.exit_code, 1);
  EXPECT_EQ(encode.out, "");
  EXPECT_EQ(encode.err, "tensorctl: " + nameless + ": case #0: missing field \"name\"\n");

  const std::string broken = files.Write("[{\"name\": \"x\"", "tensorctl-broken", ".json");
  const CommandResult not_json = RunCommand({TensorctlPath(), "run", broken});
  EXPECT_EQ(not_json.exit_code, 2);
  EXPECT_EQ(not_json.out, "");
  EXPECT_THAT(not_json.err, ::testing::StartsWith("tensorctl: " + broken + ": "));
  EXPECT_THAT(not_json.err, HasSubstr("parse error"));
  const CommandResult missing = RunCommand({TensorctlPath(), "run", "/nonexistent/cases.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.out, "");
  EXPECT_EQ(missing.err, "tensorctl: /nonexistent/cases.json: No such file or directory\n");
}

}  // namespace
}  // namespace tensorop::client
