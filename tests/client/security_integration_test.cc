// The C++ Client (ClientOptions::security) against a real tensord with TLS,
// mutual TLS and bearer tokens, with certificates made by openssl at test time;
// and tensorctl's handle commands with the same flags.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::CommandResult;
using ::tensorop::testing::RunCommand;
using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TensorctlPath;
using ::tensorop::testing::TensordProcess;
using ::tensorop::testing::TestPki;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// uint8 [4] 1..4, slice offsets [1] size [2]: [2, 3].
v1::RunRequest SmallSlice() {
  v1::RunRequest request;
  request.set_id("small");
  request.set_backend(v1::CPU);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(4);
  input.set_data(std::string("\x01\x02\x03\x04", 4));
  request.mutable_slice()->add_offsets(1);
  request.mutable_slice()->add_window_sizes(2);
  request.mutable_slice()->add_window_strides(1);
  request.add_outputs()->add_sizes(2);
  return request;
}

class ClientSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki();
    pki_->MakeCa("ca", "client test CA");
    pki_->MakeServerCert("server", "ca");
    pki_->MakeCert("client", "ca", "cpp-client", "");
    pki_->Replace("tokens", "cpp:cpp-token-0123456789\n");
    pki_->Replace("client.token", "cpp-token-0123456789\n");
    pki_->Replace("wrong.token", "wrong\n");
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  static TensordProcess* StartServer() {
    return new TensordProcess({"--tls_cert_file=" + pki_->Path("server.crt"),
                               "--tls_key_file=" + pki_->Path("server.key"),
                               "--tls_client_ca_file=" + pki_->Path("ca.crt"),
                               "--auth_token_file=" + pki_->Path("tokens")});
  }
  static ClientOptions Options(const std::string& token_file) {
    ClientOptions options;
    options.security.ca_file = pki_->Path("ca.crt");
    options.security.cert_file = pki_->Path("client.crt");
    options.security.key_file = pki_->Path("client.key");
    options.security.token_file = token_file.empty() ? "" : pki_->Path(token_file);
    options.deadline = absl::Seconds(30);
    return options;
  }
  static TestPki* pki_;
};

TestPki* ClientSecurityTest::pki_ = nullptr;

TEST_F(ClientSecurityTest, EveryCallStyleWorksOverMutualTlsWithAToken) {
  std::unique_ptr<TensordProcess> server(StartServer());
  Client client(server->target(), Options("client.token"));
  for (int style = 0; style < 3; ++style) {
    absl::StatusOr<Result> result = style == 0   ? client.Run(SmallSlice())
                                    : style == 1 ? client.RunStream(SmallSlice())
                                                 : client.RunChunked(SmallSlice());
    ASSERT_TRUE(result.ok()) << style << ": " << result.status();
    ASSERT_EQ(result->outputs.size(), 1u);
    EXPECT_EQ(result->outputs[0].data, std::string("\x02\x03", 2)) << style;
  }
  std::vector<absl::StatusOr<Result>> bidi = client.RunBidi({SmallSlice()});
  ASSERT_EQ(bidi.size(), 1u);
  EXPECT_TRUE(bidi[0].ok()) << bidi[0].status();
  absl::StatusOr<std::string> health = client.CheckHealth("");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

TEST_F(ClientSecurityTest, WrongOrMissingTokenIsUnauthenticatedAndSaysSo) {
  std::unique_ptr<TensordProcess> server(StartServer());
  Client wrong(server->target(), Options("wrong.token"));
  EXPECT_THAT(wrong.Run(SmallSlice()), StatusIs(absl::StatusCode::kUnauthenticated,
                                                HasSubstr("the bearer token is not accepted")));
  Client none(server->target(), Options(""));
  EXPECT_THAT(none.Run(SmallSlice()),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("needs a bearer token")));
}

TEST_F(ClientSecurityTest, HandlesWorkOverMutualTlsWithATokenFromTheClientAndTensorctl) {
  std::unique_ptr<TensordProcess> server(StartServer());
  Client client(server->target(), Options("client.token"));
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle handle,
                       client.Put(HostTensor{v1::UINT8, {4}, {}, "\x01\x02\x03\x04"}));
  ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(handle.id()));
  EXPECT_EQ(fetched.data, "\x01\x02\x03\x04");

  // tensorctl's security flags reach the handle commands: the same identity
  // sees the handle; a wrong token is turned away.
  const std::vector<std::string> security = {"--ca_file=" + pki_->Path("ca.crt"),
                                             "--cert_file=" + pki_->Path("client.crt"),
                                             "--key_file=" + pki_->Path("client.key")};
  std::vector<std::string> list = {TensorctlPath(), "handles", "--target", server->target(),
                                   "--token_file=" + pki_->Path("client.token")};
  list.insert(list.end(), security.begin(), security.end());
  const CommandResult listed = RunCommand(list);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("\"id\":\"" + handle.id() + "\""));
  std::vector<std::string> wrong = {TensorctlPath(),
                                    "fetch",
                                    "--target",
                                    server->target(),
                                    "--token_file=" + pki_->Path("wrong.token"),
                                    handle.id()};
  wrong.insert(wrong.end(), security.begin(), security.end());
  const CommandResult refused = RunCommand(wrong);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, StartsWith("UNAUTHENTICATED: "));

  ASSERT_OK(client.Release({handle.id()}));
  EXPECT_THAT(client.Fetch(handle.id()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does not exist")));
}

// A handle's calls go to its replica's own address (127.0.0.1 here) with
// the authority of the target the client was given, so a certificate issued
// for that name alone (a Kubernetes Service's) verifies.
TEST_F(ClientSecurityTest, CallsOnAHandleVerifyTheNameTheTargetGave) {
  pki_->MakeCert("name-only", "ca", "tensord", "DNS:localhost");
  TensordProcess server({"--tls_cert_file=" + pki_->Path("name-only.crt"),
                         "--tls_key_file=" + pki_->Path("name-only.key")});
  const std::string port = server.target().substr(server.target().rfind(':') + 1);
  Client client("localhost:" + port, Options(""));
  ASSERT_OK_AND_ASSIGN(const v1::TensorHandle handle,
                       client.Put(HostTensor{v1::UINT8, {4}, {}, "\x01\x02\x03\x04"}));
  EXPECT_EQ(handle.replica(), server.target());
  ASSERT_OK_AND_ASSIGN(const HostTensor fetched, client.Fetch(handle));
  EXPECT_EQ(fetched.data, "\x01\x02\x03\x04");
  v1::RunRequest request = SmallSlice();
  ReferTo(handle, (*request.mutable_inputs())["input"]);
  ASSERT_OK_AND_ASSIGN(const Result result, client.Run(request));
  EXPECT_EQ(result.outputs[0].data, std::string("\x02\x03", 2));

  // Dialled by its IP, the server's certificate does not name the host.
  Client by_ip(server.target(), Options(""));
  EXPECT_THAT(
      by_ip.Fetch(handle),
      StatusIs(absl::StatusCode::kUnavailable,
               AllOf(StartsWith(absl::StrCat("replica ", server.target(), " holding ",
                                             handle.id().substr(0, 8), "... is unreachable: ")),
                     HasSubstr("TLS hostname mismatch"))));
  ASSERT_OK(client.Release({handle}));
}

TEST_F(ClientSecurityTest, AnUnreadableFileMakesEveryCallInvalidArgument) {
  ClientOptions options = Options("missing.token");
  Client client("127.0.0.1:1", options);
  EXPECT_THAT(client.Run(SmallSlice()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--token_file=" + pki_->Path("missing.token") +
                           ": cannot read the file: No such file or directory"));
}

}  // namespace
}  // namespace tensorop::client
