// The Open Inference Protocol's system shared memory extension on a real
// tensord: SystemSharedMemoryRegister/Status/Unregister on the registry of
// tensorop.v1's RegisterSharedMemory, and ModelInfer tensors whose
// parameters ("shared_memory_region", "shared_memory_offset",
// "shared_memory_byte_size") place them in a region.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/shared_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/inference_requests.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// The object is 8 KiB; region "data" is its second half (offset 4096), so a
// region's byte 0 is the object's byte 4096.
constexpr int64_t kObjectBytes = 8192;
constexpr int64_t kRegionOffset = 4096;
constexpr int64_t kRegionBytes = 4096;

// Adds input `name` read from `region` at `offset`, `byte_size` bytes.
void AddShared(inference::ModelInferRequest& request, const std::string& name,
               const std::string& datatype, std::vector<int64_t> shape, const std::string& region,
               int64_t offset, int64_t byte_size) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  input->mutable_shape()->Assign(shape.begin(), shape.end());
  auto& parameters = *input->mutable_parameters();
  parameters["shared_memory_region"].set_string_param(region);
  parameters["shared_memory_byte_size"].set_int64_param(byte_size);
  if (offset != 0) parameters["shared_memory_offset"].set_int64_param(offset);
}

// Asks for output `name` written into `region` at `offset`, room `byte_size`.
void AskShared(inference::ModelInferRequest& request, const std::string& name,
               const std::string& region, int64_t offset, int64_t byte_size) {
  auto* output = request.add_outputs();
  output->set_name(name);
  auto& parameters = *output->mutable_parameters();
  parameters["shared_memory_region"].set_string_param(region);
  parameters["shared_memory_byte_size"].set_int64_param(byte_size);
  parameters["shared_memory_offset"].set_int64_param(offset);
}

class InferenceSharedMemoryTest : public ::testing::Test {
 protected:
  InferenceSharedMemoryTest()
      : stub_(inference::GRPCInferenceService::NewStub(Connect(server_.target()))) {}

  void SetUp() override {
    auto created = client::SharedMemoryRegion::Create(
        absl::StrCat("tensorop-v2shm-", getpid(), "-", ++counter_), kObjectBytes);
    ASSERT_TRUE(created.ok()) << created.status();
    object_ = *std::move(created);
    std::memset(object_->bytes().data(), 0xAB, object_->bytes().size());
    ASSERT_THAT(Register("data", "/" + object_->key(), kRegionOffset, kRegionBytes), GrpcOk());
  }

  void TearDown() override {
    grpc::ClientContext context;
    inference::SystemSharedMemoryUnregisterResponse response;
    EXPECT_THAT(stub_->SystemSharedMemoryUnregister(&context, {}, &response), GrpcOk());
  }

  grpc::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t byte_size) {
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_key(key);
    request.set_offset(offset);
    request.set_byte_size(byte_size);
    grpc::ClientContext context;
    inference::SystemSharedMemoryRegisterResponse response;
    return stub_->SystemSharedMemoryRegister(&context, request, &response);
  }

  grpc::Status Status(const std::string& name, inference::SystemSharedMemoryStatusResponse* out) {
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(name);
    grpc::ClientContext context;
    return stub_->SystemSharedMemoryStatus(&context, request, out);
  }

  grpc::Status Unregister(const std::string& name) {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(name);
    grpc::ClientContext context;
    inference::SystemSharedMemoryUnregisterResponse response;
    return stub_->SystemSharedMemoryUnregister(&context, request, &response);
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    grpc::ClientContext context;
    return stub_->ModelInfer(&context, request, response);
  }

  // Region "data"'s bytes [offset, offset + size).
  std::string RegionBytes(int64_t offset, int64_t size) const {
    return std::string(
        reinterpret_cast<const char*>(object_->bytes().data()) + kRegionOffset + offset,
        static_cast<size_t>(size));
  }
  void WriteRegion(int64_t offset, const std::string& bytes) {
    std::memcpy(object_->bytes().data() + kRegionOffset + offset, bytes.data(), bytes.size());
  }

  // slice of a 2x3 FP32 [0..5] read from "data" at 0: rows 0..1, every other
  // column; the output as asked by the caller.
  inference::ModelInferRequest SliceFromRegion() {
    WriteRegion(0, Bytes<float>({0, 1, 2, 3, 4, 5}));
    inference::ModelInferRequest request;
    request.set_model_name("slice");
    request.set_id("shm");
    AddShared(request, "input", "FP32", {2, 3}, "data", 0, 24);
    AddRaw(request, "offsets", "INT64", {2}, Bytes<int64_t>({0, 0}));
    AddRaw(request, "window_sizes", "INT64", {2}, Bytes<int64_t>({2, 3}));
    AddRaw(request, "window_strides", "INT64", {2}, Bytes<int64_t>({1, 2}));
    (*request.mutable_parameters())["backend"].set_string_param("cpu");
    return request;
  }

  static inline int counter_ = 0;
  TensordProcess server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<client::SharedMemoryRegion> object_;
};

TEST_F(InferenceSharedMemoryTest, RegisterStatusAndUnregisterOneOrAll) {
  ASSERT_THAT(Register("head", object_->key(), 0, 1024), GrpcOk());
  inference::SystemSharedMemoryStatusResponse all;
  ASSERT_THAT(Status("", &all), GrpcOk());
  ASSERT_EQ(all.regions_size(), 2);
  const auto& data = all.regions().at("data");
  EXPECT_EQ(data.name(), "data");
  EXPECT_EQ(data.key(), object_->key());
  EXPECT_EQ(data.offset(), 4096u);
  EXPECT_EQ(data.byte_size(), 4096u);
  EXPECT_EQ(all.regions().at("head").offset(), 0u);
  EXPECT_EQ(all.regions().at("head").byte_size(), 1024u);

  inference::SystemSharedMemoryStatusResponse one;
  ASSERT_THAT(Status("head", &one), GrpcOk());
  ASSERT_EQ(one.regions_size(), 1);
  EXPECT_EQ(one.regions().at("head").byte_size(), 1024u);

  // The same registry as tensorop.v1's: its SharedMemoryStatus sees both.
  auto native = v1::TensorOp::NewStub(Connect(server_.target()));
  {
    grpc::ClientContext context;
    v1::SharedMemoryStatusResponse response;
    ASSERT_THAT(native->SharedMemoryStatus(&context, {}, &response), GrpcOk());
    std::vector<std::string> names;
    for (const auto& region : response.regions()) names.push_back(region.region());
    EXPECT_THAT(names, ElementsAre("data", "head"));
    EXPECT_EQ(response.mapped_bytes(), 4096 + 1024);
  }

  // Registering the same name, key, offset and size again renews it.
  EXPECT_THAT(Register("head", object_->key(), 0, 1024), GrpcOk());
  EXPECT_THAT(Unregister("head"), GrpcOk());
  EXPECT_THAT(Status("head", &one),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           HasSubstr("shared memory region \"head\" is not registered")));
  EXPECT_THAT(Unregister("head"),
              GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                           HasSubstr("shared memory region \"head\" is not registered")));

  ASSERT_THAT(Register("head", object_->key(), 0, 1024), GrpcOk());
  EXPECT_THAT(Unregister(""), GrpcOk());  // every region
  inference::SystemSharedMemoryStatusResponse none;
  ASSERT_THAT(Status("", &none), GrpcOk());
  EXPECT_EQ(none.regions_size(), 0);
}

TEST_F(InferenceSharedMemoryTest, RegisterErrorsNameTheField) {
  EXPECT_THAT(Register("data", object_->key(), 0, 4096),
              GrpcStatusIs(grpc::StatusCode::ALREADY_EXISTS,
                           HasSubstr("shared memory region \"data\" is already registered with "
                                     "key \"" +
                                     object_->key() +
                                     "\", offset 4096 and byte_size "
                                     "4096")));
  EXPECT_THAT(Register("a/b", object_->key(), 0, 16),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("name: \"a/b\" is not a region name")));
  EXPECT_THAT(Register("x", "../etc/passwd", 0, 16),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("key: \"../etc/passwd\" is not a shared memory key")));
  EXPECT_THAT(
      Register("x", "tensorop-v2shm-no-such-object", 0, 16),
      GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("cannot open shared memory object "
                                                          "\"tensorop-v2shm-no-such-object\"")));
  EXPECT_THAT(Register("x", object_->key(), 8192, 16),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("offset: 8192 is not inside shared memory object")));
  EXPECT_THAT(
      Register("x", object_->key(), 8000, 200),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                   HasSubstr("byte_size: 200 bytes of shared memory object \"" + object_->key() +
                             "\" requested from offset 8000; it has "
                             "8192")));
  EXPECT_THAT(Register("x", object_->key(), uint64_t{1} << 63, 16),
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           HasSubstr("offset: 9223372036854775808 is more than 2^63 - 1")));
}

TEST_F(InferenceSharedMemoryTest, CudaSharedMemoryIsUnimplementedAndMetadataSaysSystem) {
  grpc::ClientContext context;
  inference::CudaSharedMemoryRegisterResponse response;
  EXPECT_THAT(stub_->CudaSharedMemoryRegister(&context, {}, &response),
              GrpcStatusIs(grpc::StatusCode::UNIMPLEMENTED,
                           HasSubstr("CudaSharedMemoryRegister: tensord serves no CUDA shared "
                                     "memory; only system shared memory")));
  grpc::ClientContext status_context;
  inference::CudaSharedMemoryStatusResponse status;
  EXPECT_THAT(stub_->CudaSharedMemoryStatus(&status_context, {}, &status),
              GrpcStatusIs(grpc::StatusCode::UNIMPLEMENTED, HasSubstr("only system shared")));
  grpc::ClientContext metadata_context;
  inference::ServerMetadataResponse metadata;
  ASSERT_THAT(stub_->ServerMetadata(&metadata_context, {}, &metadata), GrpcOk());
  EXPECT_THAT(metadata.extensions(), ElementsAre("system_shared_memory"));
}

TEST_F(InferenceSharedMemoryTest, SliceReadsAndWritesTheRegion) {
  inference::ModelInferRequest request = SliceFromRegion();
  AskShared(request, "output", "data", 512, 64);
  inference::ModelInferResponse response;
  ASSERT_THAT(Infer(request, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 1);
  const auto& output = response.outputs(0);
  EXPECT_EQ(output.name(), "output");
  EXPECT_EQ(output.datatype(), "FP32");
  EXPECT_THAT(output.shape(), ElementsAre(2, 2));
  EXPECT_EQ(output.parameters().at("shared_memory_region").string_param(), "data");
  EXPECT_EQ(output.parameters().at("shared_memory_offset").int64_param(), 512);
  EXPECT_EQ(output.parameters().at("shared_memory_byte_size").int64_param(), 64);
  // No bytes in the answer; its entry keeps raw_output_contents in step.
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_THAT(response.raw_output_contents(0), IsEmpty());
  EXPECT_EQ(RegionBytes(512, 16), Bytes<float>({0, 2, 3, 5}));
  EXPECT_EQ(RegionBytes(512 + 16, 4), std::string(4, '\xAB'));  // past the output: untouched
  EXPECT_EQ(response.parameters().at("backend").string_param(), "cpu");
}

TEST_F(InferenceSharedMemoryTest, MixedInputsAndOneOutputOfSplitInTheRegion) {
  // split of a 2x2 INT32 (raw) along axis 1: output_1 into the region at 0,
  // output_0 inline.
  inference::ModelInferRequest request;
  request.set_model_name("split");
  AddRaw(request, "input", "INT32", {2, 2}, Bytes<int32_t>({1, 2, 3, 4}));
  AddRaw(request, "axis", "INT64", {1}, Bytes<int64_t>({1}));
  AddRaw(request, "split", "INT64", {2}, Bytes<int64_t>({1, 1}));
  request.add_outputs()->set_name("output_0");
  AskShared(request, "output_1", "data", 0, 8);
  inference::ModelInferResponse response;
  ASSERT_THAT(Infer(request, &response), GrpcOk());
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "output_0");
  EXPECT_EQ(response.raw_output_contents(0), Bytes<int32_t>({1, 3}));
  EXPECT_TRUE(response.outputs(0).parameters().empty());
  EXPECT_EQ(response.outputs(1).name(), "output_1");
  EXPECT_THAT(response.raw_output_contents(1), IsEmpty());
  EXPECT_EQ(RegionBytes(0, 8), Bytes<int32_t>({2, 4}));

  // scatter_elements: input and updates from the region, indices and axis
  // inline, the output (sizes derived: the input's) into the region.
  WriteRegion(64, Bytes<float>({1, 2, 3, 4}));
  WriteRegion(128, Bytes<float>({9}));
  inference::ModelInferRequest scatter;
  scatter.set_model_name("scatter_elements");
  AddShared(scatter, "input", "FP32", {4}, "data", 64, 16);
  AddRaw(scatter, "indices", "INT64", {1}, Bytes<int64_t>({2}));
  AddShared(scatter, "updates", "FP32", {1}, "data", 128, 4);
  AddRaw(scatter, "axis", "INT64", {1}, Bytes<int64_t>({0}));
  AskShared(scatter, "output", "data", 256, 16);
  inference::ModelInferResponse scattered;
  ASSERT_THAT(Infer(scatter, &scattered), GrpcOk());
  EXPECT_THAT(scattered.outputs(0).shape(), ElementsAre(4));
  EXPECT_EQ(RegionBytes(256, 16), Bytes<float>({1, 2, 9, 4}));

  // strided_slice: the output's sizes derived from the attributes.
  WriteRegion(512, Bytes<int64_t>({10, 11, 12, 13, 14, 15}));
  inference::ModelInferRequest strided;
  strided.set_model_name("strided_slice");
  AddShared(strided, "input", "INT64", {6}, "data", 512, 48);
  AddRaw(strided, "begin", "INT64", {1}, Bytes<int64_t>({5}));
  AddRaw(strided, "end", "INT64", {1}, Bytes<int64_t>({0}));
  AddRaw(strided, "stride", "INT64", {1}, Bytes<int64_t>({-2}));
  AskShared(strided, "output", "data", 1024, 24);
  inference::ModelInferResponse sliced;
  ASSERT_THAT(Infer(strided, &sliced), GrpcOk());
  EXPECT_THAT(sliced.outputs(0).shape(), ElementsAre(3));
  EXPECT_EQ(RegionBytes(1024, 24), Bytes<int64_t>({15, 13, 11}));
}

TEST_F(InferenceSharedMemoryTest, BadReferencesAreRefusedNamingTheTensor) {
  inference::ModelInferResponse response;
  {
    inference::ModelInferRequest request = SliceFromRegion();
    (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(
        20);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: input \"input\": parameter "
                                       "\"shared_memory_byte_size\" is 20 but its shape [2,3] "
                                       "of FP32 takes 24 bytes")));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param(
        "ghost");
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                             HasSubstr("inputs[\"input\"].shared_memory: shared memory region "
                                       "\"ghost\" is not registered")));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_offset"].set_int64_param(
        4080);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("inputs[\"input\"].shared_memory: offset 4080 + 24 bytes "
                                       "passes the end of region \"data\" (4096 bytes)")));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    AskShared(request, "output", "data", 512, 8);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: output \"output\": outputs[0].shared_memory: "
                                       "byte_length 8 is less than the 16 bytes")));
  }
  {
    // An output overlapping an input is refused before anything is written.
    inference::ModelInferRequest request = SliceFromRegion();
    AskShared(request, "output", "data", 8, 16);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: output \"output\": outputs[0].shared_memory: bytes "
                                       "[8, 24) of region \"data\" overlap those of "
                                       "inputs[\"input\"].shared_memory [0, 24)")));
    EXPECT_EQ(RegionBytes(0, 24), Bytes<float>({0, 1, 2, 3, 4, 5}));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    auto* offsets = request.mutable_inputs(1);
    (*offsets->mutable_parameters())["shared_memory_region"].set_string_param("data");
    (*offsets->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
    request.mutable_raw_input_contents()->DeleteSubrange(0, 1);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: input \"offsets\" is a parameter tensor: send its "
                                       "values in the request, not in shared memory region "
                                       "\"data\"")));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    (*request.mutable_inputs(0)->mutable_parameters()).erase("shared_memory_byte_size");
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: input \"input\": parameter \"shared_memory_region\" "
                                       "needs \"shared_memory_byte_size\"")));
  }
  {
    inference::ModelInferRequest request = SliceFromRegion();
    AskShared(request, "output_3", "data", 512, 64);
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: outputs[0] \"output_3\" is not an output; the "
                                       "outputs are output")));
  }
  {
    // Inputs in shared memory have no raw_input_contents entry.
    inference::ModelInferRequest request = SliceFromRegion();
    request.add_raw_input_contents("extra");
    EXPECT_THAT(Infer(request, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("slice: raw_input_contents has 4 entries for 3 inputs not "
                                       "in shared memory")));
  }
  // None of them left the region pinned.
  EXPECT_THAT(Unregister("data"), GrpcOk());
}

}  // namespace
}  // namespace tensorop::testing
