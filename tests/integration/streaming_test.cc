// RunStream, RunChunked and RunBidi against a real tensord, including results
// and inputs far larger than one message.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/byte_units.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/set_ints.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

using ::tensorop::testing::kMiB;

// A streamed output put back together.
struct StreamedOutput {
  v1::OutputHeader header;
  std::string data;
  std::vector<int64_t> chunk_sizes;
};

// Reads a ResultPart stream whole (for small results).
template <typename Reader>
std::vector<StreamedOutput> ReadParts(Reader& reader) {
  std::vector<StreamedOutput> outputs;
  v1::ResultPart part;
  while (reader.Read(&part)) {
    if (part.has_header()) {
      outputs.emplace_back();
      outputs.back().header = part.header();
    } else {
      EXPECT_FALSE(outputs.empty()) << "a chunk before any header";
      if (outputs.empty()) break;
      outputs.back().data += part.chunk();
      outputs.back().chunk_sizes.push_back(static_cast<int64_t>(part.chunk().size()));
    }
  }
  return outputs;
}

v1::RequestPart RequestPartOf(v1::RunRequest request) {
  v1::RequestPart part;
  *part.mutable_request() = std::move(request);
  return part;
}

v1::RequestPart ChunkPart(const std::string& input, std::string data) {
  v1::RequestPart part;
  part.mutable_chunk()->set_input(input);
  part.mutable_chunk()->set_data(std::move(data));
  return part;
}

// Sends `parts` on RunChunked (stopping if the server ends the call), then
// reads the result.
grpc::Status RunChunked(v1::TensorOp::Stub& stub, const std::vector<v1::RequestPart>& parts,
                        std::vector<StreamedOutput>* outputs) {
  grpc::ClientContext context;
  auto stream = stub.RunChunked(&context);
  for (const v1::RequestPart& part : parts) {
    if (!stream->Write(part)) break;
  }
  stream->WritesDone();
  *outputs = ReadParts(*stream);
  return stream->Finish();
}

// Sends `requests` on one RunBidi stream, half-closes it and reads every
// answer into `answers` by id (an id answered twice fails the test).
grpc::Status RunBidiAll(v1::TensorOp::Stub& stub, const std::vector<v1::RunRequest>& requests,
                        std::map<std::string, v1::RunResponse>* answers) {
  grpc::ClientContext context;
  auto stream = stub.RunBidi(&context);
  for (const v1::RunRequest& request : requests) {
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  v1::RunResponse response;
  while (stream->Read(&response)) {
    EXPECT_TRUE(answers->emplace(response.id(), response).second) << "twice: " << response.id();
  }
  return stream->Finish();
}

class StreamingTest : public ::testing::Test {
 protected:
  TensordProcess server_;
  std::unique_ptr<v1::TensorOp::Stub> stub_ = v1::TensorOp::NewStub(Connect(server_.target()));
};

// --- RunStream ----------------------------------------------------------------

TEST_F(StreamingTest, RunStreamSendsA512MiBResultInChunks) {
  constexpr int64_t kRows = 16384, kCols = 32768;  // 512 MiB of uint8
  grpc::ClientContext context;
  auto reader = stub_->RunStream(&context, BroadcastRowsRequest("big-out", kRows, kCols));

  v1::ResultPart part;
  ASSERT_TRUE(reader->Read(&part));
  ASSERT_TRUE(part.has_header());
  EXPECT_EQ(part.header().index(), 0);
  EXPECT_EQ(part.header().dtype(), v1::UINT8);
  EXPECT_THAT(part.header().sizes(), ElementsAre(kRows, kCols));
  EXPECT_THAT(part.header().strides(), ElementsAre(kCols, 1));
  EXPECT_EQ(part.header().byte_length(), kRows * kCols);
  EXPECT_EQ(part.header().backend(), "cpu");

  int64_t received = 0, chunks = 0, mismatches = 0;
  while (reader->Read(&part)) {
    ASSERT_FALSE(part.has_header()) << "one output, one header";
    const std::string& chunk = part.chunk();
    ASSERT_LE(static_cast<int64_t>(chunk.size()), kMiB);
    // Every 4093rd byte (a prime, so every column phase is visited) and each
    // chunk's last byte.
    for (int64_t at = (4093 - received % 4093) % 4093; at < static_cast<int64_t>(chunk.size());
         at += 4093) {
      mismatches += static_cast<uint8_t>(chunk[at]) != BroadcastRowValue((received + at) % kCols);
    }
    mismatches += static_cast<uint8_t>(chunk.back()) !=
                  BroadcastRowValue((received + chunk.size() - 1) % kCols);
    received += static_cast<int64_t>(chunk.size());
    ++chunks;
  }
  EXPECT_THAT(reader->Finish(), GrpcOk());
  EXPECT_EQ(received, kRows * kCols);
  EXPECT_EQ(chunks, kRows * kCols / kMiB);
  EXPECT_EQ(mismatches, 0);
}

TEST(RunStreamTest, PublicCasesStreamedWhileTheyAreComputed) {
  // Bands are 4 chunks: with 1-byte chunks every output of more than 4 bytes
  // whose rows come in order goes out band by band as the CPU writes it
  // (core/plan/output_bands.h), not after the whole result. Byte-exact all the
  // same, from RunStream and from RunChunked (whose inputs come in chunks too).
  TensordProcess server({"--chunk_bytes=1"});
  for (const char* style : {"--stream", "--chunked"}) {
    const CommandResult result =
        RunCommand({TensorctlPath(), "conformance", "--target", server.target(), "--backend", "cpu",
                    style, ConformanceCasesDir()});
    EXPECT_EQ(result.exit_code, 0) << style << "\n" << result.out << result.err;
    EXPECT_THAT(result.out, MatchesRegex("conformance: [1-9][0-9]* passed, 0 failed\n")) << style;
  }
}

TEST(RunStreamTest, EachOutputIsAHeaderThenChunksOfTheConfiguredSize) {
  TensordProcess server({"--chunk_bytes=3"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  v1::RunRequest request;
  request.set_id("split");
  request.mutable_split()->set_axis(1);
  (*request.mutable_inputs())["input"] =
      MakeTensor(v1::INT32, {2, 3}, Pack<int32_t>({0, 1, 2, 3, 4, 5}));
  SetInts(request.add_outputs()->mutable_sizes(), {2, 1});
  SetInts(request.add_outputs()->mutable_sizes(), {2, 2});
  grpc::ClientContext context;
  auto reader = stub->RunStream(&context, request);
  std::vector<StreamedOutput> outputs = ReadParts(*reader);
  ASSERT_THAT(reader->Finish(), GrpcOk());
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].header.index(), 0);
  EXPECT_EQ(outputs[0].header.byte_length(), 8);
  EXPECT_THAT(outputs[0].chunk_sizes, ElementsAre(3, 3, 2));
  EXPECT_THAT(Unpack<int32_t>(outputs[0].data), ElementsAre(0, 3));
  EXPECT_EQ(outputs[1].header.index(), 1);
  EXPECT_THAT(outputs[1].header.sizes(), ElementsAre(2, 2));
  EXPECT_THAT(outputs[1].header.strides(), ElementsAre(2, 1));
  EXPECT_EQ(outputs[1].header.byte_length(), 16);
  EXPECT_THAT(outputs[1].chunk_sizes, ElementsAre(3, 3, 3, 3, 3, 1));
  EXPECT_THAT(Unpack<int32_t>(outputs[1].data), ElementsAre(1, 2, 4, 5));
}

TEST(RunStreamTest, LargeInputsAreReadWhereTheyWereReceived) {
  // A 2 MiB input (inputs from 1 MiB are left in the slices gRPC received
  // them in) whose result goes out band by band while it is computed: bands
  // of 4 chunks of 64 KiB, and the rows read backwards across the slices.
  TensordProcess server({"--chunk_bytes=65536"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  const auto stream = [&](const v1::RunRequest& request, std::vector<StreamedOutput>* outputs) {
    grpc::ClientContext context;
    auto reader = stub->RunStream(&context, request);
    *outputs = ReadParts(*reader);
    return reader->Finish();
  };
  const ReversedRows rows = ReversedRowsCase();
  std::vector<StreamedOutput> outputs;
  for (const v1::Backend backend : {v1::CPU, v1::OPENCL}) {
    v1::RunRequest request = rows.Request("pieces");
    request.set_backend(backend);
    ASSERT_THAT(stream(request, &outputs), GrpcOk()) << backend;
    ASSERT_EQ(outputs.size(), 1u) << backend;
    EXPECT_THAT(outputs[0].header.backend(),
                ::testing::StartsWith(backend == v1::CPU ? "cpu" : "opencl:"));
    EXPECT_TRUE(Unpack<float>(outputs[0].data) == rows.expected) << backend;
  }
  // int16, an odd number of elements, copied whole.
  std::vector<int16_t> column(786433);
  for (size_t i = 0; i < column.size(); ++i) column[i] = static_cast<int16_t>(i * 13);
  const int64_t count = static_cast<int64_t>(column.size());
  ASSERT_THAT(stream(SliceRequest("int16", MakeTensor(v1::INT16, {count}, Pack(column)), {0},
                                  {count}, {1}, {count}),
                     &outputs),
              GrpcOk());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(Unpack<int16_t>(outputs[0].data) == column);
  // Two bytes short of a whole float32.
  v1::RunRequest short_input = rows.Request("short");
  std::string& short_data = *(*short_input.mutable_inputs())["input"].mutable_data();
  short_data.resize(short_data.size() - 2);
  EXPECT_THAT(
      stream(short_input, &outputs),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("input.data has 2097150 bytes")));
}

TEST_F(StreamingTest, RunStreamOfBytesTheRequestCarriesStreamsThemWithNoBuffer) {
  // Each output of the split is a run of the input's bytes, which streams
  // back from the slices gRPC received them in, so no output buffer comes
  // from the pool.
  constexpr int64_t kRows = SplitRows::kRows, kCols = SplitRows::kCols;
  const SplitRows rows_case = SplitRowsCase();
  const std::string& bytes = rows_case.bytes;
  const v1::RunRequest& split = rows_case.request;
  const auto pool_buffers = [&] { return PoolBuffers(server_); };
  const int64_t buffers_before = pool_buffers();
  {
    grpc::ClientContext context;
    auto reader = stub_->RunStream(&context, split);
    const std::vector<StreamedOutput> outputs = ReadParts(*reader);
    ASSERT_THAT(reader->Finish(), GrpcOk());
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[0].header.backend(), "cpu");
    EXPECT_THAT(outputs[0].header.sizes(), ElementsAre(4096, kCols));
    EXPECT_EQ(outputs[1].header.byte_length(), 6144 * kCols);
    EXPECT_TRUE(outputs[0].data == bytes.substr(0, 4096 * kCols));
    EXPECT_TRUE(outputs[1].data == bytes.substr(4096 * kCols));
    // In chunks of --chunk_bytes (1 MiB), as a buffer's would be.
    EXPECT_EQ(outputs[0].chunk_sizes, std::vector<int64_t>(4, kMiB));
    EXPECT_EQ(outputs[1].chunk_sizes, std::vector<int64_t>(6, kMiB));
  }
  EXPECT_EQ(pool_buffers(), buffers_before);
  // Rows backwards need the kernel, and a buffer.
  grpc::ClientContext context;
  auto reader = stub_->RunStream(
      &context, SliceRequest("backwards", MakeTensor(v1::UINT8, {kRows, kCols}, bytes), {0, 0},
                             {kRows, kCols}, {-1, 1}, {kRows, kCols}));
  const std::vector<StreamedOutput> outputs = ReadParts(*reader);
  ASSERT_THAT(reader->Finish(), GrpcOk());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].data.substr(0, kCols) == bytes.substr((kRows - 1) * kCols));
  EXPECT_EQ(pool_buffers(), buffers_before + 1);
}

TEST_F(StreamingTest, RunStreamReportsValidationErrorsAsTheCallStatus) {
  v1::RunRequest request = DocSliceRequest("bad");
  request.mutable_slice()->set_window_strides(2, 0);
  grpc::ClientContext context;
  auto reader = stub_->RunStream(&context, request);
  EXPECT_THAT(ReadParts(*reader), IsEmpty());
  EXPECT_THAT(reader->Finish(), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                             "slice.window_strides[2] must not be 0"));
}

// --- RunChunked ---------------------------------------------------------------

TEST_F(StreamingTest, RunChunkedTakesA512MiBInputInChunks) {
  constexpr int64_t kRows = 16384, kCols = 32768;  // 512 MiB of uint8
  // Element (r, c) holds (7r + c) mod 256: each row is a rotation of 0..255.
  const auto value = [](int64_t r, int64_t c) { return static_cast<uint8_t>((7 * r + c) % 256); };
  std::string pattern(kCols + 256, '\0');
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<char>(i % 256);

  v1::RunRequest request;
  request.set_id("big-in");
  // Rows 16300, 16200, 16100, 16000 (a negative stride starts at the window's
  // end) and columns 100, 103, 106.
  v1::SliceAttrs* slice = request.mutable_slice();
  SetInts(slice->mutable_offsets(), {16000, 100});
  SetInts(slice->mutable_window_sizes(), {301, 7});
  SetInts(slice->mutable_window_strides(), {-100, 3});
  (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {kRows, kCols}, "");
  SetInts(request.add_outputs()->mutable_sizes(), {4, 3});

  grpc::ClientContext context;
  auto stream = stub_->RunChunked(&context);
  ASSERT_TRUE(stream->Write(RequestPartOf(request)));
  constexpr int64_t kRowsPerChunk = kMiB / kCols;
  v1::RequestPart part;
  part.mutable_chunk()->set_input("input");
  for (int64_t row = 0; row < kRows; row += kRowsPerChunk) {
    std::string* data = part.mutable_chunk()->mutable_data();
    data->clear();
    for (int64_t r = row; r < row + kRowsPerChunk; ++r) {
      data->append(pattern, (7 * r) % 256, kCols);
    }
    ASSERT_TRUE(stream->Write(part)) << "at row " << row;
  }
  ASSERT_TRUE(stream->WritesDone());
  std::vector<StreamedOutput> outputs = ReadParts(*stream);
  ASSERT_THAT(stream->Finish(), GrpcOk());

  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_THAT(outputs[0].header.sizes(), ElementsAre(4, 3));
  std::vector<uint8_t> expected;
  for (int64_t r : {16300, 16200, 16100, 16000}) {
    for (int64_t c : {100, 103, 106}) expected.push_back(value(r, c));
  }
  EXPECT_EQ(Unpack<uint8_t>(outputs[0].data), expected);
  std::string line = AwaitLogLine(server_, {"\"id\":\"big-in\""});
  EXPECT_THAT(line, HasSubstr("\"method\":\"RunChunked\""));
  EXPECT_THAT(line, HasSubstr("\"bytes_in\":536870912"));
  EXPECT_THAT(line, HasSubstr("\"status\":\"OK\""));
}

TEST_F(StreamingTest, RunChunkedAppendsChunksToTheNamedInputs) {
  v1::RunRequest request;
  request.set_id("scatter");
  request.mutable_scatter_elements()->set_axis(0);
  // Partial data in the request, the rest in chunks, interleaved by input.
  (*request.mutable_inputs())["input"] = MakeTensor(v1::INT32, {4}, Pack<int32_t>({1, 2}));
  (*request.mutable_inputs())["indices"] = MakeTensor(v1::INT64, {2}, "");
  (*request.mutable_inputs())["updates"] = MakeTensor(v1::INT32, {2}, "");
  std::vector<StreamedOutput> outputs;
  ASSERT_THAT(RunChunked(*stub_,
                         {RequestPartOf(request), ChunkPart("indices", Pack<int64_t>({3})),
                          ChunkPart("input", Pack<int32_t>({3, 4})),
                          ChunkPart("updates", Pack<int32_t>({30, 10})),
                          ChunkPart("indices", Pack<int64_t>({-4}))},
                         &outputs),
              GrpcOk());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].header.backend(), "cpu");
  EXPECT_THAT(Unpack<int32_t>(outputs[0].data), ElementsAre(10, 2, 3, 30));
}

TEST_F(StreamingTest, RunChunkedNeedsTheRequestFirst) {
  std::vector<StreamedOutput> outputs;
  EXPECT_THAT(RunChunked(*stub_, {ChunkPart("input", "abc")}, &outputs),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "RunChunked: the first part must be a request, not a chunk"));
  EXPECT_THAT(RunChunked(*stub_, {}, &outputs),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "RunChunked: the stream ended before a request part"));
  EXPECT_THAT(
      RunChunked(*stub_,
                 {RequestPartOf(DocSliceRequest("one")), RequestPartOf(DocSliceRequest("two"))},
                 &outputs),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                   "RunChunked: part 2 is a second request; only the first part is one"));
}

TEST_F(StreamingTest, RunChunkedNamesAnUnknownInput) {
  std::vector<StreamedOutput> outputs;
  EXPECT_THAT(
      RunChunked(*stub_, {RequestPartOf(DocSliceRequest("x")), ChunkPart("weights", "abcd")},
                 &outputs),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                   "chunk.input: \"weights\" is not an input of the request"));
}

TEST_F(StreamingTest, RunChunkedReportsValidationOfTheWholeRequest) {
  v1::RunRequest request = DocSliceRequest("short");
  (*request.mutable_inputs())["input"].mutable_data()->resize(32);
  std::vector<StreamedOutput> outputs;
  // 32 + 16 bytes: still 16 short of 16 floats.
  EXPECT_THAT(
      RunChunked(*stub_, {RequestPartOf(request), ChunkPart("input", std::string(16, '\0'))},
                 &outputs),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("input.data has 48 bytes")));
  EXPECT_THAT(outputs, IsEmpty());
}

// Where the op reads only part of a packed input, RunChunked stores only that
// part: 256 MiB uploads pass a 64 MiB memory budget when their op reads 4 KiB
// of them (at the end; across a chunk border), and the same upload is refused
// at the budget when the op reads all of it.
TEST(RunChunkedWindowTest, StoresOnlyTheBytesItsOpReads) {
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=67108864"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  constexpr int64_t kBytes = 256 * kMiB;
  // The bytes a 4 KiB window reads follow a pattern (0..250); every other byte
  // is 255, so a read from anywhere else shows. Set by memset, not byte by byte:
  // the test sends 1.25 GiB, and a loop over it took a minute under ASan.
  const auto value = [](int64_t i) { return static_cast<char>(i % 251); };
  // Sends the input in 1 MiB chunks, `total` bytes of them, for a slice of
  // `window` bytes from `offset`.
  const auto run = [&](int64_t offset, int64_t window, int64_t total,
                       std::vector<StreamedOutput>* outputs) {
    grpc::ClientContext context;
    auto stream = stub->RunChunked(&context);
    stream->Write(RequestPartOf(SliceRequest("window", MakeTensor(v1::UINT8, {kBytes}, ""),
                                             {offset}, {window}, {1}, {window})));
    v1::RequestPart part;
    part.mutable_chunk()->set_input("input");
    for (int64_t at = 0; at < total; at += kMiB) {
      std::string* data = part.mutable_chunk()->mutable_data();
      const int64_t end = std::min(at + kMiB, total);
      data->assign(static_cast<size_t>(end - at), static_cast<char>(255));
      if (window <= 4096) {
        for (int64_t i = std::max(at, offset); i < std::min(end, offset + window); ++i) {
          (*data)[static_cast<size_t>(i - at)] = value(i);
        }
      }
      if (!stream->Write(part)) break;
    }
    stream->WritesDone();
    *outputs = ReadParts(*stream);
    return stream->Finish();
  };
  const auto expected = [&](int64_t offset, int64_t window) {
    std::string bytes;
    for (int64_t i = offset; i < offset + window; ++i) bytes.push_back(value(i));
    return bytes;
  };
  std::vector<StreamedOutput> outputs;
  for (const int64_t offset : {kBytes - 4096, 3 * kMiB - 2048}) {
    ASSERT_THAT(run(offset, 4096, kBytes, &outputs), GrpcOk()) << offset;
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_TRUE(outputs[0].data == expected(offset, 4096)) << offset;
  }
  EXPECT_THAT(run(0, kBytes, kBytes, &outputs),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("RunChunked: input \"input\" of request \"window\"")));
  // A packed input of the wrong size is refused as ever, whatever it read.
  EXPECT_THAT(run(0, 4096, kBytes + 1, &outputs),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "input.data has 268435457 bytes; packed uint8 [268435456] needs "
                           "exactly 268435456"));
  EXPECT_THAT(run(0, 4096, kBytes - kMiB, &outputs),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("input.data has 267386880 bytes; packed uint8")));
}

TEST(RequestLimitTest, OverMaxRequestBytesIsResourceExhausted) {
  TensordProcess server({"--max_request_bytes=1048576"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));

  // Uploads are refused once they pass the limit, before the rest arrives.
  v1::RunRequest request;
  request.set_id("upload");
  request.mutable_split()->set_axis(0);
  (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {3 * 524288}, "");
  SetInts(request.add_outputs()->mutable_sizes(), {3 * 524288});
  std::vector<v1::RequestPart> parts = {RequestPartOf(request)};
  for (int i = 0; i < 3; ++i) parts.push_back(ChunkPart("input", std::string(524288, 'x')));
  std::vector<StreamedOutput> outputs;
  EXPECT_THAT(RunChunked(*stub, parts, &outputs),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "RunChunked: the inputs reached 1572864 bytes, more than the "
                           "server's limit of 1048576 bytes (--max_request_bytes)"));

  // Inputs plus outputs over the limit, in one message.
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(
      stub->Run(&context, BroadcastRowsRequest("outputs", 1024, 2048), &response),
      GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED, HasSubstr("the limit is 1048576")));
}

// --- RunBidi ------------------------------------------------------------------

TEST_F(StreamingTest, RunBidiAnswersEveryIdOnceWithItsOwnStatus) {
  std::vector<v1::RunRequest> requests = {DocSliceRequest("a"), DocSliceRequest("b"),
                                          DocSliceRequest("bad"), DocSliceRequest("gpu"),
                                          DocSliceRequest("c")};
  requests[2].mutable_slice()->set_window_strides(3, 0);
  requests[3].set_backend(v1::OPENCL);
  requests[3].set_device_index(99);

  std::map<std::string, v1::RunResponse> answers;
  ASSERT_THAT(RunBidiAll(*stub_, requests, &answers), GrpcOk()) << server_.Log();

  ASSERT_EQ(answers.size(), requests.size());
  for (const std::string id : {"a", "b", "c"}) {
    const v1::RunResponse& answer = answers[id];
    EXPECT_EQ(answer.status().code(), 0) << id << ": " << answer.status().message();
    EXPECT_EQ(answer.backend(), "cpu");
    ASSERT_EQ(answer.outputs_size(), 1) << id;
    EXPECT_THAT(Unpack<float>(answer.outputs(0).data()), ElementsAre(2, 4, 10, 12));
  }
  EXPECT_EQ(answers["bad"].status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(answers["bad"].status().message(), "slice.window_strides[3] must not be 0");
  // A count, not the repeated field: GCC 12 at -O3 warns (-Wrestrict, a false
  // positive) inside gtest's printer of protobuf messages.
  EXPECT_EQ(answers["bad"].outputs_size(), 0);
  EXPECT_EQ(answers["gpu"].status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(answers["gpu"].status().message(), HasSubstr("device_index = 99 is outside"));
  EXPECT_EQ(answers["gpu"].outputs_size(), 0);

  std::string line = AwaitLogLine(server_, {"\"id\":\"bad\""});
  EXPECT_THAT(line, HasSubstr("\"method\":\"RunBidi\""));
  EXPECT_THAT(line, HasSubstr("\"status\":\"INVALID_ARGUMENT\""));
}

TEST_F(StreamingTest, RunBidiRunsTinyCopiesWhereTheyAreReadAndTheRestOnWorkers) {
  // Copies of at most 16 KiB run on the thread that read them. The bound is on
  // what the plan writes: a 1 KiB row broadcast to 16 rows runs there, to 17
  // rows it goes to a worker. So do OPENCL and a request that does not plan.
  const auto run_here = [&] { return MetricValue(server_, "tensorop_requests_run_here_total"); };
  const int64_t before = run_here();
  std::vector<v1::RunRequest> requests = {
      DocSliceRequest("a"), BroadcastRowsRequest("16-rows", 16, 1024),
      BroadcastRowsRequest("17-rows", 17, 1024), DocSliceRequest("bad"), DocSliceRequest("gpu")};
  requests[3].mutable_slice()->set_window_strides(3, 0);
  requests[4].set_backend(v1::OPENCL);

  std::map<std::string, v1::RunResponse> answers;
  ASSERT_THAT(RunBidiAll(*stub_, requests, &answers), GrpcOk()) << server_.Log();

  ASSERT_EQ(answers.size(), requests.size());
  for (const std::string id : {"a", "gpu"}) {
    EXPECT_EQ(answers[id].status().code(), 0) << id << ": " << answers[id].status().message();
    ASSERT_EQ(answers[id].outputs_size(), 1) << id;
    EXPECT_THAT(Unpack<float>(answers[id].outputs(0).data()), ElementsAre(2, 4, 10, 12)) << id;
  }
  EXPECT_EQ(answers["a"].backend(), "cpu");
  EXPECT_THAT(answers["gpu"].backend(), ::testing::StartsWith("opencl:"));
  for (const int64_t rows : {16, 17}) {
    const v1::RunResponse& answer = answers[absl::StrCat(rows, "-rows")];
    EXPECT_EQ(answer.status().code(), 0) << rows << ": " << answer.status().message();
    ASSERT_EQ(answer.outputs_size(), 1) << rows;
    const std::string& data = answer.outputs(0).data();
    ASSERT_EQ(static_cast<int64_t>(data.size()), rows * 1024) << rows;
    EXPECT_EQ(BroadcastRowsMismatches(data, 1024), 0) << rows;
  }
  EXPECT_EQ(answers["bad"].status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(answers["bad"].status().message(), "slice.window_strides[3] must not be 0");
  EXPECT_EQ(run_here(), before + 2);  // "a" and "16-rows"
}

TEST_F(StreamingTest, RunBidiKeepsUpWithManyRequestsSentBeforeAnyRead) {
  // More than the server's per-stream window, so reading pauses and resumes.
  constexpr int kRequests = 300;
  grpc::ClientContext context;
  auto stream = stub_->RunBidi(&context);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(stream->Write(DocSliceRequest(std::to_string(i))));
  }
  ASSERT_TRUE(stream->WritesDone());
  std::vector<int> seen(kRequests, 0);
  v1::RunResponse response;
  while (stream->Read(&response)) {
    ASSERT_EQ(response.status().code(), 0) << response.status().message();
    ++seen[std::stoi(response.id())];
  }
  ASSERT_THAT(stream->Finish(), GrpcOk()) << server_.Log();
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kRequests);
}

TEST_F(StreamingTest, RunBidiWithNoRequestsFinishesOk) {
  grpc::ClientContext context;
  auto stream = stub_->RunBidi(&context);
  ASSERT_TRUE(stream->WritesDone());
  v1::RunResponse response;
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_THAT(stream->Finish(), GrpcOk());
}

}  // namespace
}  // namespace tensorop::testing
