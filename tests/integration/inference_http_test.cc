// The v2 HTTP/REST API (server/v2/inference_http.h) against a real tensord on
// loopback: health, metadata, infer with JSON and binary tensors, the error
// statuses and messages, the limits on bodies and memory, slow clients, and
// docs/kserve-v2.md's curl example run exactly as written.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kSliceJson[] = R"({"id":"t","parameters":{"backend":"cpu"},"inputs":[
  {"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]},
  {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
  {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
  {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";

std::unique_ptr<httplib::Client> Client(const TensordProcess& server) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", server.http_port());
  client->set_read_timeout(30, 0);
  return client;
}

TEST(InferenceHttpTest, HealthMetadataAndIndex) {
  TensordProcess server({"--backends=cpu"});
  auto client = Client(server);
  auto live = client->Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  auto ready = client->Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);

  auto metadata = client->Get("/v2");
  ASSERT_TRUE(metadata);
  EXPECT_EQ(metadata->status, 200);
  EXPECT_EQ(Json::parse(metadata->body)["name"], "tensord");

  auto model = client->Get("/v2/models/split/versions/1");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 200);
  const Json split = Json::parse(model->body);
  EXPECT_EQ(split["name"], "split");
  EXPECT_EQ(split["inputs"][1], Json::parse(R"({"name":"axis","datatype":"INT64","shape":[1]})"));

  auto model_ready = client->Get("/v2/models/slice/ready");
  ASSERT_TRUE(model_ready);
  EXPECT_EQ(model_ready->status, 200);

  auto unknown = client->Get("/v2/models/nope");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_THAT(Json::parse(unknown->body)["error"].get<std::string>(),
              HasSubstr("model \"nope\" is not served here"));
  auto version = client->Get("/v2/models/slice/versions/2/ready");
  ASSERT_TRUE(version);
  EXPECT_EQ(version->status, 404);
  EXPECT_THAT(version->body, HasSubstr("has no version \\\"2\\\""));

  auto index = client->Post("/v2/repository/index", "", "application/json");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(Json::parse(index->body).size(), 12u);
  EXPECT_EQ(Json::parse(index->body)[0]["name"], "slice");

  auto route = client->Get("/v2/nothing");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->status, 404);
  EXPECT_THAT(route->body, HasSubstr("no such route: GET /v2/nothing"));
}

TEST(InferenceHttpTest, InfersWithJsonTensors) {
  TensordProcess server({"--backends=cpu"});
  auto answer = Client(server)->Post("/v2/models/slice/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(answer->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Json::parse(answer->body), Json::parse(R"({"model_name":"slice","model_version":"1",
      "id":"t","parameters":{"backend":"cpu"},
      "outputs":[{"name":"output","datatype":"FP32","shape":[2,2],"data":[2.0,3.0,5.0,6.0]}]})"));

  // The same call counts in the statistics.
  auto stats = Client(server)->Get("/v2/models/slice/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(Json::parse(stats->body)["model_stats"][0]["inference_stats"]["success"]["count"], 1);
}

TEST(InferenceHttpTest, InfersWithBinaryTensors) {
  TensordProcess server({"--backends=cpu"});
  const int16_t input[] = {10, 11, 12, 13, 14, 15};
  const int64_t axis[] = {0};
  const int64_t sizes[] = {1, 1};
  const std::string json =
      R"({"inputs":[{"name":"input","shape":[2,3],"datatype":"INT16","parameters":{"binary_data_size":12}},)"
      R"({"name":"axis","shape":[1],"datatype":"INT64","parameters":{"binary_data_size":8}},)"
      R"({"name":"split","shape":[2],"datatype":"INT64","parameters":{"binary_data_size":16}}],)"
      R"("outputs":[{"name":"output_1","parameters":{"binary_data":true}}]})";
  std::string body = json;
  body.append(reinterpret_cast<const char*>(input), sizeof input);
  body.append(reinterpret_cast<const char*>(axis), sizeof axis);
  body.append(reinterpret_cast<const char*>(sizes), sizeof sizes);
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json.size())}};
  auto answer =
      Client(server)->Post("/v2/models/split/infer", headers, body, "application/octet-stream");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const size_t header_length =
      std::stoul(answer->get_header_value("Inference-Header-Content-Length"));
  const Json header = Json::parse(answer->body.substr(0, header_length));
  ASSERT_EQ(header["outputs"].size(), 1u);
  EXPECT_EQ(header["outputs"][0]["name"], "output_1");
  EXPECT_EQ(header["outputs"][0]["shape"], Json::parse("[1,3]"));
  EXPECT_EQ(header["outputs"][0]["parameters"]["binary_data_size"], 6);
  EXPECT_EQ(answer->body.substr(header_length),
            std::string(reinterpret_cast<const char*>(input + 3), 6));
}

TEST(InferenceHttpTest, ErrorsHaveTheGrpcMessagesAndHttpStatuses) {
  TensordProcess server({"--backends=cpu", "--max_message_bytes=65536", "--chunk_bytes=32768"});
  auto client = Client(server);
  std::string bad_datatype = absl::StrReplaceAll(kSliceJson, {{"\"FP32\"", "\"FP99\""}});
  auto answer = client->Post("/v2/models/slice/infer", bad_datatype, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 400);
  EXPECT_THAT(Json::parse(answer->body)["error"].get<std::string>(),
              HasSubstr("slice: input \"input\" has datatype \"FP99\", which is not one of"));

  answer = client->Post("/v2/models/nope/infer", kSliceJson, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 404);
  EXPECT_THAT(answer->body, HasSubstr("model \\\"nope\\\" is not served here"));

  std::string bad_stride = absl::StrReplaceAll(
      kSliceJson, {{R"("window_strides","shape":[2],"datatype":"INT64","data":[1,1])",
                    R"("window_strides","shape":[2],"datatype":"INT64","data":[1,0])"}});
  answer = client->Post("/v2/models/slice/infer", bad_stride, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 400);
  EXPECT_THAT(answer->body, HasSubstr("window_strides[1]"));

  answer = client->Post("/v2/models/slice/infer", "{\"inputs\": 3}", "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 400);
  EXPECT_THAT(answer->body, HasSubstr("slice: the request has no \\\"inputs\\\" array"));

  // Over --max_message_bytes: refused from the headers, before any body.
  const std::string huge = RawHttpExchange(
      server.http_port(),
      "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n");
  EXPECT_THAT(huge, HasSubstr("HTTP/1.1 413 Payload Too Large"));
  EXPECT_THAT(huge, HasSubstr("{\"error\":\"the request body of 1000000000000 bytes is larger "
                              "than the limit of 65536 bytes (--max_message_bytes)\"}"));
  const std::string chunked = RawHttpExchange(server.http_port(),
                                              "POST /v2/models/slice/infer HTTP/1.1\r\nHost: "
                                              "x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_THAT(chunked, HasSubstr("HTTP/1.1 411 Length Required"));
  EXPECT_THAT(chunked, HasSubstr("send the body with a Content-Length"));
  // No Content-Length: no body.
  const std::string no_length = RawHttpExchange(
      server.http_port(), "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(no_length, HasSubstr("HTTP/1.1 400 Bad Request"));
  EXPECT_THAT(no_length, HasSubstr("slice: the request is not valid JSON"));
}

TEST(InferenceHttpTest, ABodyBeyondTheMemoryBudgetIsRefusedBeforeItIsRead) {
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=1000000"});
  // Declared, within --max_message_bytes, never sent: refused from the headers.
  const std::string answer = RawHttpExchange(
      server.http_port(),
      "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n");
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 429 Too Many Requests"));
  EXPECT_THAT(answer, HasSubstr("(--max_memory_bytes); retry later"));
}

TEST(InferenceHttpTest, SlowClientsDoNotHoldUpOthers) {
  TensordProcess server({"--backends=cpu"});
  // Clients that never finish their headers, and one that never sends its body.
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    const int fd = ConnectHttp(server.http_port());
    ASSERT_GE(fd, 0);
    const std::string partial = "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\n";
    ::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  const int no_body = ConnectHttp(server.http_port());
  const std::string head =
      "POST /v2/models/slice/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n{";
  ::send(no_body, head.data(), head.size(), MSG_NOSIGNAL);
  slow.push_back(no_body);

  for (int i = 0; i < 3; ++i) {
    auto answer = Client(server)->Post("/v2/models/slice/infer", kSliceJson, "application/json");
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
  }
  for (int fd : slow) ::close(fd);
}

TEST(InferenceHttpTest, ReadyTurnsFalseWhileDraining) {
  TensordProcess server({"--backends=cpu", "--drain_seconds=3"});
  auto client = Client(server);
  auto ready = client->Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  // Draining starts at once and lasts --drain_seconds, while tensord still serves.
  int status = 0;
  for (int i = 0; i < 100 && status != 400; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto answer = client->Get("/v2/health/ready");
    if (answer) status = answer->status;
  }
  EXPECT_EQ(status, 400);
  auto model = client->Get("/v2/models/slice/ready");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->status, 400);
  auto live = client->Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
}

TEST(InferenceHttpTest, TheGuidesCurlExampleAnswers) {
  std::ifstream readme(std::string(TENSOROP_SOURCE_DIR) + "/docs/kserve-v2.md");
  std::stringstream text;
  text << readme.rdbuf();
  const std::string all = text.str();
  const std::string begin = "<!-- v2-http-curl-begin -->\n```bash\n";
  const size_t start = all.find(begin);
  ASSERT_NE(start, std::string::npos) << "docs/kserve-v2.md has no v2-http-curl marker";
  const size_t end = all.find("```\n<!-- v2-http-curl-end -->", start);
  ASSERT_NE(end, std::string::npos);
  std::string command = all.substr(start + begin.size(), end - start - begin.size());
  ASSERT_THAT(command, HasSubstr("localhost:8000/v2/models/slice/infer"));

  TensordProcess server({"--backends=cpu"});
  command = absl::StrReplaceAll(
      command, {{"localhost:8000", absl::StrCat("127.0.0.1:", server.http_port())}});
  const CommandResult result = RunCommand({"/bin/bash", "-c", command});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json answer = Json::parse(result.out);
  EXPECT_EQ(answer["model_name"], "slice");
  EXPECT_EQ(answer["outputs"][0]["shape"], Json::parse("[2,2]"));
  EXPECT_EQ(answer["outputs"][0]["data"], Json::parse("[2.0,3.0,5.0,6.0]"));
}

// A POSIX shared memory object of `bytes` bytes filled with 0xAB, mapped;
// unlinked and unmapped when it goes away.
class ShmObject {
 public:
  explicit ShmObject(size_t bytes) : bytes_(bytes) {
    static int counter = 0;
    key_ = absl::StrCat("tensorop-v2httpshm-", getpid(), "-", ++counter);
    const int fd = ::shm_open(("/" + key_).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << "shm_open " << key_ << ": " << std::strerror(errno);
    if (fd < 0) return;
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(mapped, MAP_FAILED);
    if (mapped == MAP_FAILED) return;
    data_ = static_cast<char*>(mapped);
    std::memset(data_, 0xAB, bytes);
  }
  ~ShmObject() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    ::shm_unlink(("/" + key_).c_str());
  }
  const std::string& key() const { return key_; }
  char* data() { return data_; }

 private:
  size_t bytes_;
  std::string key_;
  char* data_ = nullptr;
};

template <typename T>
std::string Bytes(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string RegisterBody(const std::string& key, int64_t offset, int64_t byte_size) {
  return Json::object({{"key", key}, {"offset", offset}, {"byte_size", byte_size}}).dump();
}

std::string ErrorOf(const httplib::Result& answer) {
  return Json::parse(answer->body)["error"].get<std::string>();
}

TEST(InferenceHttpSharedMemoryTest, RegisterStatusAndUnregisterOverHttp) {
  TensordProcess server({"--backends=cpu"});
  ShmObject object(8192);
  auto client = Client(server);

  auto metadata = client->Get("/v2");
  ASSERT_TRUE(metadata);
  EXPECT_EQ(Json::parse(metadata->body)["extensions"], Json::parse(R"(["system_shared_memory"])"));

  auto registered = client->Post("/v2/systemsharedmemory/region/data/register",
                                 RegisterBody("/" + object.key(), 4096, 4096), "application/json");
  ASSERT_TRUE(registered);
  EXPECT_EQ(registered->status, 200) << registered->body;
  // Offset omitted: 0.
  registered = client->Post("/v2/systemsharedmemory/region/head/register",
                            Json::object({{"key", object.key()}, {"byte_size", 1024}}).dump(),
                            "application/json");
  ASSERT_TRUE(registered);
  EXPECT_EQ(registered->status, 200) << registered->body;

  auto all = client->Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->status, 200) << all->body;
  EXPECT_EQ(Json::parse(all->body),
            Json::parse(absl::StrCat(
                R"([{"name":"data","key":")", object.key(), R"(","offset":4096,"byte_size":4096},)",
                R"({"name":"head","key":")", object.key(), R"(","offset":0,"byte_size":1024}])")));
  auto one = client->Get("/v2/systemsharedmemory/region/head/status");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(Json::parse(one->body).size(), 1u);
  EXPECT_EQ(Json::parse(one->body)[0]["byte_size"], 1024);

  // The gRPC calls' errors, with ToHttpStatus's status.
  auto again = client->Post("/v2/systemsharedmemory/region/data/register",
                            RegisterBody(object.key(), 0, 4096), "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409);
  EXPECT_THAT(ErrorOf(again),
              HasSubstr("shared memory region \"data\" is already registered with key \"" +
                        object.key() + "\", offset 4096 and byte_size 4096"));
  auto bad_key = client->Post("/v2/systemsharedmemory/region/x/register",
                              RegisterBody("../etc/passwd", 0, 16), "application/json");
  ASSERT_TRUE(bad_key);
  EXPECT_EQ(bad_key->status, 400);
  EXPECT_THAT(ErrorOf(bad_key), HasSubstr("key: \"../etc/passwd\" is not a shared memory key"));
  auto bad_name = client->Post("/v2/systemsharedmemory/region/a%20b/register",
                               RegisterBody(object.key(), 0, 16), "application/json");
  ASSERT_TRUE(bad_name);
  EXPECT_EQ(bad_name->status, 400);
  EXPECT_THAT(ErrorOf(bad_name), HasSubstr("is not a region name"));
  auto too_far = client->Post("/v2/systemsharedmemory/region/x/register",
                              RegisterBody(object.key(), 8000, 200), "application/json");
  ASSERT_TRUE(too_far);
  EXPECT_EQ(too_far->status, 400);
  EXPECT_THAT(ErrorOf(too_far),
              HasSubstr("byte_size: 200 bytes of shared memory object \"" + object.key() +
                        "\" requested from offset 8000; it has 8192"));
  auto huge = client->Post("/v2/systemsharedmemory/region/x/register",
                           absl::StrCat(R"({"key":")", object.key(),
                                        R"(","offset":9223372036854775808,"byte_size":16})"),
                           "application/json");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400);
  EXPECT_THAT(ErrorOf(huge), HasSubstr("offset: 9223372036854775808 is more than 2^63 - 1"));
  // The body's own errors name the region and the field.
  auto negative = client->Post("/v2/systemsharedmemory/region/x/register",
                               R"({"key":"k","byte_size":-1})", "application/json");
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->status, 400);
  EXPECT_EQ(ErrorOf(negative),
            "register shared memory region \"x\": \"byte_size\" = -1 is not a non-negative "
            "integer");
  auto no_key = client->Post("/v2/systemsharedmemory/region/x/register", "{}", "application/json");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 400);
  EXPECT_EQ(ErrorOf(no_key), "register shared memory region \"x\": \"key\" is not a string");

  auto unregistered =
      client->Post("/v2/systemsharedmemory/region/head/unregister", "", "application/json");
  ASSERT_TRUE(unregistered);
  EXPECT_EQ(unregistered->status, 200) << unregistered->body;
  auto gone = client->Get("/v2/systemsharedmemory/region/head/status");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_THAT(ErrorOf(gone), HasSubstr("shared memory region \"head\" is not registered"));
  gone = client->Post("/v2/systemsharedmemory/region/head/unregister", "", "application/json");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_THAT(ErrorOf(gone), HasSubstr("shared memory region \"head\" is not registered"));
  auto every = client->Post("/v2/systemsharedmemory/unregister", "", "application/json");
  ASSERT_TRUE(every);
  EXPECT_EQ(every->status, 200) << every->body;
  auto none = client->Get("/v2/systemsharedmemory/status");
  ASSERT_TRUE(none);
  EXPECT_EQ(Json::parse(none->body), Json::array());

  // CUDA shared memory: UNIMPLEMENTED, as over gRPC.
  auto cuda = client->Get("/v2/cudasharedmemory/status");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->status, 501);
  EXPECT_EQ(ErrorOf(cuda),
            "CudaSharedMemoryStatus: tensord serves no CUDA shared memory; only system shared "
            "memory (SystemSharedMemoryRegister)");
  cuda = client->Post("/v2/cudasharedmemory/region/g/register", R"({"raw_handle":{}})",
                      "application/json");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->status, 501);
  EXPECT_THAT(ErrorOf(cuda), HasSubstr("CudaSharedMemoryRegister: tensord serves no CUDA"));
  cuda = client->Post("/v2/cudasharedmemory/unregister", "", "application/json");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->status, 501);
  EXPECT_THAT(ErrorOf(cuda), HasSubstr("CudaSharedMemoryUnregister: tensord serves no CUDA"));
}

// slice of a 2x3 FP32 [0..5] read from region "data" at 0 (the object's byte
// 4096), its output written at 512: rows 0..1, every other column.
constexpr char kSliceSharedJson[] = R"({"id":"shm","parameters":{"backend":"cpu"},"inputs":[
  {"name":"input","shape":[2,3],"datatype":"FP32",
   "parameters":{"shared_memory_region":"data","shared_memory_byte_size":24}},
  {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,0]},
  {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,3]},
  {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,2]}],
  "outputs":[{"name":"output","parameters":{"shared_memory_region":"data",
   "shared_memory_offset":512,"shared_memory_byte_size":64}}]})";

TEST(InferenceHttpSharedMemoryTest, InferReadsAndWritesRegionsOverHttp) {
  TensordProcess server({"--backends=cpu"});
  ShmObject object(8192);
  auto client = Client(server);
  auto registered = client->Post("/v2/systemsharedmemory/region/data/register",
                                 RegisterBody(object.key(), 4096, 4096), "application/json");
  ASSERT_TRUE(registered);
  ASSERT_EQ(registered->status, 200) << registered->body;
  const std::string input = Bytes<float>({0, 1, 2, 3, 4, 5});
  std::memcpy(object.data() + 4096, input.data(), input.size());

  auto answer = client->Post("/v2/models/slice/infer", kSliceSharedJson, "application/json");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  EXPECT_EQ(answer->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(Json::parse(answer->body), Json::parse(R"({"model_name":"slice","model_version":"1",
      "id":"shm","parameters":{"backend":"cpu"},
      "outputs":[{"name":"output","datatype":"FP32","shape":[2,2],
        "parameters":{"shared_memory_region":"data","shared_memory_offset":512,
                      "shared_memory_byte_size":64}}]})"));
  EXPECT_EQ(std::string(object.data() + 4096 + 512, 16), Bytes<float>({0, 2, 3, 5}));
  EXPECT_EQ(std::string(object.data() + 4096 + 512 + 16, 4), std::string(4, '\xAB'));

  // split, its output_0 into the region and output_1 as a binary part: only
  // output_1's bytes follow the JSON.
  const std::string split = Bytes<int16_t>({10, 11, 12, 13, 14, 15});
  std::memcpy(object.data() + 4096 + 1024, split.data(), split.size());
  const std::string json =
      R"({"inputs":[{"name":"input","shape":[2,3],"datatype":"INT16","parameters":)"
      R"({"shared_memory_region":"data","shared_memory_offset":1024,"shared_memory_byte_size":12}},)"
      R"({"name":"axis","shape":[1],"datatype":"INT64","data":[0]},)"
      R"({"name":"split","shape":[2],"datatype":"INT64","data":[1,1]}],)"
      R"("outputs":[{"name":"output_0","parameters":{"shared_memory_region":"data",)"
      R"("shared_memory_offset":2048,"shared_memory_byte_size":6}},)"
      R"({"name":"output_1","parameters":{"binary_data":true}}]})";
  answer = client->Post("/v2/models/split/infer", json, "application/json");
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const size_t header_length =
      std::stoul(answer->get_header_value("Inference-Header-Content-Length"));
  const Json header = Json::parse(answer->body.substr(0, header_length));
  ASSERT_EQ(header["outputs"].size(), 2u);
  EXPECT_EQ(header["outputs"][0], Json::parse(R"({"name":"output_0","datatype":"INT16",
      "shape":[1,3],"parameters":{"shared_memory_region":"data","shared_memory_offset":2048,
      "shared_memory_byte_size":6}})"));
  EXPECT_EQ(header["outputs"][1]["parameters"]["binary_data_size"], 6);
  EXPECT_EQ(answer->body.substr(header_length), Bytes<int16_t>({13, 14, 15}));
  EXPECT_EQ(std::string(object.data() + 4096 + 2048, 6), Bytes<int16_t>({10, 11, 12}));

  // Bad references: the gRPC API's messages.
  std::string short_size = absl::StrReplaceAll(
      kSliceSharedJson, {{R"("shared_memory_byte_size":24)", R"("shared_memory_byte_size":20)"}});
  answer = client->Post("/v2/models/slice/infer", short_size, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 400);
  EXPECT_THAT(ErrorOf(answer), HasSubstr("slice: input \"input\": parameter "
                                         "\"shared_memory_byte_size\" is 20 but its shape [2,3] "
                                         "of FP32 takes 24 bytes"));
  std::string small_output = absl::StrReplaceAll(
      kSliceSharedJson, {{R"("shared_memory_byte_size":64)", R"("shared_memory_byte_size":8)"}});
  answer = client->Post("/v2/models/slice/infer", small_output, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 400);
  EXPECT_THAT(ErrorOf(answer), HasSubstr("slice: output \"output\": outputs[0].shared_memory: "
                                         "byte_length 8 is less than the 16 bytes"));
  std::string ghost = absl::StrReplaceAll(
      kSliceSharedJson, {{R"("shared_memory_region":"data","shared_memory_byte_size":24)",
                          R"("shared_memory_region":"ghost","shared_memory_byte_size":24)"}});
  answer = client->Post("/v2/models/slice/infer", ghost, "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 404);
  EXPECT_THAT(ErrorOf(answer), HasSubstr("inputs[\"input\"].shared_memory: shared memory region "
                                         "\"ghost\" is not registered"));
}

}  // namespace
}  // namespace tensorop::testing
