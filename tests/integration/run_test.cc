// Unary Run against a real tensord: results in every op, the public error
// shapes, and bytes that are no request at all.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/set_ints.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class RunTest : public ::testing::Test {
 protected:
  grpc::Status Run(const v1::RunRequest& request, v1::RunResponse* response) {
    grpc::ClientContext context;
    return stub_->Run(&context, request, response);
  }
  grpc::Status Run(const v1::RunRequest& request) {
    v1::RunResponse response;
    return Run(request, &response);
  }

  TensordProcess server_;
  std::unique_ptr<v1::TensorOp::Stub> stub_ = v1::TensorOp::NewStub(Connect(server_.target()));
};

TEST_F(RunTest, SliceAnswersWithExplicitStridesAndTheBackend) {
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceRequest("doc-1"), &response), GrpcOk());
  EXPECT_EQ(response.id(), "doc-1");
  EXPECT_EQ(response.backend(), "cpu");
  EXPECT_FALSE(response.has_status());  // only RunBidi answers carry one
  ASSERT_EQ(response.outputs_size(), 1);
  const v1::Tensor& output = response.outputs(0);
  EXPECT_EQ(output.dtype(), v1::FLOAT32);
  EXPECT_THAT(output.sizes(), ElementsAre(1, 1, 2, 2));
  EXPECT_THAT(output.strides(), ElementsAre(4, 4, 2, 1));
  EXPECT_THAT(Unpack<float>(output.data()), ElementsAre(2, 4, 10, 12));
}

TEST_F(RunTest, ExplicitCpuBackendRunsOnTheCpu) {
  v1::RunRequest request = DocSliceRequest("cpu");
  request.set_backend(v1::CPU);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
}

TEST_F(RunTest, PaddedOutputStridesComeBackWithZeroPadding) {
  v1::RunRequest request = DocSliceRequest("padded");
  SetInts(request.mutable_outputs(0)->mutable_strides(), {8, 8, 4, 1});
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(8, 8, 4, 1));
  // 1 + (2-1)*4 + (2-1)*1 = 6 elements; the two between the rows are padding.
  EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(2, 4, 0, 0, 10, 12));
}

TEST_F(RunTest, StridedSliceReversesWithMasks) {
  v1::RunRequest request;
  request.set_id("reverse");
  (*request.mutable_inputs())["input"] = MakeTensor(v1::INT64, {5}, Pack<int64_t>({0, 1, 2, 3, 4}));
  v1::StridedSliceAttrs* attrs = request.mutable_strided_slice();
  attrs->add_begin(0);
  attrs->add_end(0);
  attrs->add_stride(-1);
  attrs->add_begin_mask(1);
  attrs->add_end_mask(1);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(response.outputs(0).sizes(), ElementsAre(5));
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(1));
  EXPECT_THAT(Unpack<int64_t>(response.outputs(0).data()), ElementsAre(4, 3, 2, 1, 0));
}

TEST_F(RunTest, SplitAnswersEveryOutputInOrder) {
  v1::RunRequest request;
  request.set_id("split");
  request.mutable_split()->set_axis(1);
  (*request.mutable_inputs())["input"] =
      MakeTensor(v1::INT32, {2, 3}, Pack<int32_t>({0, 1, 2, 3, 4, 5}));
  SetInts(request.add_outputs()->mutable_sizes(), {2, 1});
  SetInts(request.add_outputs()->mutable_sizes(), {2, 2});
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_THAT(Unpack<int32_t>(response.outputs(0).data()), ElementsAre(0, 3));
  EXPECT_THAT(Unpack<int32_t>(response.outputs(1).data()), ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(response.outputs(1).strides(), ElementsAre(2, 1));
}

v1::RunRequest ScatterRequest(v1::Tensor indices) {
  v1::RunRequest request;
  request.set_id("scatter");
  request.mutable_scatter_elements()->set_axis(1);
  (*request.mutable_inputs())["input"] =
      MakeTensor(v1::INT32, {1, 5}, Pack<int32_t>({1, 2, 3, 4, 5}));
  (*request.mutable_inputs())["indices"] = std::move(indices);
  (*request.mutable_inputs())["updates"] = MakeTensor(v1::INT32, {1, 2}, Pack<int32_t>({11, 22}));
  return request;
}

TEST_F(RunTest, ScatterElementsWritesUpdatesAtTheirIndices) {
  v1::RunResponse response;
  ASSERT_THAT(Run(ScatterRequest(MakeTensor(v1::INT64, {1, 2}, Pack<int64_t>({1, -2}))), &response),
              GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(Unpack<int32_t>(response.outputs(0).data()), ElementsAre(1, 11, 3, 22, 5));
}

// --- The error shapes clients see -------------------------------------------

TEST_F(RunTest, ZeroWindowStrideNamesTheFieldAndIndex) {
  v1::RunRequest request =
      SliceRequest("zero", MakeTensor(v1::UINT8, {2, 2}, Pack<uint8_t>({1, 2, 3, 4})), {0, 0},
                   {2, 2}, {1, 0}, {2, 1});
  EXPECT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         "slice.window_strides[1] must not be 0"));
}

TEST_F(RunTest, RequestWithoutOpIsInvalid) {
  v1::RunRequest request = DocSliceRequest("no-op");
  request.clear_op();
  EXPECT_THAT(Run(request),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "op: none of slice, strided_slice, split, "
                           "scatter_elements, transpose, reshape, expand, tile, gather, "
                           "gather_elements, join, pad is set"));
}

TEST_F(RunTest, UnspecifiedDtypeIsNamedByInput) {
  v1::RunRequest request =
      ScatterRequest(MakeTensor(v1::DTYPE_UNSPECIFIED, {1, 2}, Pack<int64_t>({1, 3})));
  EXPECT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         "indices.dtype: 0 (DTYPE_UNSPECIFIED) is not a dtype"));
}

TEST_F(RunTest, DtypeValueOutsideTheEnumIsNamedByInput) {
  v1::RunRequest request = DocSliceRequest("open-enum");
  (*request.mutable_inputs())["input"].set_dtype(static_cast<v1::DType>(42));
  EXPECT_THAT(Run(request),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "input.dtype: 42 is not a dtype"));
}

TEST_F(RunTest, IndexOutOfRangeNamesItsCoordinatesAndValue) {
  v1::RunRequest request = ScatterRequest(MakeTensor(v1::INT64, {1, 2}, Pack<int64_t>({1, 7})));
  EXPECT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         HasSubstr("indices[0, 1] = 7 is outside [-5, 5)")));
}

TEST_F(RunTest, UnknownInputNameIsInvalid) {
  v1::RunRequest request = DocSliceRequest("extra");
  (*request.mutable_inputs())["extra"] = MakeTensor(v1::UINT8, {1}, "x");
  EXPECT_THAT(Run(request),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("inputs has \"extra\"")));
}

TEST_F(RunTest, ShortInputDataIsInvalid) {
  v1::RunRequest request = DocSliceRequest("short");
  (*request.mutable_inputs())["input"].mutable_data()->resize(60);
  EXPECT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         HasSubstr("input.data has 60 bytes")));
}

// Inputs of a request from 1 MiB are read where gRPC received them, in
// pieces that split elements at their ends: byte-exact on the CPU (each copy
// cut at the pieces), on an OpenCL device and for reads that jump between
// pieces (both gathered first), and a size that is no whole number of
// elements is refused as ever.
TEST_F(RunTest, LargeInputsAreReadWhereTheyWereReceived) {
  const ReversedRows rows = ReversedRowsCase();
  for (const v1::Backend backend : {v1::CPU, v1::OPENCL}) {
    v1::RunRequest request = rows.Request("pieces");
    request.set_backend(backend);
    v1::RunResponse response;
    ASSERT_THAT(Run(request, &response), GrpcOk()) << backend;
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_TRUE(Unpack<float>(response.outputs(0).data()) == rows.expected) << backend;
  }
  // int16, an odd number of elements, copied whole.
  std::vector<int16_t> column(786433);
  for (size_t i = 0; i < column.size(); ++i) column[i] = static_cast<int16_t>(i * 13);
  const int64_t count = static_cast<int64_t>(column.size());
  v1::RunResponse response;
  ASSERT_THAT(Run(SliceRequest("int16", MakeTensor(v1::INT16, {count}, Pack(column)), {0}, {count},
                               {1}, {count}),
                  &response),
              GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_TRUE(Unpack<int16_t>(response.outputs(0).data()) == column);
  // int64 stored column-major, read row-major: every element jumps a column.
  constexpr int64_t kSide = 512;
  std::vector<int64_t> stored(kSide * kSide), transposed;
  for (size_t i = 0; i < stored.size(); ++i) stored[i] = static_cast<int64_t>(i) * 1000003;
  for (int64_t i = 0; i < kSide; ++i) {
    for (int64_t j = 0; j < kSide; ++j) transposed.push_back(stored[j * kSide + i]);
  }
  ASSERT_THAT(
      Run(SliceRequest("columns", MakeTensor(v1::INT64, {kSide, kSide}, Pack(stored), {1, kSide}),
                       {0, 0}, {kSide, kSide}, {1, 1}, {kSide, kSide}),
          &response),
      GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_TRUE(Unpack<int64_t>(response.outputs(0).data()) == transposed);
  // Two bytes short of a whole float32.
  v1::RunRequest short_input = rows.Request("short");
  std::string& short_data = *(*short_input.mutable_inputs())["input"].mutable_data();
  short_data.resize(short_data.size() - 2);
  EXPECT_THAT(Run(short_input), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                             HasSubstr("input.data has 2097150 bytes")));
}

TEST_F(RunTest, OutputsThatAreReceivedBytesAreAnsweredWithThemInPlace) {
  // Each output of the split is a run of the input's bytes, answered with the
  // slices gRPC received them in, so no output buffer comes from the pool.
  constexpr int64_t kRows = SplitRows::kRows, kCols = SplitRows::kCols;
  const SplitRows rows_case = SplitRowsCase();
  const std::string& bytes = rows_case.bytes;
  v1::RunRequest split = rows_case.request;
  const auto pool_buffers = [&] { return PoolBuffers(server_); };
  // Answered in the reaction, no worker taking part, where parsing and
  // planning the request is light work.
  const auto forwarded = [&] { return MetricValue(server_, "tensorop_forwarded_answers_total"); };
  const int64_t buffers_before = pool_buffers();
  const int64_t forwarded_before = forwarded();
  v1::RunResponse response;
  ASSERT_THAT(Run(split, &response), GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_THAT(response.outputs(0).sizes(), ElementsAre(4096, kCols));
  EXPECT_THAT(response.outputs(0).strides(), ElementsAre(kCols, 1));
  EXPECT_TRUE(response.outputs(0).data() == bytes.substr(0, 4096 * kCols));
  EXPECT_TRUE(response.outputs(1).data() == bytes.substr(4096 * kCols));
  EXPECT_EQ(pool_buffers(), buffers_before);
  EXPECT_EQ(forwarded(), forwarded_before + 1);
  // With 20 KiB of other fields (an unknown one: ids are at most 256
  // bytes), parsing is a worker's: still no buffer.
  v1::RunRequest long_id = split;
  long_id.GetReflection()->MutableUnknownFields(&long_id)->AddLengthDelimited(
      1000, std::string(20 << 10, 'i'));
  ASSERT_THAT(Run(long_id, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_TRUE(response.outputs(1).data() == bytes.substr(4096 * kCols));
  EXPECT_EQ(pool_buffers(), buffers_before);
  EXPECT_EQ(forwarded(), forwarded_before + 1);
  // Rows 1000..5999 in order are answered in place too; backwards, they are
  // copied into a pooled buffer.
  for (const int64_t step : {int64_t{1}, int64_t{-1}}) {
    ASSERT_THAT(Run(SliceRequest("rows", MakeTensor(v1::UINT8, {kRows, kCols}, bytes), {1000, 0},
                                 {5000, kCols}, {step, 1}, {5000, kCols}),
                    &response),
                GrpcOk())
        << step;
    ASSERT_EQ(response.outputs_size(), 1);
    std::string expected;
    for (int64_t i = 0; i < 5000; ++i) {
      const int64_t row = step > 0 ? 1000 + i : 5999 - i;
      expected += bytes.substr(static_cast<size_t>(row * kCols), kCols);
    }
    EXPECT_TRUE(response.outputs(0).data() == expected) << step;
    EXPECT_EQ(pool_buffers(), buffers_before + (step > 0 ? 0 : 1)) << step;
  }
  EXPECT_EQ(forwarded(), forwarded_before + 2);
  // OPENCL runs on the device, as asked.
  split.set_backend(v1::OPENCL);
  ASSERT_THAT(Run(split, &response), GrpcOk());
  EXPECT_THAT(response.backend(), ::testing::StartsWith("opencl:"));
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_TRUE(response.outputs(1).data() == bytes.substr(4096 * kCols));
  EXPECT_EQ(forwarded(), forwarded_before + 2);
  // A bad request is refused there with the validator's words.
  split.set_backend(v1::CPU);
  split.mutable_split()->set_axis(2);
  EXPECT_THAT(Run(split), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, HasSubstr("axis")));
}

TEST_F(RunTest, TinyCopiesRunWhereTheyAreReadAndTheRestOnWorkers) {
  // A request of at most 32 KiB is parsed in gRPC's reaction, and runs there
  // when its plan is a copy of at most 16 KiB on the CPU. The bound is on what
  // the plan writes: a 1 KiB row broadcast to 16 rows runs there, to 17 rows
  // it goes to a worker. So do OPENCL and a request that does not plan.
  const auto run_here = [&] { return MetricValue(server_, "tensorop_requests_run_here_total"); };
  const int64_t before = run_here();
  v1::RunResponse response;
  ASSERT_THAT(Run(DocSliceRequest("a"), &response), GrpcOk());
  EXPECT_EQ(response.backend(), "cpu");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(2, 4, 10, 12));
  EXPECT_EQ(run_here(), before + 1);
  for (const int64_t rows : {16, 17}) {
    ASSERT_THAT(Run(BroadcastRowsRequest("rows", rows, 1024), &response), GrpcOk()) << rows;
    ASSERT_EQ(response.outputs_size(), 1) << rows;
    const std::string& data = response.outputs(0).data();
    ASSERT_EQ(static_cast<int64_t>(data.size()), rows * 1024) << rows;
    EXPECT_EQ(BroadcastRowsMismatches(data, 1024), 0) << rows;
  }
  EXPECT_EQ(run_here(), before + 2);
  v1::RunRequest on_device = DocSliceRequest("gpu");
  on_device.set_backend(v1::OPENCL);
  ASSERT_THAT(Run(on_device, &response), GrpcOk());
  EXPECT_THAT(response.backend(), ::testing::StartsWith("opencl:"));
  EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(2, 4, 10, 12));
  v1::RunRequest bad = DocSliceRequest("bad");
  bad.mutable_slice()->set_window_strides(3, 0);
  EXPECT_THAT(Run(bad), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                     "slice.window_strides[3] must not be 0"));
  EXPECT_EQ(run_here(), before + 2);
}

TEST_F(RunTest, OpenClRunsOnTheDeviceAndSaysWhich) {
  v1::RunRequest request = DocSliceRequest("gpu");
  request.set_backend(v1::OPENCL);
  v1::RunResponse response;
  ASSERT_THAT(Run(request, &response), GrpcOk()) << server_.Log();
  EXPECT_THAT(response.backend(), ::testing::StartsWith("opencl:"));
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(2, 4, 10, 12));
  std::string line = AwaitLogLine(server_, {"\"id\":\"gpu\""});
  EXPECT_THAT(line, HasSubstr("\"backend\":\"" + response.backend() + "\""));
}

TEST_F(RunTest, DeviceIndexOutsideThePoolIsInvalid) {
  v1::RunRequest request = DocSliceRequest("gpu-99");
  request.set_backend(v1::OPENCL);
  request.set_device_index(99);
  EXPECT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         HasSubstr("device_index = 99 is outside [0, ")));
}

TEST(RunBackendsTest, OpenClOnACpuOnlyServerIsFailedPrecondition) {
  TensordProcess server({"--backends=cpu"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  v1::RunRequest request = DocSliceRequest("gpu");
  request.set_backend(v1::OPENCL);
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, request, &response),
              GrpcStatusIs(grpc::StatusCode::FAILED_PRECONDITION,
                           "backend OPENCL: no OpenCL device is enabled on this server"));
}

TEST(RunBackendsTest, FailedDeviceIsCountedLoggedAndTheCpuAnswers) {
  TensordProcess server({"--inject_opencl_failures=1"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  for (const std::string id : {"first", "second"}) {
    v1::RunRequest request = DocSliceRequest(id);
    request.set_backend(v1::OPENCL);
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, request, &response), GrpcOk()) << server.Log();
    // The first fails on the device and is retried on the CPU; the second finds
    // the device resting and goes to the CPU at once.
    EXPECT_EQ(response.backend(), "cpu") << id;
    EXPECT_THAT(Unpack<float>(response.outputs(0).data()), ElementsAre(2, 4, 10, 12));
  }
  std::string failure = AwaitLogLine(server, {"\"event\":\"device_failure\""});
  EXPECT_THAT(failure, HasSubstr("injected (--inject_opencl_failures)"));
  EXPECT_THAT(failure, HasSubstr("\"device\":\"opencl:"));
  std::string log = server.Log();
  size_t failures = 0;
  for (size_t at = log.find("device_failure"); at != std::string::npos;
       at = log.find("device_failure", at + 1)) {
    ++failures;
  }
  EXPECT_EQ(failures, 1u);
}

TEST_F(RunTest, BackendValueOutsideTheEnumIsInvalid) {
  v1::RunRequest request = DocSliceRequest("backend-9");
  request.set_backend(static_cast<v1::Backend>(9));
  EXPECT_THAT(Run(request),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, "backend: 9 is not a backend"));
}

TEST_F(RunTest, ResultOverTheMessageLimitPointsToRunStream) {
  // 8192 x 16384 uint8 = 128 MiB of output from a 16 KiB upload; the default
  // message limit is 64 MiB.
  EXPECT_THAT(Run(BroadcastRowsRequest("big", 8192, 16384)),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("use RunStream for large results")));
}

TEST_F(RunTest, ErrorsAreLoggedWithCodeNameAndMessage) {
  v1::RunRequest request = SliceRequest(
      "logged-error", MakeTensor(v1::UINT8, {2}, Pack<uint8_t>({1, 2})), {0}, {2}, {0}, {1});
  ASSERT_THAT(Run(request), GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                                         "slice.window_strides[0] must not be 0"));
  std::string line = AwaitLogLine(server_, {"\"id\":\"logged-error\""});
  EXPECT_THAT(line, HasSubstr("\"method\":\"Run\""));
  EXPECT_THAT(line, HasSubstr("\"status\":\"INVALID_ARGUMENT\""));
  EXPECT_THAT(line, HasSubstr("\"message\":\"slice.window_strides[0] must not be 0\""));
}

// --- Bytes that are no request ------------------------------------------------

// A varint that never ends: no message parses it.
const std::string kGarbage = std::string(11, '\xff');

std::string Truncated(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  bytes.resize(bytes.size() - 5);  // cuts into the last length-delimited field
  return bytes;
}

v1::RequestPart AsPart(v1::RunRequest request) {
  v1::RequestPart part;
  *part.mutable_request() = std::move(request);
  return part;
}

TEST_F(RunTest, GarbageAndTruncatedBytesFailEveryMethodAndTheServerGoesOn) {
  const std::string unary_truncated = Truncated(DocSliceRequest("cut"));
  const std::string part_truncated = Truncated(AsPart(DocSliceRequest("cut")));
  struct Case {
    std::string method;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {"/tensorop.v1.TensorOp/Run", kGarbage},
      {"/tensorop.v1.TensorOp/Run", unary_truncated},
      {"/tensorop.v1.TensorOp/RunStream", kGarbage},
      {"/tensorop.v1.TensorOp/RunStream", unary_truncated},
      {"/tensorop.v1.TensorOp/RunBidi", kGarbage},
      {"/tensorop.v1.TensorOp/RunBidi", unary_truncated},
      {"/tensorop.v1.TensorOp/RunChunked", kGarbage},
      {"/tensorop.v1.TensorOp/RunChunked", part_truncated},
  };
  auto channel = Connect(server_.target());
  for (const Case& c : cases) {
    grpc::Status status = RawExchange(channel, c.method, {c.bytes});
    EXPECT_THAT(status, Not(GrpcOk())) << c.method << " with " << c.bytes.size() << " bytes";
    v1::RunResponse response;
    EXPECT_THAT(Run(DocSliceRequest("after"), &response), GrpcOk()) << "after " << c.method;
    EXPECT_EQ(response.outputs_size(), 1);
  }
}

TEST_F(RunTest, StreamingMethodsNameTheBadMessage) {
  auto channel = Connect(server_.target());
  EXPECT_THAT(RawExchange(channel, "/tensorop.v1.TensorOp/RunBidi",
                          {DocSliceRequest("good").SerializeAsString(), kGarbage}),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "RunBidi: message 2 is not a valid tensorop.v1.RunRequest; the "
                           "stream ends here"));
  EXPECT_THAT(RawExchange(channel, "/tensorop.v1.TensorOp/RunChunked", {kGarbage}),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "RunChunked: part 1 is not a valid tensorop.v1.RequestPart"));
}

}  // namespace
}  // namespace tensorop::testing
