#include "server/v2/inference_http_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/v2/inference_http.h"
#include "server/v2/inference_models.h"
#include "server/v2/json_tensor_data.h"
#include "server/wire/status_map.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

constexpr char kSliceJson[] = R"({"id":"a","parameters":{"backend":"cpu"},"inputs":[
  {"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]},
  {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
  {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
  {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";

TEST(InferenceHttpJson, JsonDataBecomesRawInputContents) {
  absl::StatusOr<HttpInferRequest> parsed =
      ParseHttpInferRequest("slice", "", kSliceJson, std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const inference::ModelInferRequest& request = parsed->request;
  EXPECT_EQ(request.model_name(), "slice");
  EXPECT_EQ(request.id(), "a");
  EXPECT_EQ(request.parameters().at("backend").string_param(), "cpu");
  ASSERT_EQ(request.inputs_size(), 4);
  ASSERT_EQ(request.raw_input_contents_size(), 4);
  EXPECT_EQ(request.inputs(0).datatype(), "FP32");
  EXPECT_THAT(request.inputs(0).shape(), ::testing::ElementsAre(2, 3));
  EXPECT_THAT(Values<float>(request.raw_input_contents(0)),
              ::testing::ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Values<int64_t>(request.raw_input_contents(1)), ::testing::ElementsAre(0, 1));
  EXPECT_FALSE(parsed->binary_default);
}

TEST(InferenceHttpJson, BinaryPartsFollowTheJsonInInputOrder) {
  const std::string json =
      R"({"inputs":[{"name":"input","shape":[3],"datatype":"UINT8","parameters":{"binary_data_size":3}},)"
      R"({"name":"offsets","shape":[1],"datatype":"INT64","data":[1]}],)"
      R"("parameters":{"binary_data_output":true}})";
  const std::string body = json + std::string("\x07\x08\x09", 3);
  absl::StatusOr<HttpInferRequest> parsed =
      ParseHttpInferRequest("slice", "1", body, static_cast<int64_t>(json.size()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->request.raw_input_contents(0), std::string("\x07\x08\x09", 3));
  EXPECT_THAT(Values<int64_t>(parsed->request.raw_input_contents(1)), ::testing::ElementsAre(1));
  EXPECT_TRUE(parsed->binary_default);
  EXPECT_FALSE(parsed->request.parameters().contains("binary_data_output"));

  absl::StatusOr<HttpInferRequest> short_body = ParseHttpInferRequest(
      "slice", "1", body.substr(0, body.size() - 1), static_cast<int64_t>(json.size()));
  EXPECT_EQ(short_body.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_body.status().message(),
              HasSubstr("slice: input \"input\": parameters.binary_data_size = 3 but only 2 "
                        "binary bytes are left"));
  absl::StatusOr<HttpInferRequest> extra =
      ParseHttpInferRequest("slice", "1", body + "z", static_cast<int64_t>(json.size()));
  EXPECT_THAT(extra.status().message(),
              HasSubstr("1 binary bytes that no input's binary_data_size claims"));
  absl::StatusOr<HttpInferRequest> no_header =
      ParseHttpInferRequest("slice", "1", json, std::nullopt);
  EXPECT_THAT(no_header.status().message(),
              HasSubstr("has parameters.binary_data_size but the request has no "
                        "Inference-Header-Content-Length header"));
}

TEST(InferenceHttpJson, ElementsOfTheWrongTypeAreRefusedByTensorAndIndex) {
  auto parse = [](const std::string& input) {
    return ParseHttpInferRequest("slice", "", R"({"inputs":[)" + input + "]}", std::nullopt)
        .status();
  };
  absl::Status status =
      parse(R"({"name":"offsets","shape":[2],"datatype":"INT64","data":[1,"x"]})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("slice: input \"offsets\" data[1] = \"x\" is not an integer (INT64)"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"UINT8","data":[256]})");
  EXPECT_THAT(status.message(), HasSubstr("input \"input\" data[0] = 256 is not a UINT8"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"INT8","data":[1.5]})");
  EXPECT_THAT(status.message(), HasSubstr("data[0] = 1.5 is not an integer (INT8)"));
  status = parse(R"({"name":"input","shape":[2],"datatype":"BOOL","data":[true,1]})");
  EXPECT_THAT(status.message(), HasSubstr("data[1] = 1 is not true or false (BOOL)"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"FP16","data":[70000]})");
  EXPECT_THAT(status.message(), HasSubstr("data[0] = 70000 is not within FP16's range"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"BF16","data":[4e38]})");
  EXPECT_THAT(status.message(), HasSubstr("is not within BF16's range"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"BF16","data":[true]})");
  EXPECT_THAT(status.message(), HasSubstr("data[0] = true is not a number (BF16)"));
  status = parse(R"({"name":"input","shape":[1],"datatype":"FP32"})");
  EXPECT_THAT(status.message(),
              HasSubstr("input \"input\" has neither \"data\" nor parameters.binary_data_size"));
  status = ParseHttpInferRequest("slice", "", "{\"inputs\": [", std::nullopt).status();
  EXPECT_THAT(status.message(), HasSubstr("slice: the request is not valid JSON"));
  std::string deep = std::string(100, '[') + "1" + std::string(100, ']');
  status = parse(R"({"name":"input","shape":[1],"datatype":"FP32","data":)" + deep + "}");
  EXPECT_THAT(status.message(),
              HasSubstr("slice: the request nests arrays and objects more than 64 deep"));
}

TEST(InferenceHttpJson, AnUnknownDatatypeIsLeftToTheModelConversion) {
  absl::StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest(
      "slice", "", R"({"inputs":[{"name":"input","shape":[1],"datatype":"BYTES","data":["a"]}]})",
      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<v1::RunRequest> run = ToRunRequest(parsed->request);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(),
              HasSubstr("slice: input \"input\" has datatype \"BYTES\", which is not one of"));
}

TEST(InferenceHttpJson, Bf16AndBoolComeAndGoAsJsonValues) {
  absl::StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest(
      "slice", "",
      R"({"inputs":[{"name":"input","shape":[3],"datatype":"BF16","data":[1.5,-0.0,0.1]},
                    {"name":"updates","shape":[2],"datatype":"BOOL","data":[true,false]}]})",
      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(Values<uint16_t>(parsed->request.raw_input_contents(0)),
              ::testing::ElementsAre(0x3fc0, 0x8000, 0x3dcd));
  EXPECT_EQ(parsed->request.raw_input_contents(1), std::string("\x01\x00", 2));

  inference::ModelInferResponse response;
  response.set_model_name("split");
  for (const char* datatype : {"BF16", "BOOL"}) {
    auto* output = response.add_outputs();
    output->set_name(datatype);
    output->set_datatype(datatype);
    output->add_shape(2);
  }
  const uint16_t bf16[] = {0x3fc0, 0xc049};
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(bf16), 4));
  response.add_raw_output_contents(std::string("\x00\x01", 2));
  absl::StatusOr<HttpBody> json = RenderHttpInferResponse(HttpInferRequest{}, response);
  ASSERT_TRUE(json.ok()) << json.status();
  const nlohmann::json body = nlohmann::json::parse(json->body);
  EXPECT_EQ(body["outputs"][0]["data"][0], 1.5);
  EXPECT_EQ(body["outputs"][0]["data"][1], -3.140625);
  EXPECT_EQ(body["outputs"][1]["data"], nlohmann::json::parse("[false,true]"));
}

// JSON has no NaN or infinity; Triton's JSON reads and writes them bare. Bare
// in a body they are floats; inside a string (an id) they stay text.
TEST(InferenceHttpJson, NaNAndInfinitiesComeAndGoAsTritonWritesThem) {
  absl::StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest("slice", "",
                                                                  R"({"id":"NaN Infinity","inputs":[
            {"name":"input","shape":[4],"datatype":"FP32","data":[NaN,Infinity,-Infinity,-0.0]},
            {"name":"updates","shape":[3],"datatype":"FP16","data":[-Infinity,"NaN",1.5]}]})",
                                                                  std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->request.id(), "NaN Infinity");
  const std::vector<float> fp32 = Values<float>(parsed->request.raw_input_contents(0));
  ASSERT_EQ(fp32.size(), 4u);
  EXPECT_TRUE(std::isnan(fp32[0]));
  EXPECT_EQ(fp32[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp32[2], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(fp32[3]));
  EXPECT_THAT(Values<uint16_t>(parsed->request.raw_input_contents(1)),
              ::testing::ElementsAre(0xfc00, 0x7e00, 0x3e00));
  // A literal that is only the start of a word is no number, and a string
  // other than the three is no float.
  EXPECT_THAT(ParseHttpInferRequest("slice", "",
                                    R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32",
                                        "data":[NaNa]}]})",
                                    std::nullopt)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseHttpInferRequest("slice", "",
                                    R"({"inputs":[{"name":"input","shape":[1],"datatype":"FP32",
                                        "data":["nan"]}]})",
                                    std::nullopt)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a number (FP32)")));

  inference::ModelInferResponse response;
  response.set_model_name("slice");
  response.set_id("NaN");
  auto* output = response.add_outputs();
  output->set_name("output");
  output->set_datatype("FP64");
  output->add_shape(4);
  const double values[] = {std::numeric_limits<double>::quiet_NaN(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::infinity(), 0.25};
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(values), 32));
  absl::StatusOr<HttpBody> json = RenderHttpInferResponse(HttpInferRequest{}, response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(json->body, HasSubstr(R"("data":[NaN,-Infinity,Infinity,0.25])"));
  EXPECT_THAT(json->body, HasSubstr(R"("id":"NaN")"));
}

TEST(InferenceHttpJson, AnswersAsJsonDataOrBinaryParts) {
  inference::ModelInferResponse response;
  response.set_model_name("split");
  response.set_model_version("1");
  response.set_id("r");
  (*response.mutable_parameters())["backend"].set_string_param("cpu");
  for (const char* name : {"output_0", "output_1"}) {
    auto* output = response.add_outputs();
    output->set_name(name);
    output->set_datatype("INT16");
    output->add_shape(2);
  }
  const int16_t a[] = {-1, 2}, b[] = {3, 4};
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(a), 4));
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(b), 4));

  HttpInferRequest asked;
  absl::StatusOr<HttpBody> json = RenderHttpInferResponse(asked, response);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->content_type, "application/json");
  EXPECT_FALSE(json->header_length.has_value());
  EXPECT_EQ(nlohmann::json::parse(json->body),
            nlohmann::json::parse(R"({"model_name":"split","model_version":"1","id":"r",
              "parameters":{"backend":"cpu"},"outputs":[
              {"name":"output_0","datatype":"INT16","shape":[2],"data":[-1,2]},
              {"name":"output_1","datatype":"INT16","shape":[2],"data":[3,4]}]})"));

  asked.binary_default = true;
  asked.binary_outputs["output_0"] = false;
  absl::StatusOr<HttpBody> binary = RenderHttpInferResponse(asked, response);
  ASSERT_TRUE(binary.ok());
  ASSERT_TRUE(binary->header_length.has_value());
  const nlohmann::json header =
      nlohmann::json::parse(binary->body.substr(0, *binary->header_length));
  EXPECT_EQ(header["outputs"][0]["data"], nlohmann::json::parse("[-1,2]"));
  EXPECT_EQ(header["outputs"][1]["parameters"]["binary_data_size"], 4);
  EXPECT_EQ(binary->body.substr(*binary->header_length),
            std::string(reinterpret_cast<const char*>(b), 4));
}

TEST(InferenceHttpJson, SharedMemoryInputsAndOutputsCarryTheirParametersAndNoBytes) {
  const std::string json = R"({"inputs":[
    {"name":"input","shape":[2,3],"datatype":"FP32","parameters":{"shared_memory_region":"r",
     "shared_memory_offset":64,"shared_memory_byte_size":24}},
    {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
    {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
    {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}],
    "outputs":[{"name":"output","parameters":{"shared_memory_region":"r",
     "shared_memory_byte_size":16}}]})";
  absl::StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest("slice", "", json, std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const inference::ModelInferRequest& request = parsed->request;
  ASSERT_EQ(request.inputs_size(), 4);
  // No raw_input_contents entry for the input in shared memory, as over gRPC.
  ASSERT_EQ(request.raw_input_contents_size(), 3);
  EXPECT_THAT(Values<int64_t>(request.raw_input_contents(0)), ::testing::ElementsAre(0, 1));
  const auto& in = request.inputs(0).parameters();
  EXPECT_EQ(in.at("shared_memory_region").string_param(), "r");
  EXPECT_EQ(in.at("shared_memory_offset").int64_param(), 64);
  EXPECT_EQ(in.at("shared_memory_byte_size").int64_param(), 24);
  ASSERT_EQ(request.outputs_size(), 1);
  EXPECT_EQ(request.outputs(0).parameters().at("shared_memory_region").string_param(), "r");
  EXPECT_EQ(request.outputs(0).parameters().at("shared_memory_byte_size").int64_param(), 16);

  // Converted by inference_models' conversion into native references.
  inference::ModelInferRequest copy = request;
  absl::StatusOr<v1::RunRequest> run = ToRunRequest(copy);
  ASSERT_TRUE(run.ok()) << run.status();

  auto parse = [](const std::string& input) {
    return ParseHttpInferRequest("slice", "", R"({"inputs":[)" + input + "]}", std::nullopt)
        .status();
  };
  absl::Status both =
      parse(R"({"name":"input","shape":[1],"datatype":"FP32","data":[1],)"
            R"("parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}})");
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(both.message(),
            "slice: input \"input\" has both parameters.shared_memory_region and \"data\"");
  both = parse(R"({"name":"input","shape":[1],"datatype":"FP32","parameters":)"
               R"({"shared_memory_region":"r","shared_memory_byte_size":4,"binary_data_size":4}})");
  EXPECT_EQ(both.message(),
            "slice: input \"input\" has both parameters.shared_memory_region and "
            "parameters.binary_data_size");
}

TEST(InferenceHttpJson, AnOutputInSharedMemoryIsAnsweredWithoutData) {
  HttpInferRequest asked;
  asked.binary_default = true;  // even so: no binary part for it
  inference::ModelInferResponse response;
  response.set_model_name("split");
  response.set_model_version("1");
  auto* shared = response.add_outputs();
  shared->set_name("output_0");
  shared->set_datatype("INT16");
  shared->add_shape(2);
  (*shared->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*shared->mutable_parameters())["shared_memory_byte_size"].set_int64_param(4);
  response.add_raw_output_contents();  // empty, as ToModelInferResponse leaves it
  auto* inline_output = response.add_outputs();
  inline_output->set_name("output_1");
  inline_output->set_datatype("INT16");
  inline_output->add_shape(1);
  response.add_raw_output_contents(std::string("\x05\x00", 2));

  absl::StatusOr<HttpBody> body = RenderHttpInferResponse(asked, response);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_TRUE(body->header_length.has_value());
  const nlohmann::json header = nlohmann::json::parse(body->body.substr(0, *body->header_length));
  EXPECT_EQ(header["outputs"][0], nlohmann::json::parse(R"({"name":"output_0","datatype":"INT16",
      "shape":[2],"parameters":{"shared_memory_region":"r","shared_memory_byte_size":4}})"));
  EXPECT_EQ(header["outputs"][1]["parameters"]["binary_data_size"], 2);
  EXPECT_EQ(body->body.substr(*body->header_length), std::string("\x05\x00", 2));

  // Every output in shared memory: plain JSON.
  asked.binary_default = false;
  response.mutable_outputs()->RemoveLast();
  response.mutable_raw_output_contents()->RemoveLast();
  body = RenderHttpInferResponse(asked, response);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(body->header_length.has_value());
  EXPECT_EQ(body->content_type, "application/json");
  EXPECT_FALSE(nlohmann::json::parse(body->body)["outputs"][0].contains("data"));
}

TEST(InferenceHttpJson, SystemSharedMemoryBodies) {
  absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> request =
      ParseSystemSharedMemoryRegister("r", R"({"key":"/obj","offset":8,"byte_size":16})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->name(), "r");
  EXPECT_EQ(request->key(), "/obj");
  EXPECT_EQ(request->offset(), 8u);
  EXPECT_EQ(request->byte_size(), 16u);
  request = ParseSystemSharedMemoryRegister("r", R"({"key":"/obj","byte_size":16})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->offset(), 0u);
  EXPECT_EQ(ParseSystemSharedMemoryRegister("r", "[1]").status().message(),
            "register shared memory region \"r\": the body is not a JSON object {\"key\", "
            "\"offset\", \"byte_size\"}");
  EXPECT_EQ(ParseSystemSharedMemoryRegister("r", R"({"key":"k"})").status().message(),
            "register shared memory region \"r\": \"byte_size\" is missing");
  EXPECT_EQ(ParseSystemSharedMemoryRegister("r", R"({"key":"k","offset":1.5,"byte_size":1})")
                .status()
                .message(),
            "register shared memory region \"r\": \"offset\" = 1.5 is not a non-negative integer");

  inference::SystemSharedMemoryStatusResponse status;
  for (const char* name : {"zeta", "alpha"}) {
    auto& region = (*status.mutable_regions())[name];
    region.set_name(name);
    region.set_key("k");
    region.set_offset(0);
    region.set_byte_size(64);
  }
  EXPECT_EQ(nlohmann::json::parse(SystemSharedMemoryStatusJson(status)),
            nlohmann::json::parse(R"([{"name":"alpha","key":"k","offset":0,"byte_size":64},
                                      {"name":"zeta","key":"k","offset":0,"byte_size":64}])"));
}

// Issue 36, item 1: nesting is bounded at the parse, wherever it is, and no
// user value is quoted whole into a message.
TEST(InferenceHttpJson, NestingPastTheLimitIsRefusedWhereverItIs) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string input_start = R"({"inputs":[{"name":"input","datatype":"UINT8",)";
  for (const std::string& body :
       {input_start + R"("shape":[)" + deep + "]}]}",
        input_start + R"("shape":[1],"parameters":{"p":)" + deep + "}}]}",
        input_start + R"("shape":[1],"parameters":{"binary_data_size":)" + deep + "}}]}",
        input_start + R"("shape":[1],"data":[{"a":)" + deep + "}]}]}",
        R"({"parameters":{"x":)" + deep + "}}"}) {
    absl::Status status = ParseHttpInferRequest("slice", "", body, std::nullopt).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "slice: the request nests arrays and objects more than 64 deep");
  }
  // 64 levels are fine: the request, its inputs, an input, 61 of data.
  const std::string deepest = std::string(61, '[') + "1" + std::string(61, ']');
  absl::Status status =
      ParseHttpInferRequest("slice", "", input_start + R"("shape":[1],"data":)" + deepest + "}]}",
                            std::nullopt)
          .status();
  EXPECT_TRUE(status.ok()) << status;
  // Values quoted in messages are cut: a 1 MB string is not echoed back.
  status = ParseHttpInferRequest(
               "slice", "",
               input_start + R"("shape":[")" + std::string(1 << 20, 'x') + R"("],"data":[1]}]})",
               std::nullopt)
               .status();
  EXPECT_THAT(status.message(),
              HasSubstr(R"(shape[0] = ")" + std::string(64, 'x') + R"("... is not an integer)"));
  EXPECT_LT(status.message().size(), 300u);
  status = ParseHttpInferRequest("slice", "", input_start + R"("shape":[[1,2,3]],"data":[1]}]})",
                                 std::nullopt)
               .status();
  EXPECT_THAT(status.message(), HasSubstr("shape[0] = an array of 3 items is not an integer"));

  const std::string register_deep = std::string(30000, '[') + std::string(30000, ']');
  EXPECT_EQ(ParseSystemSharedMemoryRegister("r", R"({"key":"k","byte_size":)" + register_deep + "}")
                .status()
                .message(),
            "register shared memory region \"r\" nests arrays and objects more than 64 deep");
  EXPECT_EQ(
      ParseSystemSharedMemoryRegister("r", std::string(70000, ' ') + "{}").status().message(),
      "register shared memory region \"r\": the body of 70002 bytes is over the 65536 bytes a "
      "{\"key\", \"offset\", \"byte_size\"} object may take");
}

// Names, keys and the model a client sent are quoted cut (80 bytes) and
// escaped: no message grows with what a client sends (http_request_fuzzer).
TEST(InferenceHttpJson, UserTextInMessagesIsCut) {
  const std::string long_name(100000, 'n');
  absl::Status status =
      ParseHttpInferRequest(long_name, "",
                            R"({"inputs":[{"name":")" + long_name +
                                R"(","datatype":"FP32","shape":[1],"parameters":{")" + long_name +
                                R"(":[1]}}]})",
                            std::nullopt)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            absl::StrCat(std::string(80, 'n'), "...: input \"", std::string(80, 'n'),
                         "...\" parameter \"", std::string(80, 'n'),
                         "...\" = an array of 1 items is not a bool, number or "
                         "string"));
  status = ParseHttpInferRequest("slice", "", "{\"" + long_name, std::nullopt).status();
  EXPECT_THAT(status.message(), HasSubstr("slice: the request is not valid JSON: "));
  EXPECT_LT(status.message().size(), 400u);
  status = ParseHttpInferRequest(
               "slice", "", R"({"inputs":[{"name":"a\"b\u0001","datatype":"FP32","shape":[1]}]})",
               std::nullopt)
               .status();
  EXPECT_EQ(status.message(),
            R"(slice: input "a\"b?" has neither "data" nor parameters.binary_data_size)");
}

// Issue 36, item 5: what a parse holds is reserved as it grows, at what the
// values take (about 32 bytes per byte of nested arrays, 16 of flat numbers).
TEST(InferenceHttpJson, TheParseReservesWhatItsValuesTake) {
  auto reserved_for = [](const std::string& data) {
    int64_t reserved = 0;
    const std::string body =
        R"({"inputs":[{"name":"input","datatype":"UINT8","shape":[1],"data":)" + data + "}]}";
    absl::Status status =
        ParseHttpInferRequest("slice", "", body, std::nullopt, [&](int64_t bytes) {
          reserved += bytes;
          return absl::OkStatus();
        }).status();
    EXPECT_TRUE(status.ok()) << status;
    return static_cast<double>(reserved) / static_cast<double>(body.size());
  };
  std::string flat = "[0";
  std::string nested = "[[[[0]]]";
  for (int i = 0; i < 500000; ++i) flat += ",0";
  for (int i = 0; i < 200000; ++i) nested += ",[[[0]]]";
  flat += "]";
  nested += "]";
  // Flat: 32 bytes an element (a 16-byte value in a vector up to twice its
  // size) per 2 bytes of text, plus the raw byte.
  EXPECT_NEAR(reserved_for(flat), 16.5, 1.0);
  // Nested: three arrays and their slots, and a number, per 8 bytes.
  EXPECT_NEAR(reserved_for(nested), 28.0, 1.5);

  // A refusal stops the parse with it.
  int calls = 0;
  absl::Status refused =
      ParseHttpInferRequest(
          "slice", "",
          R"({"inputs":[{"name":"input","datatype":"UINT8","shape":[1],"data":)" + nested + "}]}",
          std::nullopt,
          [&](int64_t) {
            return ++calls < 3 ? absl::OkStatus()
                               : absl::ResourceExhaustedError("over --max_memory_bytes");
          })
          .status();
  EXPECT_EQ(refused, absl::ResourceExhaustedError("over --max_memory_bytes"));
  EXPECT_EQ(calls, 3);

  // Bare NaNs are quoted in a copy of the text, reserved before it is made.
  std::string nans = "[NaN";
  for (int i = 0; i < 100000; ++i) nans += ",NaN";
  nans += "]";
  std::vector<int64_t> asked;
  refused =
      ParseHttpInferRequest(
          "slice", "",
          R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1],"data":)" + nans + "}]}",
          std::nullopt,
          [&](int64_t bytes) {
            asked.push_back(bytes);
            return absl::ResourceExhaustedError("over --max_memory_bytes");
          })
          .status();
  EXPECT_EQ(refused, absl::ResourceExhaustedError("over --max_memory_bytes"));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_GT(asked[0], static_cast<int64_t>(nans.size() + 2 * 100000));
}

TEST(InferenceHttpJson, ErrorsAndMetadata) {
  EXPECT_EQ(HttpErrorJson(absl::NotFoundError("model \"x\" is not served here")),
            R"({"error":"model \"x\" is not served here"})");
  absl::StatusOr<inference::ModelMetadataResponse> metadata = ModelMetadata("split", "");
  ASSERT_TRUE(metadata.ok());
  const nlohmann::json json = nlohmann::json::parse(ModelMetadataJson(*metadata));
  EXPECT_EQ(json["name"], "split");
  EXPECT_EQ(json["versions"], nlohmann::json::parse(R"(["1"])"));
  EXPECT_EQ(json["inputs"][1]["name"], "axis");
  EXPECT_EQ(json["inputs"][1]["datatype"], "INT64");
}

TEST(InferenceHttpJson, HttpStatusFollowsTheCode) {
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(ToHttpStatus(absl::StatusCode::kDeadlineExceeded), 504);
}

}  // namespace
}  // namespace tensorop::server
