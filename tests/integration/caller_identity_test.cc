// One identity per caller on every API (issue 42, item 1), on a real tensord
// with TLS: with client certificates, bearer tokens or both, a shared memory
// region alice registers through one of tensord's three APIs (tensorop.v1
// RegisterSharedMemory, v2 gRPC SystemSharedMemoryRegister, HTTPS POST
// /v2/systemsharedmemory/region/NAME/register) is hers through the other two
// (listed, read by an inference, unregistered) and not bob's through any (absent
// from his status, NOT_FOUND / 404 naming it in his inferences, his unregister
// refused), and the request log names each caller alike whatever the protocol
// (CallerIdentity in server/security/auth.h). Before, the HTTPS front end knew
// only the bearer token: with certificates alone every HTTPS caller was one
// anonymous caller, so bob listed, read and unregistered alice's HTTPS region.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/shared_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/inference_requests.h"
#include "tests/support/proc_status.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using Json = nlohmann::json;

enum class Auth { kCertificates, kTokens, kBoth };
enum class Api { kNative, kV2Grpc, kHttps };
constexpr Api kApis[] = {Api::kNative, Api::kV2Grpc, Api::kHttps};

const char* ApiName(Api api) {
  switch (api) {
    case Api::kNative:
      return "native";
    case Api::kV2Grpc:
      return "v2grpc";
    case Api::kHttps:
      return "https";
  }
  return "";
}

// The next API after `api`, round the three.
Api After(Api api, int steps = 1) { return kApis[(static_cast<int>(api) + steps) % 3]; }

// What a call answered over any API: "OK" or the gRPC code's name, "HTTP 200"
// or the HTTP status, and the error's message.
struct Answer {
  std::string code;
  std::string message;
};

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    default:
      return absl::StrCat("gRPC code ", static_cast<int>(code));
  }
}

// The code `code` is answered with over `api` (ToHttpStatus over HTTPS).
std::string Expected(Api api, grpc::StatusCode code) {
  if (api != Api::kHttps) return CodeName(code);
  switch (code) {
    case grpc::StatusCode::OK:
      return "HTTP 200";
    case grpc::StatusCode::NOT_FOUND:
      return "HTTP 404";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "HTTP 403";
    default:
      return "HTTP ?";
  }
}

Answer Of(const grpc::Status& status) {
  return {CodeName(status.error_code()), status.error_message()};
}

Answer Of(const httplib::Result& result) {
  if (!result) return {"no answer", httplib::to_string(result.error())};
  Answer answer{absl::StrCat("HTTP ", result->status), ""};
  if (result->status != 200) {
    const Json body = Json::parse(result->body, nullptr, /*allow_exceptions=*/false);
    answer.message = body.is_object() && body.contains("error") && body["error"].is_string()
                         ? body["error"].get<std::string>()
                         : result->body;
  }
  return answer;
}

std::ostream& operator<<(std::ostream& out, const Answer& answer) {
  return out << answer.code << " " << answer.message;
}

// An answer with code `code` ("NOT_FOUND", "HTTP 404") and a message
// containing `text`.
MATCHER_P2(IsAnswer, code, text, "") {
  *result_listener << "answered " << arg;
  return arg.code == code && arg.message.find(text) != std::string::npos;
}
// Refused with `code` over `api`, the message containing `text`.
auto Refused(Api api, grpc::StatusCode code, const std::string& text) {
  return IsAnswer(Expected(api, code), text);
}
auto Accepted(Api api) { return IsAnswer(Expected(api, grpc::StatusCode::OK), ""); }

constexpr char kAliceToken[] = "alice-token-0123456789";
constexpr char kBobToken[] = "bob-token-0123456789";
// A subject with a character RFC 2253 escapes: gRPC's and the HTTPS
// server's printing must agree on it exactly.
constexpr char kAliceCommonName[] = "alice, ops";
// The [2,3] FP32 alice keeps at byte 0 of her object and what the slice of
// Infer (rows 0..1, columns 1..2) gives of it.
const std::vector<float> kAliceValues = {0, 1, 2, 3, 4, 5};
const std::vector<float> kSliced = {1, 2, 4, 5};

std::unique_ptr<grpc::ClientContext> Deadline() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return context;
}

// One caller (alice or bob) and its credentials for the three APIs.
class Caller {
 public:
  Caller(const TensordProcess& server, const TestPki& pki, Auth auth, const std::string& who)
      : server_(server), pki_(pki), who_(who) {
    certificate_ = auth != Auth::kTokens;
    token_ = auth == Auth::kCertificates ? "" : (who == "alice" ? kAliceToken : kBobToken);
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pki.Read("ca.crt");
    if (certificate_) {
      options.pem_cert_chain = pki.Read(who + ".crt");
      options.pem_private_key = pki.Read(who + ".key");
    }
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
    if (!token_.empty()) {
      credentials =
          grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token_));
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(server.target(), credentials, args);
    native_ = v1::TensorOp::NewStub(channel);
    v2_ = inference::GRPCInferenceService::NewStub(channel);
  }

  Answer Register(Api api, const std::string& region, const std::string& key) {
    switch (api) {
      case Api::kNative: {
        v1::RegisterSharedMemoryRequest request;
        request.set_region(region);
        request.set_key(key);
        v1::RegisterSharedMemoryResponse response;
        return Of(native_->RegisterSharedMemory(Deadline().get(), request, &response));
      }
      case Api::kV2Grpc: {
        inference::SystemSharedMemoryRegisterRequest request;
        request.set_name(region);
        request.set_key("/" + key);
        request.set_byte_size(4096);
        inference::SystemSharedMemoryRegisterResponse response;
        return Of(v2_->SystemSharedMemoryRegister(Deadline().get(), request, &response));
      }
      case Api::kHttps:
        return Of(Https()->Post(absl::StrCat("/v2/systemsharedmemory/region/", region, "/register"),
                                Json({{"key", key}, {"offset", 0}, {"byte_size", 4096}}).dump(),
                                "application/json"));
    }
    return {};
  }

  Answer Unregister(Api api, const std::string& region) {
    switch (api) {
      case Api::kNative: {
        v1::UnregisterSharedMemoryRequest request;
        request.set_region(region);
        v1::UnregisterSharedMemoryResponse response;
        return Of(native_->UnregisterSharedMemory(Deadline().get(), request, &response));
      }
      case Api::kV2Grpc: {
        inference::SystemSharedMemoryUnregisterRequest request;
        request.set_name(region);
        inference::SystemSharedMemoryUnregisterResponse response;
        return Of(v2_->SystemSharedMemoryUnregister(Deadline().get(), request, &response));
      }
      case Api::kHttps:
        return Of(
            Https()->Post(absl::StrCat("/v2/systemsharedmemory/region/", region, "/unregister"), "",
                          "application/json"));
    }
    return {};
  }

  // The names of every region its status lists over `api` (a failed status
  // fails the test).
  std::vector<std::string> Regions(Api api) {
    std::vector<std::string> names;
    switch (api) {
      case Api::kNative: {
        v1::SharedMemoryStatusResponse response;
        grpc::Status status = native_->SharedMemoryStatus(
            Deadline().get(), v1::SharedMemoryStatusRequest(), &response);
        EXPECT_THAT(status, GrpcOk()) << who_;
        for (const v1::SharedMemoryRegion& region : response.regions()) {
          names.push_back(region.region());
        }
        break;
      }
      case Api::kV2Grpc: {
        inference::SystemSharedMemoryStatusResponse response;
        grpc::Status status = v2_->SystemSharedMemoryStatus(
            Deadline().get(), inference::SystemSharedMemoryStatusRequest(), &response);
        EXPECT_THAT(status, GrpcOk()) << who_;
        for (const auto& [name, region] : response.regions()) names.push_back(name);
        break;
      }
      case Api::kHttps: {
        httplib::Result result = Https()->Get("/v2/systemsharedmemory/status");
        EXPECT_TRUE(result) << who_;
        if (!result) break;
        EXPECT_EQ(result->status, 200) << who_ << ": " << result->body;
        const Json body = Json::parse(result->body, nullptr, false);
        EXPECT_TRUE(body.is_array()) << result->body;
        if (!body.is_array()) break;
        for (const Json& region : body) names.push_back(region.value("name", ""));
        break;
      }
    }
    return names;
  }

  // The status of region `region` alone over `api`.
  Answer StatusOf(Api api, const std::string& region) {
    switch (api) {
      case Api::kNative: {
        v1::SharedMemoryStatusRequest request;
        request.set_region(region);
        v1::SharedMemoryStatusResponse response;
        return Of(native_->SharedMemoryStatus(Deadline().get(), request, &response));
      }
      case Api::kV2Grpc: {
        inference::SystemSharedMemoryStatusRequest request;
        request.set_name(region);
        inference::SystemSharedMemoryStatusResponse response;
        return Of(v2_->SystemSharedMemoryStatus(Deadline().get(), request, &response));
      }
      case Api::kHttps:
        return Of(Https()->Get(absl::StrCat("/v2/systemsharedmemory/region/", region, "/status")));
    }
    return {};
  }

  // A slice of the [2,3] FP32 at byte 0 of `region` (rows 0..1, columns 1..2),
  // request id `id`, over `api`; its output in `sliced` when answered.
  Answer Infer(Api api, const std::string& region, const std::string& id,
               std::vector<float>* sliced) {
    sliced->clear();
    switch (api) {
      case Api::kNative: {
        v1::Tensor input = MakeTensor(v1::FLOAT32, {2, 3}, "");
        input.mutable_shared_memory()->set_region(region);
        input.mutable_shared_memory()->set_byte_length(24);
        v1::RunResponse response;
        grpc::Status status = native_->Run(
            Deadline().get(), SliceRequest(id, input, {0, 1}, {2, 2}, {1, 1}, {2, 2}), &response);
        if (status.ok() && response.outputs_size() == 1) {
          *sliced = Unpack<float>(response.outputs(0).data());
        }
        return Of(status);
      }
      case Api::kV2Grpc: {
        inference::ModelInferRequest request;
        request.set_model_name("slice");
        request.set_id(id);
        auto* input = request.add_inputs();
        input->set_name("input");
        input->set_datatype("FP32");
        input->add_shape(2);
        input->add_shape(3);
        (*input->mutable_parameters())["shared_memory_region"].set_string_param(region);
        (*input->mutable_parameters())["shared_memory_byte_size"].set_int64_param(24);
        AddRaw(request, "offsets", "INT64", {2}, Bytes<int64_t>({0, 1}));
        AddRaw(request, "window_sizes", "INT64", {2}, Bytes<int64_t>({2, 2}));
        AddRaw(request, "window_strides", "INT64", {2}, Bytes<int64_t>({1, 1}));
        inference::ModelInferResponse response;
        grpc::Status status = v2_->ModelInfer(Deadline().get(), request, &response);
        if (status.ok() && response.raw_output_contents_size() == 1) {
          *sliced = Unpack<float>(response.raw_output_contents(0));
        }
        return Of(status);
      }
      case Api::kHttps: {
        const Json body = {
            {"id", id},
            {"inputs",
             {{{"name", "input"},
               {"shape", Json::array({2, 3})},
               {"datatype", "FP32"},
               {"parameters", {{"shared_memory_region", region}, {"shared_memory_byte_size", 24}}}},
              {{"name", "offsets"},
               {"shape", Json::array({2})},
               {"datatype", "INT64"},
               {"data", Json::array({0, 1})}},
              {{"name", "window_sizes"},
               {"shape", Json::array({2})},
               {"datatype", "INT64"},
               {"data", Json::array({2, 2})}},
              {{"name", "window_strides"},
               {"shape", Json::array({2})},
               {"datatype", "INT64"},
               {"data", Json::array({1, 1})}}}}};
        httplib::Result result =
            Https()->Post("/v2/models/slice/infer", body.dump(), "application/json");
        if (result && result->status == 200) {
          const Json answer = Json::parse(result->body, nullptr, false);
          if (answer.is_object() && answer.contains("outputs") && answer["outputs"].size() == 1) {
            *sliced = answer["outputs"][0]["data"].get<std::vector<float>>();
          }
        }
        return Of(result);
      }
    }
    return {};
  }

  // A normal call, no region in it: the doc slice over gRPC and a slice over
  // HTTPS, each answered correctly.
  void ExpectNormalAnswers() {
    v1::RunResponse response;
    ASSERT_THAT(native_->Run(Deadline().get(), DocSliceRequest("normal"), &response), GrpcOk());
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
    const std::string slice = R"({"inputs":[
      {"name":"input","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5,6]]},
      {"name":"offsets","shape":[2],"datatype":"INT64","data":[0,1]},
      {"name":"window_sizes","shape":[2],"datatype":"INT64","data":[2,2]},
      {"name":"window_strides","shape":[2],"datatype":"INT64","data":[1,1]}]})";
    httplib::Result answer = Https()->Post("/v2/models/slice/infer", slice, "application/json");
    ASSERT_TRUE(answer) << httplib::to_string(answer.error());
    ASSERT_EQ(answer->status, 200) << answer->body;
    EXPECT_THAT(answer->body, HasSubstr(R"("data":[2.0,3.0,5.0,6.0])"));
  }

 private:
  std::unique_ptr<httplib::SSLClient> Https() const {
    auto client = certificate_
                      ? std::make_unique<httplib::SSLClient>("localhost", server_.http_port(),
                                                             pki_.Path(who_ + ".crt"),
                                                             pki_.Path(who_ + ".key"))
                      : std::make_unique<httplib::SSLClient>("localhost", server_.http_port());
    client->set_ca_cert_path(pki_.Path("ca.crt").c_str());
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(10, 0);
    client->set_read_timeout(20, 0);
    if (!token_.empty()) client->set_bearer_token_auth(token_.c_str());
    return client;
  }

  const TensordProcess& server_;
  const TestPki& pki_;
  const std::string who_;
  bool certificate_ = false;
  std::string token_;
  std::unique_ptr<v1::TensorOp::Stub> native_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> v2_;
};

// The identity on the request log line of request `id` ("" when it has none).
std::string LoggedIdentity(const TensordProcess& server, const std::string& id) {
  const std::string line = AwaitLogLine(server, {absl::StrCat("\"id\":\"", id, "\"")});
  const Json record = Json::parse(line, nullptr, false);
  if (!record.is_object()) return "(no line for " + id + ")";
  return record.value("identity", "");
}

class CallerAcrossApisTest : public ::testing::TestWithParam<Auth> {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki();
    pki_->MakeCa("ca", "tensorop test CA");
    pki_->MakeServerCert("server", "ca");
    pki_->MakeCert("alice", "ca", kAliceCommonName, "");
    pki_->MakeCert("bob", "ca", "bob", "");
    pki_->Replace("tokens", absl::StrCat("alice:", kAliceToken, "\nbob:", kBobToken, "\n"));
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static std::vector<std::string> Flags(Auth auth) {
    std::vector<std::string> flags = {"--tls_cert_file=" + pki_->Path("server.crt"),
                                      "--tls_key_file=" + pki_->Path("server.key"),
                                      "--http_address=127.0.0.1:0", "--backends=cpu"};
    if (auth != Auth::kTokens) flags.push_back("--tls_client_ca_file=" + pki_->Path("ca.crt"));
    if (auth != Auth::kCertificates) flags.push_back("--auth_token_file=" + pki_->Path("tokens"));
    return flags;
  }

  // Who alice and bob are, in the request log and to the registry.
  static std::string IdentityOf(Auth auth, const std::string& who) {
    const std::string token = absl::StrCat("token:", who);
    const std::string cert =
        who == "alice" ? R"(cert:CN=alice\, ops,O=tensorop test)" : "cert:CN=bob,O=tensorop test";
    switch (auth) {
      case Auth::kCertificates:
        return cert;
      case Auth::kTokens:
        return token;
      case Auth::kBoth:
        return token + " " + cert;
    }
    return "";
  }

  static TestPki* pki_;
};

TestPki* CallerAcrossApisTest::pki_ = nullptr;

TEST_P(CallerAcrossApisTest, ARegionIsItsCallersOverEveryApiAndNoOneElses) {
  const Auth auth = GetParam();
  TensordProcess server(Flags(auth));
  ASSERT_GT(server.http_port(), 0);
  Caller alice(server, *pki_, auth, "alice");
  Caller bob(server, *pki_, auth, "bob");
  auto object =
      client::SharedMemoryRegion::Create(absl::StrCat("tensorop-identity-", getpid()), 4096);
  ASSERT_TRUE(object.ok()) << object.status();
  std::memcpy((*object)->bytes().data(), kAliceValues.data(), 24);
  std::memcpy((*object)->bytes().data() + 64, "alice-secret", 12);
  const std::string key = (*object)->key();

  std::vector<std::string> infer_ids[2];  // alice's, bob's
  for (Api by : kApis) {
    SCOPED_TRACE(absl::StrCat("registered over ", ApiName(by)));
    const std::string region = absl::StrCat("alice_", ApiName(by));
    ASSERT_THAT(alice.Register(by, region, key), Accepted(by));

    for (Api api : kApis) {
      SCOPED_TRACE(absl::StrCat("used over ", ApiName(api)));
      // Alice's everywhere: listed, and read by her inference.
      EXPECT_THAT(alice.Regions(api), ElementsAre(region));
      EXPECT_THAT(alice.StatusOf(api, region), Accepted(api));
      std::vector<float> sliced;
      const std::string id = absl::StrCat("alice-", ApiName(api), "-", region);
      EXPECT_THAT(alice.Infer(api, region, id, &sliced), Accepted(api));
      EXPECT_EQ(sliced, kSliced);
      infer_ids[0].push_back(id);

      // Bob's nowhere: not listed, not found, not read, not unregistered.
      EXPECT_THAT(bob.Regions(api), IsEmpty());
      const std::string not_registered =
          absl::StrCat("shared memory region \"", region, "\" is not registered");
      EXPECT_THAT(bob.StatusOf(api, region),
                  Refused(api, grpc::StatusCode::NOT_FOUND, not_registered));
      const std::string bob_id = absl::StrCat("bob-", ApiName(api), "-", region);
      EXPECT_THAT(bob.Infer(api, region, bob_id, &sliced),
                  Refused(api, grpc::StatusCode::NOT_FOUND, not_registered));
      EXPECT_THAT(sliced, IsEmpty());
      infer_ids[1].push_back(bob_id);
      EXPECT_THAT(bob.Unregister(api, region),
                  Refused(api, grpc::StatusCode::NOT_FOUND, not_registered));
      // Nor may he map her object under a name of his own while she has it.
      EXPECT_THAT(bob.Register(api, "bobs", key), Refused(api, grpc::StatusCode::PERMISSION_DENIED,
                                                          "is mapped for another identity"));
    }

    // Her object, mapped through `by`, is hers through another API too (the
    // attack: PERMISSION_DENIED "mapped for another identity").
    const Api other = After(by);
    EXPECT_THAT(alice.Register(other, "again", key), Accepted(other));
    EXPECT_THAT(alice.Regions(by), UnorderedElementsAre(region, "again"));
    EXPECT_THAT(alice.Unregister(by, "again"), Accepted(by));
    // She unregisters it through a third API; it is gone through the first.
    const Api last = After(by, 2);
    EXPECT_THAT(alice.Unregister(last, region), Accepted(last));
    EXPECT_THAT(alice.StatusOf(by, region),
                Refused(by, grpc::StatusCode::NOT_FOUND, "is not registered"));
    EXPECT_THAT(alice.Regions(by), IsEmpty());
  }
  // The object still holds alice's bytes; none of bob's answers carried them.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*object)->bytes().data()) + 64, 12),
            "alice-secret");

  // One identity per caller in the request log, whichever protocol.
  const std::string who[2] = {"alice", "bob"};
  for (int caller = 0; caller < 2; ++caller) {
    for (const std::string& id : infer_ids[caller]) {
      EXPECT_EQ(LoggedIdentity(server, id), IdentityOf(auth, who[caller])) << id;
    }
  }

  // Alive, and a normal call of each protocol answered.
  EXPECT_FALSE(ProcessHasExited(server.pid()));
  alice.ExpectNormalAnswers();
  bob.ExpectNormalAnswers();
}

INSTANTIATE_TEST_SUITE_P(Auth, CallerAcrossApisTest,
                         ::testing::Values(Auth::kCertificates, Auth::kTokens, Auth::kBoth),
                         [](const ::testing::TestParamInfo<Auth>& info) {
                           switch (info.param) {
                             case Auth::kCertificates:
                               return std::string("Certificates");
                             case Auth::kTokens:
                               return std::string("Tokens");
                             case Auth::kBoth:
                               return std::string("TokensAndCertificates");
                           }
                           return std::string();
                         });

}  // namespace
}  // namespace tensorop::testing
