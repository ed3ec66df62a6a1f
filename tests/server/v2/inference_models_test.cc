#include "server/v2/inference_models.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/operator_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/inference_requests.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;

using ::tensorop::testing::AddRaw;
using ::tensorop::testing::Bytes;

void AddInt64(inference::ModelInferRequest& request, const std::string& name,
              std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  AddRaw(request, name, "INT64", {name == "axis" ? 1 : n}, Bytes(values));
}

inference::ModelInferRequest SliceRequest() {
  inference::ModelInferRequest request;
  request.set_model_name("slice");
  request.set_id("r1");
  AddRaw(request, "input", "FP32", {2, 3}, Bytes<float>({0, 1, 2, 3, 4, 5}));
  AddInt64(request, "offsets", {0, 0});
  AddInt64(request, "window_sizes", {2, 3});
  AddInt64(request, "window_strides", {1, 2});
  return request;
}

TEST(InferenceModelsTest, Int32ParametersAreWidenedToTheNativeInt64Attributes) {
  inference::ModelInferRequest slice;
  slice.set_model_name("slice");
  AddRaw(slice, "input", "FP32", {2, 3}, Bytes<float>({0, 1, 2, 3, 4, 5}));
  AddRaw(slice, "offsets", "INT32", {2}, Bytes<int32_t>({1, 2}));
  AddRaw(slice, "window_sizes", "INT32", {2}, Bytes<int32_t>({1, 3}));
  AddRaw(slice, "window_strides", "INT32", {2}, Bytes<int32_t>({1, -2}));
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(slice));
  EXPECT_THAT(run.slice().offsets(), ElementsAre(1, 2));
  EXPECT_THAT(run.slice().window_sizes(), ElementsAre(1, 3));
  EXPECT_THAT(run.slice().window_strides(), ElementsAre(1, -2));  // sign-extended
  ASSERT_EQ(run.outputs_size(), 1);
  EXPECT_THAT(run.outputs(0).sizes(), ElementsAre(1, 2));

  inference::ModelInferRequest split;
  split.set_model_name("split");
  AddRaw(split, "input", "FP32", {2, 3}, Bytes<float>({0, 1, 2, 3, 4, 5}));
  AddRaw(split, "axis", "INT32", {1}, Bytes<int32_t>({1}));
  AddRaw(split, "split", "INT32", {2}, Bytes<int32_t>({1, 2}));
  ASSERT_OK_AND_ASSIGN(run, ToRunRequest(split));
  EXPECT_EQ(run.split().axis(), 1);
  ASSERT_EQ(run.outputs_size(), 2);
  EXPECT_THAT(run.outputs(1).sizes(), ElementsAre(2, 2));
}

TEST(InferenceModelsTest, ModelsAreTheOperators) {
  EXPECT_THAT(InferenceModelNames(),
              ElementsAre("slice", "strided_slice", "split", "scatter_elements", "transpose",
                          "reshape", "expand", "tile", "gather", "gather_elements", "join", "pad"));
}

// Each model is made from its operator's row and attributes message: a new
// operator is a model with nothing written here, and an attribute of a type
// the models cannot take yet (not INT64, not one string) fails this test.
TEST(InferenceModelsTest, EachModelIsItsOperatorsInputsThenItsAttributes) {
  for (const OperatorInfo& op : kOperators) {
    SCOPED_TRACE(std::string(op.name));
    ASSERT_OK_AND_ASSIGN(inference::ModelMetadataResponse metadata, ModelMetadata(op.name, ""));
    std::vector<std::string> expected(op.input_names.begin(), op.input_names.end());
    if (op.numbered_inputs) expected.push_back("inputs_0");  // the rest found by number
    const google::protobuf::FieldDescriptor* field =
        v1::RunRequest::descriptor()->FindFieldByName(std::string(op.name));
    ASSERT_NE(field, nullptr) << "RunRequest.op has no field " << op.name;
    const google::protobuf::Descriptor& attrs = *field->message_type();
    for (int i = 0; i < attrs.field_count(); ++i) expected.push_back(attrs.field(i)->name());
    if (op.outputs == OutputRule::kOneOrMoreGiven) expected.push_back("split");
    std::vector<std::string> names;
    for (const auto& input : metadata.inputs()) {
      names.push_back(input.name());
      const google::protobuf::FieldDescriptor* attribute = attrs.FindFieldByName(input.name());
      if (attribute == nullptr) continue;
      if (attribute->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
        EXPECT_FALSE(attribute->is_repeated()) << input.name() << ": one string per attribute";
        EXPECT_EQ(input.datatype(), "BYTES") << input.name();
      } else {
        EXPECT_EQ(attribute->cpp_type(), google::protobuf::FieldDescriptor::CPPTYPE_INT64)
            << input.name() << ": v2 models take INT64 and text parameters only";
        EXPECT_EQ(input.datatype(), "INT64") << input.name();
      }
      EXPECT_THAT(input.shape(), ElementsAre(attribute->is_repeated() ? -1 : 1)) << input.name();
    }
    EXPECT_EQ(names, expected);
    for (absl::string_view optional : op.optional_attrs) {
      EXPECT_NE(attrs.FindFieldByName(std::string(optional)), nullptr)
          << optional << " is not an attribute";
    }
  }
}

TEST(InferenceModelsTest, OnlyTheRowsOptionalAttributesMayBeLeftOut) {
  inference::ModelInferRequest slice = SliceRequest();
  slice.mutable_inputs()->RemoveLast();  // window_strides
  slice.mutable_raw_input_contents()->RemoveLast();
  EXPECT_THAT(ToRunRequest(slice),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slice: input \"window_strides\" is missing")));
  inference::ModelInferRequest strided;
  strided.set_model_name("strided_slice");
  AddRaw(strided, "input", "FP32", {4}, Bytes<float>({0, 1, 2, 3}));
  AddInt64(strided, "begin", {1});
  AddInt64(strided, "end", {3});
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(strided));
  EXPECT_THAT(run.strided_slice().begin(), ElementsAre(1));
  EXPECT_THAT(run.strided_slice().stride(), ElementsAre());
}

TEST(InferenceModelsTest, UnknownModelOrVersionIsNotFound) {
  EXPECT_THAT(CheckModel("resnet", ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model \"resnet\" is not served")));
  EXPECT_THAT(
      CheckModel("slice", "2"),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("model \"slice\" has no version \"2\"")));
  EXPECT_TRUE(CheckModel("slice", "1").ok());
  EXPECT_TRUE(CheckModel("split", "").ok());
}

TEST(InferenceModelsTest, EveryDatatypeNameMapsBothWays) {
  const std::vector<std::pair<std::string, DType>> names = {
      {"UINT8", DType::kUint8},   {"UINT16", DType::kUint16}, {"UINT32", DType::kUint32},
      {"UINT64", DType::kUint64}, {"INT8", DType::kInt8},     {"INT16", DType::kInt16},
      {"INT32", DType::kInt32},   {"INT64", DType::kInt64},   {"FP16", DType::kFloat16},
      {"FP32", DType::kFloat32},  {"FP64", DType::kFloat64},  {"BF16", DType::kBfloat16},
      {"BOOL", DType::kBool}};
  ASSERT_EQ(names.size(), std::size(kAllDTypes));
  for (const auto& [name, dtype] : names) {
    EXPECT_EQ(DTypeFromV2Datatype(name), dtype) << name;
    EXPECT_EQ(V2DatatypeName(dtype), name) << name;
  }
  EXPECT_EQ(DTypeFromV2Datatype("BYTES"), std::nullopt);
  EXPECT_EQ(DTypeFromV2Datatype("bool"), std::nullopt);
}

TEST(InferenceModelsTest, MetadataListsEveryInputAndOutput) {
  ASSERT_OK_AND_ASSIGN(inference::ModelMetadataResponse split, ModelMetadata("split", ""));
  EXPECT_EQ(split.name(), "split");
  EXPECT_THAT(split.versions(), ElementsAre("1"));
  ASSERT_EQ(split.inputs_size(), 3);
  EXPECT_EQ(split.inputs(1).name(), "axis");
  EXPECT_EQ(split.inputs(1).datatype(), "INT64");
  EXPECT_THAT(split.inputs(1).shape(), ElementsAre(1));
  EXPECT_EQ(split.inputs(2).name(), "split");
  EXPECT_THAT(split.inputs(2).shape(), ElementsAre(-1));
  EXPECT_EQ(split.outputs(0).name(), "output_0");
  ASSERT_OK_AND_ASSIGN(inference::ModelMetadataResponse strided,
                       ModelMetadata("strided_slice", "1"));
  EXPECT_EQ(strided.inputs_size(), 9);
  EXPECT_EQ(strided.inputs(8).name(), "ellipsis_mask");
  EXPECT_THAT(ModelMetadata("nope", ""), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

// The config is the metadata in Triton's terms, with what a tensor takes said
// in full in the parameters.
TEST(InferenceModelsTest, ConfigIsTheMetadataWithWhatEachTensorTakes) {
  ASSERT_OK_AND_ASSIGN(inference::ModelConfigResponse answer, ModelConfig("scatter_elements", ""));
  const inference::ModelConfig& config = answer.config();
  EXPECT_EQ(config.name(), "scatter_elements");
  EXPECT_EQ(config.platform(), "tensorop");
  EXPECT_EQ(config.backend(), "tensorop");
  EXPECT_EQ(config.max_batch_size(), 0);
  ASSERT_EQ(config.input_size(), 4);
  EXPECT_EQ(config.input(0).name(), "input");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_THAT(config.input(0).dims(), ElementsAre(-1));
  EXPECT_EQ(config.input(1).name(), "indices");
  EXPECT_EQ(config.input(1).data_type(), inference::TYPE_INT64);
  EXPECT_EQ(config.input(3).name(), "axis");
  EXPECT_THAT(config.input(3).dims(), ElementsAre(1));
  EXPECT_FALSE(config.input(3).optional());
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_EQ(config.output(0).name(), "output");
  const auto parameter = [&](const std::string& key) {
    auto found = config.parameters().find(key);
    return found == config.parameters().end() ? std::string("(none)")
                                              : found->second.string_value();
  };
  EXPECT_EQ(parameter("input.datatypes"),
            "BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, "
            "FP64");
  EXPECT_EQ(parameter("input.dims"), "any rank from 1 to 8");
  EXPECT_EQ(parameter("indices.datatypes"), "INT64, INT32, UINT64, UINT32");
  EXPECT_EQ(parameter("axis.datatypes"), "INT64, INT32");
  EXPECT_EQ(parameter("axis.dims"), "[1]");
  EXPECT_EQ(parameter("output.datatypes"), "the input's");
  EXPECT_EQ(parameter("outputs"), "(none)");

  ASSERT_OK_AND_ASSIGN(answer, ModelConfig("strided_slice", "1"));
  ASSERT_EQ(answer.config().input_size(), 9);
  EXPECT_FALSE(answer.config().input(1).optional());  // begin
  EXPECT_TRUE(answer.config().input(4).optional());   // begin_mask
  ASSERT_OK_AND_ASSIGN(answer, ModelConfig("split", ""));
  EXPECT_EQ(answer.config().output(0).name(), "output_0");
  EXPECT_EQ(answer.config().parameters().at("outputs").string_value(),
            "output_0 ... output_{k-1}, one per entry of the split tensor");
  EXPECT_THAT(ModelConfig("slice", "2"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no version \"2\"")));
}

TEST(InferenceModelsTest, SliceRawBecomesANativeRequestWithTheWholeWindow) {
  inference::ModelInferRequest request = SliceRequest();
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  EXPECT_EQ(run.id(), "r1");
  EXPECT_EQ(run.backend(), v1::AUTO);
  ASSERT_TRUE(run.has_slice());
  EXPECT_THAT(run.slice().offsets(), ElementsAre(0, 0));
  EXPECT_THAT(run.slice().window_sizes(), ElementsAre(2, 3));
  EXPECT_THAT(run.slice().window_strides(), ElementsAre(1, 2));
  ASSERT_EQ(run.outputs_size(), 1);
  EXPECT_THAT(run.outputs(0).sizes(), ElementsAre(2, 2));  // 1 + (3 - 1) / 2
  const v1::Tensor& input = run.inputs().at("input");
  EXPECT_EQ(input.dtype(), v1::FLOAT32);
  EXPECT_THAT(input.sizes(), ElementsAre(2, 3));
  EXPECT_EQ(input.data(), Bytes<float>({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(run.inputs().size(), 1u);  // the parameters are attributes
}

// Join's model takes inputs_0 and any further numbered inputs, in any order;
// the native request carries them under the same names, its output described
// (for shared memory) from all of them. Names outside the numbering are named.
TEST(InferenceModelsTest, JoinTakesNumberedInputs) {
  inference::ModelInferRequest request;
  request.set_model_name("join");
  AddRaw(request, "inputs_1", "INT16", {1, 3}, Bytes(std::vector<int16_t>{4, 5, 6}));
  AddRaw(request, "inputs_0", "INT16", {2, 3}, Bytes(std::vector<int16_t>{0, 1, 2, 3, 4, 5}));
  AddInt64(request, "axis", {0});
  inference::ModelInferRequest stranger = request;  // before the conversion takes the bytes
  AddRaw(stranger, "inputs_x", "INT16", {1, 3}, Bytes(std::vector<int16_t>{7, 8, 9}));
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  ASSERT_TRUE(run.has_join());
  EXPECT_EQ(run.join().axis(), 0);
  EXPECT_EQ(run.inputs().size(), 2u);
  EXPECT_THAT(run.inputs().at("inputs_1").sizes(), ElementsAre(1, 3));
  EXPECT_EQ(run.inputs().at("inputs_0").data(), Bytes(std::vector<int16_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(run.outputs_size(), 0);  // derived by the operator

  EXPECT_THAT(ToRunRequest(stranger),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       Eq("join: inputs[3] \"inputs_x\" is not an input of join; its inputs are "
                          "inputs_0, inputs_1, ... (numbered without gaps), axis")));
  inference::ModelInferRequest first_missing;
  first_missing.set_model_name("join");
  AddRaw(first_missing, "inputs_1", "INT16", {1, 3}, Bytes(std::vector<int16_t>{4, 5, 6}));
  AddInt64(first_missing, "axis", {0});
  EXPECT_THAT(ToRunRequest(first_missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("join: input \"inputs_0\" is missing")));

  ASSERT_OK_AND_ASSIGN(inference::ModelConfigResponse answer, ModelConfig("join", ""));
  EXPECT_EQ(answer.config().parameters().at("inputs").string_value(),
            "inputs_0 ... inputs_{n-1}, one or more (at most 4096), numbered without gaps, of one "
            "datatype; joined in that order");
}

// pad's mode and value are text: one BYTES element each (Triton's serialization
// in raw bytes, or bytes_contents), read exactly as sent.
TEST(InferenceModelsTest, PadTakesItsTextParametersAsOneBytesElement) {
  const auto text = [](const std::string& value) {
    const uint32_t length = static_cast<uint32_t>(value.size());
    return std::string(reinterpret_cast<const char*>(&length), sizeof length) + value;
  };
  inference::ModelInferRequest request;
  request.set_model_name("pad");
  AddRaw(request, "input", "UINT64", {2}, Bytes(std::vector<uint64_t>{1, 2}));
  AddInt64(request, "start_padding", {1});
  AddInt64(request, "end_padding", {2});
  AddRaw(request, "value", "BYTES", {1}, text("18446744073709551615"));
  // Copies made before a conversion takes the bytes.
  inference::ModelInferRequest reflected = request;
  AddRaw(reflected, "mode", "BYTES", {1}, text("reflect"));
  inference::ModelInferRequest as_int = request;
  AddInt64(as_int, "mode", {1});
  inference::ModelInferRequest cut = request;
  AddRaw(cut, "mode", "BYTES", {1}, text("edge").substr(0, 6));
  inference::ModelInferRequest two = request;
  AddRaw(two, "mode", "BYTES", {2}, text("edge") + text("edge"));
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  ASSERT_TRUE(run.has_pad());
  EXPECT_EQ(run.pad().mode(), "");  // left out: constant
  EXPECT_EQ(run.pad().value(), "18446744073709551615");
  EXPECT_THAT(run.pad().end_padding(), ElementsAre(2));
  ASSERT_OK_AND_ASSIGN(run, ToRunRequest(reflected));
  EXPECT_EQ(run.pad().mode(), "reflect");

  EXPECT_THAT(
      ToRunRequest(as_int),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "pad: input \"mode\" has datatype \"INT64\"; it must be BYTES (one string)"));
  EXPECT_THAT(ToRunRequest(cut),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "pad: input \"mode\" has 6 raw bytes; one BYTES element is its 4-byte "
                       "little-endian length, then that many bytes"));
  EXPECT_THAT(ToRunRequest(two), StatusIs(absl::StatusCode::kInvalidArgument,
                                          "pad: input \"mode\" has shape [2]; it must be [1]"));
}

TEST(InferenceModelsTest, StridedSliceTakesOptionalMasksAndLeavesOutputSizesToTheOperator) {
  inference::ModelInferRequest request;
  request.set_model_name("strided_slice");
  AddRaw(request, "input", "FP16", {4}, std::string(8, '\0'));
  AddInt64(request, "begin", {1});
  AddInt64(request, "end", {3});
  AddInt64(request, "shrink_axis_mask", {0});
  (*request.mutable_parameters())["backend"].set_string_param("OpenCL");
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  EXPECT_EQ(run.backend(), v1::OPENCL);
  EXPECT_EQ(run.inputs().at("input").dtype(), v1::FLOAT16);
  EXPECT_THAT(run.strided_slice().begin(), ElementsAre(1));
  EXPECT_THAT(run.strided_slice().end(), ElementsAre(3));
  EXPECT_TRUE(run.strided_slice().stride().empty());
  EXPECT_THAT(run.strided_slice().shrink_axis_mask(), ElementsAre(0));
  EXPECT_EQ(run.outputs_size(), 0);
}

TEST(InferenceModelsTest, TypedContentsAreConvertedPerDatatype) {
  inference::ModelInferRequest request;
  request.set_model_name("split");
  auto* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("INT16");
  input->add_shape(4);
  for (int v : {-3, 7, 300, -32768}) input->mutable_contents()->add_int_contents(v);
  auto* axis = request.add_inputs();
  axis->set_name("axis");
  axis->set_datatype("INT64");
  axis->add_shape(1);
  axis->mutable_contents()->add_int64_contents(0);
  auto* split = request.add_inputs();
  split->set_name("split");
  split->set_datatype("INT64");
  split->add_shape(2);
  split->mutable_contents()->add_int64_contents(1);
  split->mutable_contents()->add_int64_contents(3);
  (*request.mutable_parameters())["backend"].set_string_param("cpu");
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  EXPECT_EQ(run.backend(), v1::CPU);
  EXPECT_EQ(run.inputs().at("input").dtype(), v1::INT16);
  EXPECT_EQ(run.inputs().at("input").data(), Bytes(std::vector<int16_t>{-3, 7, 300, -32768}));
  EXPECT_EQ(run.split().axis(), 0);
  ASSERT_EQ(run.outputs_size(), 2);
  EXPECT_THAT(run.outputs(0).sizes(), ElementsAre(1));
  EXPECT_THAT(run.outputs(1).sizes(), ElementsAre(3));
}

TEST(InferenceModelsTest, TypedContentsOutOfRangeAreNamed) {
  inference::ModelInferRequest request = SliceRequest();
  request.clear_raw_input_contents();
  request.mutable_inputs(0)->set_datatype("INT8");
  request.mutable_inputs(0)->clear_shape();
  request.mutable_inputs(0)->add_shape(2);
  request.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
  request.mutable_inputs(0)->mutable_contents()->add_int_contents(200);
  EXPECT_THAT(ToRunRequest(request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "slice: input \"input\" contents.int_contents[1] = 200 is out of range "
                       "for the datatype"));
}

TEST(InferenceModelsTest, ErrorsNameTheModelTensorAndValues) {
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_raw_input_contents(0)->resize(20);
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "slice: input \"input\" has 5 elements (20 bytes) but its shape [2,3] "
                         "of FP32 holds 6 (24 bytes)"));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_inputs(1)->set_datatype("FP32");
    request.mutable_inputs(1)->set_shape(0, 4);
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "slice: input \"offsets\" has datatype FP32; it must be INT64 or INT32"));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_inputs(0)->set_datatype("BYTES");
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("slice: input \"input\" has datatype \"BYTES\", which is not "
                                   "one of BOOL, UINT8")));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_inputs(3)->set_name("strides");
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "slice: inputs[3] \"strides\" is not an input of slice; its inputs are "
                         "input, offsets, window_sizes, window_strides"));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_inputs()->RemoveLast();
    request.mutable_raw_input_contents()->RemoveLast();
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("slice: input \"window_strides\" is missing")));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.mutable_raw_input_contents()->RemoveLast();
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("slice: raw_input_contents has 3 entries for 4 inputs")));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    (*request.mutable_parameters())["backend"].set_string_param("gpu");
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "slice: parameter \"backend\" is \"gpu\"; use \"auto\", \"cpu\" or "
                         "\"opencl\""));
  }
  {
    inference::ModelInferRequest request = SliceRequest();
    request.set_model_name("conv");
    EXPECT_THAT(ToRunRequest(request), StatusIs(absl::StatusCode::kNotFound, HasSubstr("conv")));
  }
  {
    inference::ModelInferRequest request;
    request.set_model_name("scatter_elements");
    AddRaw(request, "input", "FP32", {2}, Bytes<float>({1, 2}));
    AddRaw(request, "indices", "INT64", {1}, Bytes<int64_t>({0}));
    AddRaw(request, "updates", "FP32", {1}, Bytes<float>({9}));
    AddRaw(request, "axis", "INT64", {2}, Bytes<int64_t>({0, 0}));
    EXPECT_THAT(ToRunRequest(request),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "scatter_elements: input \"axis\" has shape [2]; it must be [1]"));
  }
}

TEST(InferenceModelsTest, ResponseCarriesRawOutputsNamesAndBackend) {
  inference::ModelInferRequest request;
  request.set_model_name("split");
  request.set_id("s");
  AddRaw(request, "input", "BOOL", {3}, std::string("\x01\x00\x01", 3));
  AddInt64(request, "axis", {0});
  AddInt64(request, "split", {1, 2});
  ASSERT_OK_AND_ASSIGN(v1::RunRequest run, ToRunRequest(request));
  EXPECT_EQ(run.inputs().at("input").dtype(), v1::BOOL);
  v1::RunResponse response;
  response.set_backend("cpu");
  for (const auto& [sizes, data] :
       std::vector<std::pair<int64_t, std::string>>{{1, "\x01"}, {2, std::string("\x00\x01", 2)}}) {
    v1::Tensor* tensor = response.add_outputs();
    tensor->set_dtype(v1::BOOL);
    tensor->add_sizes(sizes);
    tensor->add_strides(1);
    tensor->set_data(data);
  }
  ASSERT_OK_AND_ASSIGN(inference::ModelInferResponse answer,
                       ToModelInferResponse(request, response));
  EXPECT_EQ(answer.model_name(), "split");
  EXPECT_EQ(answer.model_version(), "1");
  EXPECT_EQ(answer.id(), "s");
  EXPECT_EQ(answer.parameters().at("backend").string_param(), "cpu");
  ASSERT_EQ(answer.outputs_size(), 2);
  EXPECT_EQ(answer.outputs(0).name(), "output_0");
  EXPECT_EQ(answer.outputs(1).name(), "output_1");
  EXPECT_EQ(answer.outputs(1).datatype(), "BOOL");
  EXPECT_THAT(answer.outputs(1).shape(), ElementsAre(2));
  EXPECT_THAT(answer.raw_output_contents(), ElementsAre("\x01", std::string("\x00\x01", 2)));

  // Only the outputs asked for, in the order asked.
  v1::RunResponse again = response;
  request.add_outputs()->set_name("output_1");
  ASSERT_OK_AND_ASSIGN(answer, ToModelInferResponse(request, again));
  ASSERT_EQ(answer.outputs_size(), 1);
  EXPECT_EQ(answer.outputs(0).name(), "output_1");
  request.add_outputs()->set_name("output_7");
  again = response;
  EXPECT_THAT(ToModelInferResponse(request, again),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "split: outputs[1] \"output_7\" is not an output; the outputs are "
                       "output_0, output_1"));
}

TEST(InferenceModelsTest, SharedMemoryParametersBecomeNativeReferences) {
  // strided_slice's input from region "r" at 64; its output (sizes derived
  // here, [2]) to "r" at 128.
  inference::ModelInferRequest request;
  request.set_model_name("strided_slice");
  auto* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("INT32");
  input->add_shape(4);
  (*input->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*input->mutable_parameters())["shared_memory_offset"].set_int64_param(64);
  (*input->mutable_parameters())["shared_memory_byte_size"].set_int64_param(16);
  AddInt64(request, "begin", {0});
  AddInt64(request, "end", {4});
  AddInt64(request, "stride", {2});
  auto* output = request.add_outputs();
  output->set_name("output");
  (*output->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*output->mutable_parameters())["shared_memory_offset"].set_uint64_param(128);
  (*output->mutable_parameters())["shared_memory_byte_size"].set_int64_param(8);
  absl::StatusOr<v1::RunRequest> run = ToRunRequest(request);
  ASSERT_TRUE(run.ok()) << run.status();
  const v1::Tensor& tensor = run->inputs().at("input");
  EXPECT_TRUE(tensor.data().empty());
  EXPECT_EQ(tensor.shared_memory().region(), "r");
  EXPECT_EQ(tensor.shared_memory().offset(), 64);
  EXPECT_EQ(tensor.shared_memory().byte_length(), 16);
  ASSERT_EQ(run->outputs_size(), 1);
  EXPECT_THAT(run->outputs(0).sizes(), ElementsAre(2));
  EXPECT_EQ(run->outputs(0).shared_memory().region(), "r");
  EXPECT_EQ(run->outputs(0).shared_memory().offset(), 128);
  EXPECT_EQ(run->outputs(0).shared_memory().byte_length(), 8);

  // The answer: the layout, the request's parameters, an empty entry.
  v1::RunResponse response;
  response.set_backend("cpu");
  v1::Tensor* written = response.add_outputs();
  written->set_dtype(v1::INT32);
  written->add_sizes(2);
  written->add_strides(1);
  absl::StatusOr<inference::ModelInferResponse> answer = ToModelInferResponse(request, response);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->raw_output_contents_size(), 1);
  EXPECT_TRUE(answer->raw_output_contents(0).empty());
  EXPECT_EQ(answer->outputs(0).parameters().at("shared_memory_region").string_param(), "r");
  EXPECT_EQ(answer->outputs(0).parameters().at("shared_memory_offset").uint64_param(), 128u);

  // An error about that output, from the native pipeline, names it.
  EXPECT_THAT(NameSharedMemoryOutput(
                  request, absl::InvalidArgumentError("outputs[0].shared_memory: byte_length 8")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strided_slice: output \"output\": outputs[0].shared_memory")));
  EXPECT_THAT(NameSharedMemoryOutput(request, absl::InvalidArgumentError("slice.x bad")),
              StatusIs(absl::StatusCode::kInvalidArgument, "slice.x bad"));
}

TEST(InferenceModelsTest, SharedMemoryParameterErrorsNameTheTensor) {
  inference::ModelInferRequest request = SliceRequest();
  (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_offset"].set_int64_param(8);
  EXPECT_THAT(ToRunRequest(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slice: input \"input\": parameter \"shared_memory_offset\" "
                                 "is given without \"shared_memory_region\"")));
  request = SliceRequest();
  (*request.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_int64_param(1);
  request.mutable_raw_input_contents()->DeleteSubrange(0, 1);  // in shared memory: no entry
  EXPECT_THAT(ToRunRequest(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameter \"shared_memory_region\" must be a string")));
  request = SliceRequest();
  auto* output = request.add_outputs();
  output->set_name("output");
  (*output->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*output->mutable_parameters())["shared_memory_byte_size"].set_string_param("8");
  EXPECT_THAT(ToRunRequest(request).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slice: output \"output\": parameter "
                                 "\"shared_memory_byte_size\" must be an int64")));
}

}  // namespace
}  // namespace tensorop::server
