// Transport security on a real tensord (issue 10): TLS, mutual TLS, bearer
// tokens, the plaintext health listener, reflection per flag, reloading
// certificates and tokens, and precise startup errors. Certificates are made
// by Debian's openssl at test time (tests/support/test_pki.h). (About 610
// lines, past the project's ~600: every test here shares the SecurityTest
// fixture's PKI; who a caller is across APIs is caller_identity_test.cc.)
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/eventually.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kToken[] = "s3cret-token-for-ci-0123456789";
constexpr char kOtherToken[] = "s3cret-token-for-ops-9876543210";
constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kReflection[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
constexpr uint64_t kServing = 1;
constexpr uint64_t kNotServing = 2;

// One set of certificates for the whole suite (openssl takes a while).
class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki();
    pki_->MakeCa("ca", "tensorop test CA");
    pki_->MakeServerCert("server", "ca");
    pki_->MakeCert("server2", "ca", "tensord-rotated", "DNS:localhost,IP:127.0.0.1");
    pki_->MakeCert("elsewhere", "ca", "tensord-elsewhere", "DNS:elsewhere.example");
    pki_->MakeCert("client", "ca", "client-a", "");
    pki_->MakeCert("expired", "ca", "client-expired", "", -1);
    pki_->MakeCa("other", "another CA");
    pki_->MakeCert("stranger", "other", "client-stranger", "");
    pki_->Replace("tokens", std::string("# accepted tokens\nci:") + kToken + "\n");
    pki_->Replace("client.token", std::string(kToken) + "\n");
    pki_->Replace("wrong.token", "not-a-token\n");
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  static std::string P(const std::string& file) { return pki_->Path(file); }

  std::vector<std::string> TlsFlags(const std::string& cert = "server") const {
    return {"--tls_cert_file=" + P(cert + ".crt"), "--tls_key_file=" + P(cert + ".key")};
  }

  static TestPki* pki_;
};

TestPki* SecurityTest::pki_ = nullptr;

struct Credentials {
  Credentials(std::string ca_pem = "", std::string cert_pem = "", std::string key_pem = "",
              std::string bearer = "")
      : ca(std::move(ca_pem)),
        cert(std::move(cert_pem)),
        key(std::move(key_pem)),
        token(std::move(bearer)) {}
  std::string ca;    // PEM roots; empty: none (system roots)
  std::string cert;  // client chain
  std::string key;
  std::string token;  // bearer token
};

// A TLS channel with a connection of its own (not shared with other channels),
// so each channel makes a new handshake.
std::shared_ptr<grpc::Channel> SecureChannel(const std::string& target, const Credentials& c) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = c.ca;
  options.pem_cert_chain = c.cert;
  options.pem_private_key = c.key;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (!c.token.empty()) {
    credentials =
        grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(c.token));
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, credentials, args);
}

// The doc slice example; OK only with the right outputs.
grpc::Status RunDocSlice(const std::shared_ptr<grpc::Channel>& channel,
                         grpc::ClientContext* context = nullptr) {
  grpc::ClientContext own;
  if (context == nullptr) context = &own;
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::RunResponse response;
  grpc::Status status =
      v1::TensorOp::NewStub(channel)->Run(context, DocSliceRequest("doc"), &response);
  if (status.ok() && (response.outputs_size() != 1 || Unpack<float>(response.outputs(0).data()) !=
                                                          std::vector<float>{2, 4, 10, 12})) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "wrong outputs");
  }
  return status;
}

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         std::vector<uint64_t>* statuses) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  RawCall call(channel, kHealthCheck, &context);
  call.Write(WireString(1, service));
  call.WritesDone();
  if (std::optional<std::string> response = call.Read()) *statuses = WireVarints(*response, 1);
  return call.Finish();
}

// Lists services through reflection; the call's status.
grpc::Status ListServices(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  RawCall call(channel, kReflection, &context);
  call.Write(WireString(7, "*"));
  call.WritesDone();
  while (call.Read().has_value()) {
  }
  return call.Finish();
}

std::string Metrics(const TensordProcess& server) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  return result ? result->body : "";
}

// ---------------------------------------------------------------------------
// TLS

TEST_F(SecurityTest, ConformancePassesOverTlsWithATokenFromTensorctl) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);
  CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target", server.target(), "--ca_file",
                  P("ca.crt"), "--token_file", P("client.token"), ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr(" passed, 0 failed"));
  // The identity is logged, the token never.
  EXPECT_THAT(AwaitLogLine(server, {"\"identity\":\"token:ci\""}), HasSubstr("\"status\":\"OK\""));
  EXPECT_THAT(server.Log(), Not(HasSubstr(kToken)));
  EXPECT_THAT(Metrics(server), Not(HasSubstr(kToken)));
}

TEST_F(SecurityTest, TensorctlTakesTheFilesFromTheEnvironment) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);
  setenv("TENSOROP_CA_FILE", P("ca.crt").c_str(), 1);
  setenv("TENSOROP_TOKEN_FILE", P("client.token").c_str(), 1);
  CommandResult with_env = RunCommand({TensorctlPath(), "health", "--target", server.target()});
  CommandResult run = RunCommand({TensorctlPath(), "conformance", "--target", server.target(),
                                  ConformanceCasesDir() + "/slice.json"});
  unsetenv("TENSOROP_CA_FILE");
  unsetenv("TENSOROP_TOKEN_FILE");
  EXPECT_EQ(with_env.exit_code, 0) << with_env.out << with_env.err;
  EXPECT_EQ(with_env.out, "SERVING\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr(" passed, 0 failed"));
}

TEST_F(SecurityTest, PlaintextClientToATlsPortFailsAndReachesNoHandler) {
  TensordProcess server(TlsFlags());
  grpc::Status status = RunDocSlice(Connect(server.target()));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  CommandResult plain = RunCommand(
      {TensorctlPath(), "run", "--target", server.target(), ConformanceCasesDir() + "/slice.json"});
  // One line before any case: tensorctl cannot connect, and why.
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_EQ(plain.out, "");
  EXPECT_THAT(plain.err, StartsWith("tensorctl: cannot connect to " + server.target() + ": "));
  EXPECT_THAT(plain.err, HasSubstr("if it serves TLS, connect with --tls"));
  // gRPC core's own message about it is one of the log's JSON lines.
  EXPECT_THAT(AwaitLogLine(server, {"\"source\":\"grpc\"", "andshake"}),
              HasSubstr("\"level\":\"error\""));
  // The same server over TLS answers.
  EXPECT_TRUE(RunDocSlice(SecureChannel(server.target(), {pki_->Read("ca.crt")})).ok());
  EXPECT_THAT(Metrics(server), HasSubstr("tensorop_requests_total{method=\"Run\",op=\"slice\","));
  EXPECT_THAT(Metrics(server), Not(HasSubstr("code=\"UNAVAILABLE\"")));
}

TEST_F(SecurityTest, ClientSaysTheCertificateIsNotTrusted) {
  TensordProcess server(TlsFlags());
  CommandResult result = RunCommand(
      {TensorctlPath(), "health", "--target", server.target(), "--ca_file", P("other.crt")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, AllOf(HasSubstr("UNAVAILABLE: TLS: the server's certificate is not "
                                          "trusted"),
                                HasSubstr("--ca_file")));
}

TEST_F(SecurityTest, ClientSaysTheHostnameDoesNotMatch) {
  TensordProcess server(TlsFlags("elsewhere"));
  CommandResult result = RunCommand(
      {TensorctlPath(), "health", "--target", server.target(), "--ca_file", P("ca.crt")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("UNAVAILABLE: TLS hostname mismatch"));
}

TEST_F(SecurityTest, TensorctlNamesAnUnreadableFile) {
  CommandResult result = RunCommand(
      {TensorctlPath(), "health", "--target", "127.0.0.1:1", "--token_file", P("no-such.token")});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--token_file=" + P("no-such.token") +
                                    ": cannot read the file: No such file or directory"));
}

// ---------------------------------------------------------------------------
// Mutual TLS

TEST_F(SecurityTest, MutualTlsRefusesMissingForeignAndExpiredCertificates) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--tls_client_ca_file=" + P("ca.crt"));
  TensordProcess server(flags);
  const std::string ca = pki_->Read("ca.crt");
  struct Case {
    const char* what;
    Credentials credentials;
  };
  const Case refused[] = {
      {"no client certificate", {ca}},
      {"a certificate from another CA",
       {ca, pki_->Read("stranger.crt"), pki_->Read("stranger.key")}},
      {"an expired certificate", {ca, pki_->Read("expired.crt"), pki_->Read("expired.key")}},
  };
  for (const Case& c : refused) {
    grpc::Status status = RunDocSlice(SecureChannel(server.target(), c.credentials));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << c.what;
  }
  // tensorctl says why.
  CommandResult no_cert = RunCommand(
      {TensorctlPath(), "health", "--target", server.target(), "--ca_file", P("ca.crt")});
  EXPECT_EQ(no_cert.exit_code, 1);
  EXPECT_THAT(no_cert.out, HasSubstr("UNAVAILABLE: TLS: the server closed the connection during "
                                     "or right after the handshake; with mutual TLS"));
  // None reached a handler: nothing counted, nothing logged.
  EXPECT_THAT(Metrics(server), Not(HasSubstr("tensorop_requests_total{")));
  EXPECT_THAT(server.Log(), Not(HasSubstr("\"method\":\"Run\"")));

  grpc::Status ok = RunDocSlice(
      SecureChannel(server.target(), {ca, pki_->Read("client.crt"), pki_->Read("client.key")}));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"Run\""}),
              AllOf(HasSubstr("\"identity\":\"cert:"), HasSubstr("CN=client-a")));
}

TEST_F(SecurityTest, ConformancePassesOverMutualTlsWithAToken) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--tls_client_ca_file=" + P("ca.crt"));
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);
  CommandResult result =
      RunCommand({TensorctlPath(), "conformance", "--target", server.target(), "--ca_file",
                  P("ca.crt"), "--cert_file", P("client.crt"), "--key_file", P("client.key"),
                  "--token_file", P("client.token"), "--stream", ConformanceCasesDir()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr(" passed, 0 failed"));
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"RunStream\""}),
              AllOf(HasSubstr("\"identity\":\"token:ci cert:"), HasSubstr("CN=client-a")));
}

// ---------------------------------------------------------------------------
// Tokens

TEST_F(SecurityTest, TokenMissingOrWrongIsUnauthenticatedBeforeAnyHandler) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);
  const std::string ca = pki_->Read("ca.crt");

  grpc::Status missing = RunDocSlice(SecureChannel(server.target(), {ca}));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(missing.error_message(), HasSubstr("authorization: Bearer <token>"));
  grpc::Status wrong = RunDocSlice(SecureChannel(server.target(), {ca, "", "", "not-a-token"}));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("the bearer token is not accepted"));
  const std::string metrics = Metrics(server);
  EXPECT_THAT(metrics, HasSubstr("tensorop_auth_failures_total{reason=\"missing\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("tensorop_auth_failures_total{reason=\"invalid\"} 1\n"));
  EXPECT_THAT(metrics, Not(HasSubstr("tensorop_requests_total{")));
  // Every RPC has its line, refusals too: the method, the status and why.
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"Run\"", "authorization: Bearer <token>"}),
              HasSubstr("\"status\":\"UNAUTHENTICATED\""));
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"Run\"", "the bearer token is not accepted"}),
              HasSubstr("\"level\":\"warning\""));

  CommandResult tensorctl =
      RunCommand({TensorctlPath(), "run", "--target", server.target(), "--ca_file", P("ca.crt"),
                  "--token_file", P("wrong.token"), ConformanceCasesDir() + "/slice.json"});
  EXPECT_THAT(tensorctl.out, HasSubstr("\"code\":\"UNAUTHENTICATED\""));
  EXPECT_THAT(tensorctl.out, HasSubstr("the bearer token is not accepted by this server"));

  grpc::Status right = RunDocSlice(SecureChannel(server.target(), {ca, "", "", kToken}));
  EXPECT_TRUE(right.ok()) << right.error_message();
  EXPECT_THAT(Metrics(server),
              HasSubstr("tensorop_requests_total{method=\"Run\",op=\"slice\",backend=\"cpu\","
                        "code=\"OK\"} 1\n"));
  EXPECT_THAT(server.Log(), Not(HasSubstr("not-a-token")));
}

TEST_F(SecurityTest, RotatedTokenIsRejectedAndCallsInFlightAreUnharmed) {
  pki_->Replace("rotating.tokens", std::string("ci:") + kToken + "\n");
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("rotating.tokens"));
  TensordProcess server(flags);
  const std::string ca = pki_->Read("ca.crt");

  // A RunBidi stream admitted with the old token.
  grpc::ClientContext context;
  auto stub = v1::TensorOp::NewStub(SecureChannel(server.target(), {ca, "", "", kToken}));
  std::unique_ptr<grpc::ClientReaderWriter<v1::RunRequest, v1::RunResponse>> stream =
      stub->RunBidi(&context);
  v1::RunResponse response;
  ASSERT_TRUE(stream->Write(DocSliceRequest("before")));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.id(), "before");

  pki_->Replace("rotating.tokens", std::string("ops:") + kOtherToken + "\n");
  EXPECT_TRUE(Eventually([&] {
    return RunDocSlice(SecureChannel(server.target(), {ca, "", "", kToken})).error_code() ==
           grpc::StatusCode::UNAUTHENTICATED;
  })) << server.Log();
  grpc::Status renewed = RunDocSlice(SecureChannel(server.target(), {ca, "", "", kOtherToken}));
  EXPECT_TRUE(renewed.ok()) << renewed.error_message();
  EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"auth_tokens_reloaded\""}),
              HasSubstr("1 tokens from"));

  // The stream admitted before still works.
  ASSERT_TRUE(stream->Write(DocSliceRequest("after")));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.id(), "after");
  EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(AwaitLogLine(server, {"\"id\":\"after\""}), HasSubstr("\"identity\":\"token:ci\""));
  EXPECT_THAT(server.Log(), AllOf(Not(HasSubstr(kToken)), Not(HasSubstr(kOtherToken))));
}

TEST_F(SecurityTest, SighupRereadsTheTokens) {
  pki_->Replace("hup.tokens", std::string("ci:") + kToken + "\n");
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("hup.tokens"));
  TensordProcess server(flags);
  pki_->Replace("hup.tokens", std::string("ops:") + kOtherToken + "\n");
  kill(server.pid(), SIGHUP);
  EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"auth_tokens_reloaded\""}),
              HasSubstr("1 tokens from"));
  grpc::Status renewed =
      RunDocSlice(SecureChannel(server.target(), {pki_->Read("ca.crt"), "", "", kOtherToken}));
  EXPECT_TRUE(renewed.ok()) << renewed.error_message();
  // Still running: SIGHUP does not stop it.
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(SecurityTest, ABadTokenFileIsLoggedAndTheOldTokensKept) {
  pki_->Replace("bad.tokens", std::string("ci:") + kToken + "\n");
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("bad.tokens"));
  TensordProcess server(flags);
  pki_->Replace("bad.tokens", "ci:a\nci:b\n");
  EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"auth_tokens_reload_failed\""}),
              HasSubstr("the name \\\"ci\\\" is used twice; still accepting the previous tokens"));
  grpc::Status old =
      RunDocSlice(SecureChannel(server.target(), {pki_->Read("ca.crt"), "", "", kToken}));
  EXPECT_TRUE(old.ok()) << old.error_message();
}

// ---------------------------------------------------------------------------
// Health and reflection

TEST_F(SecurityTest, HealthListenerServesOnlyHealthWithoutCredentials) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--tls_client_ca_file=" + P("ca.crt"));
  flags.push_back("--auth_token_file=" + P("tokens"));
  flags.push_back("--health_address=127.0.0.1:0");
  flags.push_back("--backends=cpu");
  TensordProcess server(flags);
  ASSERT_FALSE(server.health_target().empty());
  std::shared_ptr<grpc::Channel> plain = Connect(server.health_target());
  for (const std::string service : {"", "tensorop.v1.TensorOp", "tensorop.cpu"}) {
    std::vector<uint64_t> statuses;
    grpc::Status status = CheckHealth(plain, service, &statuses);
    ASSERT_TRUE(status.ok()) << service << ": " << status.error_message();
    EXPECT_THAT(statuses, ElementsAre(kServing)) << service;
  }
  // Mirrors the main statuses: no OpenCL here.
  std::vector<uint64_t> opencl;
  ASSERT_TRUE(CheckHealth(plain, "tensorop.opencl", &opencl).ok());
  EXPECT_THAT(opencl, ElementsAre(kNotServing));
  // Nothing else there.
  EXPECT_EQ(RunDocSlice(plain).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(ListServices(plain).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // tensorctl health against it, as a probe would.
  CommandResult probe = RunCommand({TensorctlPath(), "health", "--target", server.health_target()});
  EXPECT_EQ(probe.exit_code, 0) << probe.out;
  EXPECT_EQ(probe.out, "SERVING\n");
  EXPECT_THAT(Metrics(server), Not(HasSubstr("tensorop_requests_total{")));
}

TEST_F(SecurityTest, HealthOnTheTlsPortNeedsNoToken) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--auth_token_file=" + P("tokens"));
  TensordProcess server(flags);
  std::vector<uint64_t> statuses;
  grpc::Status status =
      CheckHealth(SecureChannel(server.target(), {pki_->Read("ca.crt")}), "", &statuses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(statuses, ElementsAre(kServing));
  EXPECT_THAT(Metrics(server), HasSubstr("tensorop_auth_failures_total{reason=\"missing\"} 0\n"));
}

TEST_F(SecurityTest, ReflectionFollowsItsFlag) {
  const std::string ca = pki_->Read("ca.crt");
  for (const std::string mode : {"auth", "on", "off"}) {
    std::vector<std::string> flags = TlsFlags();
    flags.push_back("--auth_token_file=" + P("tokens"));
    flags.push_back("--reflection=" + mode);
    TensordProcess server(flags);
    grpc::Status anonymous = ListServices(SecureChannel(server.target(), {ca}));
    grpc::Status with_token = ListServices(SecureChannel(server.target(), {ca, "", "", kToken}));
    if (mode == "auth") {
      EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_TRUE(with_token.ok()) << with_token.error_message();
    } else if (mode == "on") {
      EXPECT_TRUE(anonymous.ok()) << anonymous.error_message();
      EXPECT_TRUE(with_token.ok()) << with_token.error_message();
    } else {
      EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_EQ(with_token.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    }
  }
}

// ---------------------------------------------------------------------------
// Certificate rotation

// The common name of the server certificate a new connection sees.
std::string ServerCommonName(const std::string& target, const std::string& ca) {
  grpc::ClientContext context;
  if (!RunDocSlice(SecureChannel(target, {ca}), &context).ok()) return "";
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  std::vector<grpc::string_ref> names = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  return names.empty() ? "" : std::string(names[0].data(), names[0].size());
}

TEST_F(SecurityTest, CertificateRotationUnderLoadFailsNoCall) {
  pki_->Copy("server.crt", "live.crt");
  pki_->Copy("server.key", "live.key");
  TensordProcess server(TlsFlags("live"));
  const std::string ca = pki_->Read("ca.crt");
  ASSERT_EQ(ServerCommonName(server.target(), ca), "tensord");

  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex failure_mu;
  std::vector<std::thread> load;
  for (int t = 0; t < 2; ++t) {
    load.emplace_back([&] {
      // One long-lived connection and a new handshake per call, alternately.
      std::shared_ptr<grpc::Channel> kept = SecureChannel(server.target(), {ca});
      for (int i = 0; !stop; ++i) {
        grpc::Status status = RunDocSlice(i % 2 == 0 ? kept : SecureChannel(server.target(), {ca}));
        ++calls;
        if (!status.ok()) {
          ++failures;
          std::lock_guard<std::mutex> lock(failure_mu);
          if (first_failure.empty()) first_failure = status.error_message();
        }
      }
    });
  }
  // Kubernetes replaces the files one after the other: the key first, then
  // the certificate. In between they do not match, which must not matter.
  pki_->Copy("server2.key", "live.key");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  pki_->Copy("server2.crt", "live.crt");
  const bool rotated =
      Eventually([&] { return ServerCommonName(server.target(), ca) == "tensord-rotated"; });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (std::thread& thread : load) thread.join();
  EXPECT_TRUE(rotated) << server.Log();
  EXPECT_GT(calls.load(), 10);
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_THAT(server.Log(), HasSubstr("\"event\":\"tls_reloaded\""));
}

TEST_F(SecurityTest, ABadNewCertificateIsLoggedAndTheOldOneKept) {
  pki_->Copy("server.crt", "keep.crt");
  pki_->Copy("server.key", "keep.key");
  TensordProcess server(TlsFlags("keep"));
  const std::string ca = pki_->Read("ca.crt");
  pki_->Replace("keep.crt", "not a certificate\n");
  EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"tls_reload_failed\""}),
              HasSubstr("--tls_cert_file=" + P("keep.crt") +
                        ": no PEM certificate (-----BEGIN CERTIFICATE-----) in the file; "
                        "still serving the previous certificate"));
  // A few seconds of new handshakes still see the old certificate.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ServerCommonName(server.target(), ca), "tensord");
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  }
}

// ---------------------------------------------------------------------------
// Startup errors

CommandResult StartTensord(std::vector<std::string> flags) {
  std::vector<std::string> argv = {TensordPath(), "--address=127.0.0.1:0",
                                   "--metrics_address=", "--http_address="};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunCommand(argv);
}

TEST_F(SecurityTest, StartupErrorsNameTheFileAndTheProblem) {
  const std::string missing = P("missing.crt");
  CommandResult no_file =
      StartTensord({"--tls_cert_file=" + missing, "--tls_key_file=" + P("server.key")});
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_THAT(no_file.err, HasSubstr("tensord: --tls_cert_file=" + missing +
                                     ": cannot read the file: No such file or directory"));

  CommandResult mismatch =
      StartTensord({"--tls_cert_file=" + P("server.crt"), "--tls_key_file=" + P("client.key")});
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_THAT(mismatch.err, HasSubstr("tensord: --tls_key_file=" + P("client.key") +
                                      ": the key does not match the certificate in "
                                      "--tls_cert_file=" +
                                      P("server.crt")));

  CommandResult not_a_key =
      StartTensord({"--tls_cert_file=" + P("server.crt"), "--tls_key_file=" + P("server.crt")});
  EXPECT_EQ(not_a_key.exit_code, 1);
  EXPECT_THAT(not_a_key.err,
              HasSubstr("--tls_key_file=" + P("server.crt") + ": no unencrypted PEM private key"));

  CommandResult expired =
      StartTensord({"--tls_cert_file=" + P("expired.crt"), "--tls_key_file=" + P("expired.key")});
  EXPECT_EQ(expired.exit_code, 1);
  EXPECT_THAT(expired.err,
              HasSubstr("--tls_cert_file=" + P("expired.crt") + ": the certificate expired on "));

  CommandResult bad_ca =
      StartTensord({"--tls_cert_file=" + P("server.crt"), "--tls_key_file=" + P("server.key"),
                    "--tls_client_ca_file=" + P("server.key")});
  EXPECT_EQ(bad_ca.exit_code, 1);
  EXPECT_THAT(bad_ca.err,
              HasSubstr("--tls_client_ca_file=" + P("server.key") + ": no PEM certificate"));

  CommandResult no_tokens =
      StartTensord({"--tls_cert_file=" + P("server.crt"), "--tls_key_file=" + P("server.key"),
                    "--auth_token_file=" + P("server.crt.none")});
  EXPECT_EQ(no_tokens.exit_code, 1);
  EXPECT_THAT(no_tokens.err,
              HasSubstr("--auth_token_file=" + P("server.crt.none") + ": cannot read the file"));
}

TEST_F(SecurityTest, FlagCombinationsAreUsageErrors) {
  CommandResult key_only = StartTensord({"--tls_key_file=" + P("server.key")});
  EXPECT_EQ(key_only.exit_code, 2);
  EXPECT_THAT(key_only.err, HasSubstr("--tls_cert_file and --tls_key_file go together"));
  CommandResult token_plain = StartTensord({"--auth_token_file=" + P("tokens")});
  EXPECT_EQ(token_plain.exit_code, 2);
  EXPECT_THAT(token_plain.err, HasSubstr("--auth_token_file needs --tls_cert_file"));
  CommandResult reflection = StartTensord({"--reflection=maybe"});
  EXPECT_EQ(reflection.exit_code, 2);
  EXPECT_THAT(reflection.err, HasSubstr("--reflection=maybe: expected on, off or auth"));
}

}  // namespace
}  // namespace tensorop::testing
