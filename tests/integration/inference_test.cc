// inference.GRPCInferenceService (the Open Inference Protocol) on a real
// tensord, through its generated stub.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/inference_requests.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// slice of a 2x3 FP32 [0..5]: rows 0..1, every other column.
inference::ModelInferRequest InferSliceRequest(const std::string& backend = "cpu") {
  inference::ModelInferRequest request;
  request.set_model_name("slice");
  request.set_id("q");
  AddRaw(request, "input", "FP32", {2, 3}, Bytes<float>({0, 1, 2, 3, 4, 5}));
  AddRaw(request, "offsets", "INT64", {2}, Bytes<int64_t>({0, 0}));
  AddRaw(request, "window_sizes", "INT64", {2}, Bytes<int64_t>({2, 3}));
  AddRaw(request, "window_strides", "INT64", {2}, Bytes<int64_t>({1, 2}));
  (*request.mutable_parameters())["backend"].set_string_param(backend);
  return request;
}

class InferenceTest : public ::testing::Test {
 protected:
  InferenceTest() : stub_(inference::GRPCInferenceService::NewStub(Connect(server_.target()))) {}

  TensordProcess server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(InferenceTest, LiveReadyAndServerMetadata) {
  grpc::ClientContext live_context;
  inference::ServerLiveResponse live;
  ASSERT_THAT(stub_->ServerLive(&live_context, {}, &live), GrpcOk());
  EXPECT_TRUE(live.live());
  grpc::ClientContext ready_context;
  inference::ServerReadyResponse ready;
  ASSERT_THAT(stub_->ServerReady(&ready_context, {}, &ready), GrpcOk());
  EXPECT_TRUE(ready.ready());
  grpc::ClientContext metadata_context;
  inference::ServerMetadataResponse metadata;
  ASSERT_THAT(stub_->ServerMetadata(&metadata_context, {}, &metadata), GrpcOk());
  EXPECT_EQ(metadata.name(), "tensord");
  EXPECT_FALSE(metadata.version().empty());
}

TEST_F(InferenceTest, ModelReadyAndMetadata) {
  inference::ModelReadyRequest request;
  request.set_name("scatter_elements");
  request.set_version("1");
  {
    grpc::ClientContext context;
    inference::ModelReadyResponse response;
    ASSERT_THAT(stub_->ModelReady(&context, request, &response), GrpcOk());
    EXPECT_TRUE(response.ready());
  }
  {
    request.set_name("resnet50");
    grpc::ClientContext context;
    inference::ModelReadyResponse response;
    EXPECT_THAT(stub_->ModelReady(&context, request, &response),
                GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("model \"resnet50\"")));
  }
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("slice");
  grpc::ClientContext context;
  inference::ModelMetadataResponse metadata;
  ASSERT_THAT(stub_->ModelMetadata(&context, metadata_request, &metadata), GrpcOk());
  std::vector<std::string> inputs;
  for (const auto& input : metadata.inputs()) inputs.push_back(input.name());
  EXPECT_THAT(inputs, ElementsAre("input", "offsets", "window_sizes", "window_strides"));
  EXPECT_EQ(metadata.outputs(0).name(), "output");
  EXPECT_THAT(metadata.versions(), ElementsAre("1"));
}

TEST_F(InferenceTest, ModelInferSlices) {
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  ASSERT_THAT(stub_->ModelInfer(&context, InferSliceRequest(), &response), GrpcOk());
  EXPECT_EQ(response.model_name(), "slice");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "q");
  EXPECT_EQ(response.parameters().at("backend").string_param(), "cpu");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "output");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(2, 2));
  EXPECT_THAT(response.raw_output_contents(), ElementsAre(Bytes<float>({0, 2, 3, 5})));
  EXPECT_THAT(AwaitLogLine(server_, {"\"method\":\"ModelInfer\"", "\"op\":\"slice\""}),
              HasSubstr("\"status\":\"OK\""));
}

TEST_F(InferenceTest, ModelInferOnOpenClReportsTheDevice) {
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  ASSERT_THAT(stub_->ModelInfer(&context, InferSliceRequest("opencl"), &response), GrpcOk());
  EXPECT_THAT(response.parameters().at("backend").string_param(), HasSubstr("opencl:"));
  EXPECT_THAT(response.raw_output_contents(), ElementsAre(Bytes<float>({0, 2, 3, 5})));
}

// BF16 and BOOL are tensorop.v1's BFLOAT16 and BOOL: copied bit for bit on
// both backends and answered with their own datatypes; neither is an index.
TEST_F(InferenceTest, Bf16AndBoolAreDtypesOfTheirOwn) {
  for (const std::string backend : {"cpu", "opencl"}) {
    SCOPED_TRACE(backend);
    inference::ModelInferRequest request = InferSliceRequest(backend);
    // 1.5, -0.0, a signalling NaN, -inf, 0.1 and the largest finite value.
    *request.mutable_raw_input_contents(0) =
        Bytes<uint16_t>({0x3fc0, 0x8000, 0x7f81, 0xff80, 0x3dcd, 0x7f7f});
    request.mutable_inputs(0)->set_datatype("BF16");
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    ASSERT_THAT(stub_->ModelInfer(&context, request, &response), GrpcOk());
    EXPECT_EQ(response.outputs(0).datatype(), "BF16");
    EXPECT_THAT(response.raw_output_contents(),
                ElementsAre(Bytes<uint16_t>({0x3fc0, 0x7f81, 0xff80, 0x7f7f})));

    *request.mutable_raw_input_contents(0) = std::string("\x01\x00\x02\x00\x01\x01", 6);
    request.mutable_inputs(0)->set_datatype("BOOL");
    grpc::ClientContext bool_context;
    ASSERT_THAT(stub_->ModelInfer(&bool_context, request, &response), GrpcOk());
    EXPECT_EQ(response.outputs(0).datatype(), "BOOL");
    EXPECT_THAT(response.raw_output_contents(), ElementsAre(std::string("\x01\x02\x00\x01", 4)));
  }
  inference::ModelInferRequest scatter;
  scatter.set_model_name("scatter_elements");
  AddRaw(scatter, "input", "FP32", {2}, Bytes<float>({1, 2}));
  AddRaw(scatter, "indices", "BOOL", {1}, std::string("\x01", 1));
  AddRaw(scatter, "updates", "FP32", {1}, Bytes<float>({9}));
  AddRaw(scatter, "axis", "INT64", {1}, Bytes<int64_t>({0}));
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  EXPECT_THAT(stub_->ModelInfer(&context, scatter, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("indices.dtype is bool; it must be int32, int64, uint32 or "
                                     "uint64")));
}

TEST_F(InferenceTest, NativeValidationErrorsAreInvalidArgument) {
  inference::ModelInferRequest request = InferSliceRequest();
  *request.mutable_raw_input_contents(3) = Bytes<int64_t>({1, 0});
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  EXPECT_THAT(stub_->ModelInfer(&context, request, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("slice.window_strides[1] must not be 0")));
  request.set_model_name("conv");
  grpc::ClientContext unknown_context;
  EXPECT_THAT(stub_->ModelInfer(&unknown_context, request, &response),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("model \"conv\"")));
}

TEST_F(InferenceTest, TinySlicesRunWhereTheyAreReadAndTheRestOnWorkers) {
  // A request of at most 32 KiB is parsed in gRPC's reaction and runs there
  // when it is a copy of at most 16 KiB on the CPU, as Run's.
  const auto run_here = [&] { return MetricValue(server_, "tensorop_requests_run_here_total"); };
  const auto infer = [&](const inference::ModelInferRequest& request,
                         inference::ModelInferResponse* response) {
    grpc::ClientContext context;
    return stub_->ModelInfer(&context, request, response);
  };
  const int64_t before = run_here();
  inference::ModelInferResponse response;
  ASSERT_THAT(infer(InferSliceRequest(), &response), GrpcOk());
  EXPECT_THAT(response.raw_output_contents(), ElementsAre(Bytes<float>({0, 2, 3, 5})));
  EXPECT_EQ(run_here(), before + 1);
  // Inputs of 2 x 2052 floats (16416 bytes: past the bound, parsed here) and
  // of 2 x 8192 (64 KiB, parsed on a worker), sliced as above: a worker's.
  for (const int64_t cols : {2052, 8192}) {
    std::vector<float> values(static_cast<size_t>(2 * cols));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    inference::ModelInferRequest wide = InferSliceRequest();
    wide.clear_inputs();
    wide.clear_raw_input_contents();
    AddRaw(wide, "input", "FP32", {2, cols}, Bytes<float>(values));
    AddRaw(wide, "offsets", "INT64", {2}, Bytes<int64_t>({0, 0}));
    AddRaw(wide, "window_sizes", "INT64", {2}, Bytes<int64_t>({2, 3}));
    AddRaw(wide, "window_strides", "INT64", {2}, Bytes<int64_t>({1, 2}));
    ASSERT_THAT(infer(wide, &response), GrpcOk()) << cols;
    const float row1 = static_cast<float>(cols);
    EXPECT_THAT(response.raw_output_contents(), ElementsAre(Bytes<float>({0, 2, row1, row1 + 2})))
        << cols;
  }
  ASSERT_THAT(infer(InferSliceRequest("opencl"), &response), GrpcOk());
  EXPECT_THAT(response.parameters().at("backend").string_param(), HasSubstr("opencl:"));
  inference::ModelInferRequest bad = InferSliceRequest();
  *bad.mutable_raw_input_contents(3) = Bytes<int64_t>({1, 0});
  EXPECT_THAT(infer(bad, &response),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("slice.window_strides[1] must not be 0")));
  EXPECT_EQ(run_here(), before + 1);
}

// A 10 MiB UINT8 [10240, 1024] with bytes no two rows share.
constexpr int64_t kRows = 10240, kCols = 1024;
std::string RowsBytes() {
  std::string bytes(static_cast<size_t>(kRows * kCols), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7 + i / 4093) % 256);
  return bytes;
}

inference::ModelInferRequest SplitRowsRequest(const std::string& bytes, int64_t axis,
                                              std::vector<int64_t> sizes) {
  inference::ModelInferRequest request;
  request.set_model_name("split");
  request.set_id("rows");
  AddRaw(request, "input", "UINT8", {kRows, kCols}, bytes);
  AddRaw(request, "axis", "INT64", {1}, Bytes<int64_t>({axis}));
  AddRaw(request, "split", "INT64", {2}, Bytes<int64_t>(sizes));
  for (const char* name : {"output_1", "output_0", "output_1"})
    request.add_outputs()->set_name(name);
  return request;
}

TEST_F(InferenceTest, OutputsAreAnsweredFromTheBuffersTheKernelsWrote) {
  // Split into the left and right 512 columns, asked for as output_1,
  // output_0, output_1: each output is written once into a buffer of the
  // pool that becomes its raw_output_contents entries.
  const std::string bytes = RowsBytes();
  std::string left, right;
  for (int64_t row = 0; row < kRows; ++row) {
    left += bytes.substr(static_cast<size_t>(row * kCols), 512);
    right += bytes.substr(static_cast<size_t>(row * kCols + 512), 512);
  }
  const inference::ModelInferRequest request = SplitRowsRequest(bytes, 1, {512, 512});
  const int64_t buffers_before = PoolBuffers(server_);
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  ASSERT_THAT(stub_->ModelInfer(&context, request, &response), GrpcOk());
  EXPECT_EQ(response.id(), "rows");
  ASSERT_EQ(response.outputs_size(), 3);
  EXPECT_EQ(response.outputs(0).name(), "output_1");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(kRows, 512));
  EXPECT_EQ(response.outputs(1).name(), "output_0");
  ASSERT_EQ(response.raw_output_contents_size(), 3);
  EXPECT_TRUE(response.raw_output_contents(0) == right);
  EXPECT_TRUE(response.raw_output_contents(1) == left);
  EXPECT_TRUE(response.raw_output_contents(2) == right);
  EXPECT_EQ(PoolBuffers(server_), buffers_before + 2);
  // ModelStreamInfer wraps the same answer.
  grpc::ClientContext stream_context;
  auto stream = stub_->ModelStreamInfer(&stream_context);
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  inference::ModelStreamInferResponse streamed;
  ASSERT_TRUE(stream->Read(&streamed));
  ASSERT_THAT(stream->Finish(), GrpcOk());
  EXPECT_EQ(streamed.error_message(), "");
  EXPECT_EQ(streamed.infer_response().SerializeAsString(), response.SerializeAsString());
}

TEST_F(InferenceTest, OutputsThatAreReceivedBytesAreAnsweredWithThemInPlace) {
  // Split into 4096 and 6144 whole rows: each output is a run of the input's
  // bytes, answered with the slices gRPC received them in: no pool buffer.
  const std::string bytes = RowsBytes();
  const std::string first = bytes.substr(0, 4096 * kCols), second = bytes.substr(4096 * kCols);
  const int64_t buffers_before = PoolBuffers(server_);
  inference::ModelInferResponse response;
  {
    grpc::ClientContext context;
    ASSERT_THAT(stub_->ModelInfer(&context, SplitRowsRequest(bytes, 0, {4096, 6144}), &response),
                GrpcOk());
  }
  EXPECT_EQ(response.parameters().at("backend").string_param(), "cpu");
  ASSERT_EQ(response.raw_output_contents_size(), 3);
  EXPECT_TRUE(response.raw_output_contents(0) == second);
  EXPECT_TRUE(response.raw_output_contents(1) == first);
  EXPECT_TRUE(response.raw_output_contents(2) == second);
  EXPECT_EQ(PoolBuffers(server_), buffers_before);
  EXPECT_THAT(AwaitLogLine(server_, {"\"method\":\"ModelInfer\"", "\"op\":\"split\""}),
              HasSubstr("\"bytes_in\":10485760"));
  // Rows 1000..5999 backwards: the kernel reads the received bytes where they
  // lie and writes a pool buffer.
  inference::ModelInferRequest backwards;
  backwards.set_model_name("slice");
  AddRaw(backwards, "input", "UINT8", {kRows, kCols}, bytes);
  AddRaw(backwards, "offsets", "INT64", {2}, Bytes<int64_t>({1000, 0}));
  AddRaw(backwards, "window_sizes", "INT64", {2}, Bytes<int64_t>({5000, kCols}));
  AddRaw(backwards, "window_strides", "INT64", {2}, Bytes<int64_t>({-1, 1}));
  {
    grpc::ClientContext context;
    ASSERT_THAT(stub_->ModelInfer(&context, backwards, &response), GrpcOk());
  }
  std::string expected;
  for (int64_t row = 5999; row >= 1000; --row) {
    expected += bytes.substr(static_cast<size_t>(row * kCols), kCols);
  }
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_TRUE(response.raw_output_contents(0) == expected);
  EXPECT_EQ(PoolBuffers(server_), buffers_before + 1);
  // OPENCL runs on the device, as asked.
  inference::ModelInferRequest on_device = SplitRowsRequest(bytes, 0, {4096, 6144});
  (*on_device.mutable_parameters())["backend"].set_string_param("opencl");
  {
    grpc::ClientContext context;
    ASSERT_THAT(stub_->ModelInfer(&context, on_device, &response), GrpcOk());
  }
  EXPECT_THAT(response.parameters().at("backend").string_param(), HasSubstr("opencl:"));
  ASSERT_EQ(response.raw_output_contents_size(), 3);
  EXPECT_TRUE(response.raw_output_contents(1) == first);
}

TEST_F(InferenceTest, LargeScatterInputsAreReadFromTheRequest) {
  // A 1 MiB scatter whose indices (64 KiB) and input are large enough to be
  // left where they were received: a scatter's indices are read while
  // planning, so they are taken into the request as protobuf would.
  constexpr int64_t kBytes = int64_t{1} << 20, kUpdates = 8192;
  std::string bytes(static_cast<size_t>(kBytes), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  std::vector<int64_t> indices(kUpdates);
  for (int64_t i = 0; i < kUpdates; ++i) indices[static_cast<size_t>(i)] = 3 * i + 1;
  inference::ModelInferRequest request;
  request.set_model_name("scatter_elements");
  AddRaw(request, "input", "UINT8", {kBytes}, bytes);
  AddRaw(request, "indices", "INT64", {kUpdates}, Bytes<int64_t>(indices));
  AddRaw(request, "updates", "UINT8", {kUpdates}, std::string(kUpdates, '\xab'));
  AddRaw(request, "axis", "INT64", {1}, Bytes<int64_t>({0}));
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  ASSERT_THAT(stub_->ModelInfer(&context, request, &response), GrpcOk());
  std::string expected = bytes;
  for (int64_t index : indices) expected[static_cast<size_t>(index)] = '\xab';
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_TRUE(response.raw_output_contents(0) == expected);
}

TEST_F(InferenceTest, StreamAnswersEveryRequestAndGoesOnAfterAnError) {
  grpc::ClientContext context;
  auto stream = stub_->ModelStreamInfer(&context);
  inference::ModelInferRequest bad = InferSliceRequest();
  *bad.mutable_raw_input_contents(3) = Bytes<int64_t>({1, 0});
  ASSERT_TRUE(stream->Write(InferSliceRequest()));
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Write(InferSliceRequest()));
  stream->WritesDone();
  std::vector<inference::ModelStreamInferResponse> answers;
  inference::ModelStreamInferResponse answer;
  while (stream->Read(&answer)) answers.push_back(answer);
  ASSERT_THAT(stream->Finish(), GrpcOk());
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].error_message(), "");
  EXPECT_THAT(answers[0].infer_response().raw_output_contents(),
              ElementsAre(Bytes<float>({0, 2, 3, 5})));
  EXPECT_THAT(answers[1].error_message(),
              HasSubstr("INVALID_ARGUMENT: slice.window_strides[1] must not be 0"));
  EXPECT_EQ(answers[2].error_message(), "");
  EXPECT_THAT(answers[2].infer_response().raw_output_contents(),
              ElementsAre(Bytes<float>({0, 2, 3, 5})));
  EXPECT_THAT(AwaitLogLine(server_, {"\"method\":\"ModelStreamInfer\"", "INVALID_ARGUMENT"}),
              HasSubstr("window_strides"));
}

TEST_F(InferenceTest, RepositoryIndexAndStatistics) {
  {
    grpc::ClientContext context;
    inference::RepositoryIndexResponse index;
    ASSERT_THAT(stub_->RepositoryIndex(&context, {}, &index), GrpcOk());
    std::vector<std::string> names;
    for (const auto& model : index.models()) {
      names.push_back(model.name());
      EXPECT_EQ(model.state(), "READY");
      EXPECT_EQ(model.version(), "1");
    }
    EXPECT_THAT(names, ElementsAre("slice", "strided_slice", "split", "scatter_elements",
                                   "transpose", "reshape", "expand", "tile", "gather",
                                   "gather_elements", "join", "pad"));
  }
  inference::ModelInferRequest bad = InferSliceRequest();
  *bad.mutable_raw_input_contents(3) = Bytes<int64_t>({1, 0});
  const std::vector<inference::ModelInferRequest> requests = {InferSliceRequest(),
                                                              InferSliceRequest(), bad};
  for (const inference::ModelInferRequest& request : requests) {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    (void)stub_->ModelInfer(&context, request, &response);
  }
  inference::ModelStatisticsRequest request;
  request.set_name("slice");
  grpc::ClientContext context;
  inference::ModelStatisticsResponse stats;
  ASSERT_THAT(stub_->ModelStatistics(&context, request, &stats), GrpcOk());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).name(), "slice");
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 2u);
  EXPECT_EQ(stats.model_stats(0).inference_stats().fail().count(), 1u);
  // Every call takes some time: the durations are counted, not 0.
  EXPECT_GT(stats.model_stats(0).inference_stats().success().ns(), 0u);
  EXPECT_GT(stats.model_stats(0).inference_stats().fail().ns(), 0u);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 2u);
}

TEST_F(InferenceTest, ReflectionListsTheService) {
  grpc::ClientContext context;
  RawCall call(Connect(server_.target()),
               "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &context);
  // ServerReflectionRequest{list_services: "*"} (field 7); the answer's
  // list_services_response (6) holds ServiceResponse (1) names (1).
  ASSERT_TRUE(call.Write(WireString(7, "*")));
  ASSERT_TRUE(call.WritesDone());
  std::optional<std::string> response = call.Read();
  ASSERT_TRUE(response.has_value());
  std::vector<std::string> names;
  for (const std::string& list : WireStrings(*response, 6)) {
    for (const std::string& service : WireStrings(list, 1)) {
      for (const std::string& name : WireStrings(service, 1)) names.push_back(name);
    }
  }
  EXPECT_THAT(names, Contains("inference.GRPCInferenceService"));
  EXPECT_THAT(names, Contains("tensorop.v1.TensorOp"));
  while (call.Read().has_value()) {
  }
  EXPECT_THAT(call.Finish(), GrpcOk());
}

}  // namespace
}  // namespace tensorop::testing
