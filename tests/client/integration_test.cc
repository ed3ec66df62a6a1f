// The client against the real tensord: every public conformance case through
// each of the four RPCs and through handles, compared exactly, and handles
// (Put, Fetch, Release, ListHandles, kept outputs). tensorctl as a user runs it
// is tensorctl_test.cc.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "client/case_compare.h"
#include "client/case_format.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/client/public_cases.h"
#include "tests/support/status_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TensordProcess;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::SizeIs;

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

// ctest runs this matrix as one test per call style and backend
// (tests/client/CMakeLists.txt lists them): a Call or backend added here needs
// its entry there (Conformance/PublicCaseTest.EveryCaseRunsInOneOfThese fails
// until it has one).
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

}  // namespace
}  // namespace tensorop::client
