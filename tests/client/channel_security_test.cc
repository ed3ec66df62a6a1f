// ChannelSecurity: options from the environment, credentials from files (with
// errors naming the option and the file), and errors that say which part of
// transport security failed.
#include <stdlib.h>

#include <string>

#include "client/channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_files.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TempFiles;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(ChannelSecurityTest, AnyFileImpliesTls) {
  EXPECT_FALSE(ChannelSecurity{}.enabled());
  ChannelSecurity token;
  token.token_file = "/t";
  EXPECT_TRUE(token.enabled());
  ChannelSecurity tls;
  tls.tls = true;
  EXPECT_TRUE(tls.enabled());
}

TEST(ChannelSecurityTest, EnvironmentFillsWhatFlagsLeaveEmpty) {
  ScopedEnv tls("TENSOROP_TLS", "true");
  ScopedEnv ca("TENSOROP_CA_FILE", "/env/ca.crt");
  ScopedEnv token("TENSOROP_TOKEN_FILE", "/env/token");
  ChannelSecurity flags;
  flags.ca_file = "/flag/ca.crt";
  ChannelSecurity merged = WithSecurityEnvironment(flags);
  EXPECT_TRUE(merged.tls);
  EXPECT_EQ(merged.ca_file, "/flag/ca.crt");  // the flag wins
  EXPECT_EQ(merged.token_file, "/env/token");
  EXPECT_EQ(merged.cert_file, "");
}

TEST(ChannelSecurityTest, PlaintextWithoutOptions) {
  EXPECT_TRUE(ChannelCredentials(ChannelSecurity{}).ok());
}

TEST(ChannelSecurityTest, FileErrorsNameTheOptionAndTheFile) {
  ChannelSecurity missing;
  missing.ca_file = "/no/such/ca.crt";
  EXPECT_THAT(ChannelCredentials(missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--ca_file=/no/such/ca.crt: cannot read the file: No such file or "
                       "directory"));
  TempFiles files;
  ChannelSecurity empty;
  empty.token_file = files.Write("  \n");
  EXPECT_THAT(ChannelCredentials(empty),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--token_file=" + empty.token_file + ": the file is empty"));
  ChannelSecurity half;
  half.cert_file = files.Write("cert");
  EXPECT_THAT(ChannelCredentials(half),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--cert_file and --key_file go together: a client certificate needs "
                       "its key"));
}

TEST(ExplainSecurityErrorTest, SaysWhichPartFailed) {
  EXPECT_THAT(ExplainSecurityError(absl::UnavailableError(
                  "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                  "Ssl handshake failed: SSL_ERROR_SSL: error:1000007d:SSL routines:"
                  "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED")),
              StatusIs(absl::StatusCode::kUnavailable,
                       StartsWith("TLS: the server's certificate is not trusted")));
  EXPECT_THAT(ExplainSecurityError(absl::UnavailableError(
                  "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                  "Peer name 127.0.0.1 is not in peer certificate")),
              StatusIs(absl::StatusCode::kUnavailable, StartsWith("TLS hostname mismatch")));
  EXPECT_THAT(ExplainSecurityError(absl::UnavailableError(
                  "... SSL_ERROR_SSL: error:10000410:SSL routines:OPENSSL_internal:"
                  "SSLV3_ALERT_HANDSHAKE_FAILURE")),
              StatusIs(absl::StatusCode::kUnavailable,
                       StartsWith("TLS: the server refused our client certificate")));
}

TEST(ExplainClosedConnectionTest, DependsOnWhetherTheChannelUsesTls) {
  const absl::Status closed = absl::UnavailableError(
      "connections to all backends failing; last error: UNAVAILABLE: ipv4:127.0.0.1:1: "
      "Socket closed");
  EXPECT_THAT(ExplainClosedConnection(closed, true),
              StatusIs(absl::StatusCode::kUnavailable,
                       StartsWith("TLS: the server closed the connection during or right after "
                                  "the handshake; with mutual TLS")));
  EXPECT_THAT(ExplainClosedConnection(closed, false),
              StatusIs(absl::StatusCode::kUnavailable,
                       StartsWith("the server closed the connection at once; if it serves TLS, "
                                  "connect with --tls")));
  EXPECT_EQ(ExplainClosedConnection(absl::UnavailableError("Connection refused"), true),
            absl::UnavailableError("Connection refused"));
  EXPECT_EQ(ExplainClosedConnection(absl::InternalError("Socket closed"), true),
            absl::InternalError("Socket closed"));
}

TEST(ExplainSecurityErrorTest, OtherStatusesAreUnchanged) {
  EXPECT_EQ(ExplainSecurityError(absl::UnavailableError("Connection refused")),
            absl::UnavailableError("Connection refused"));
  EXPECT_EQ(ExplainSecurityError(absl::InvalidArgumentError("CERTIFICATE_VERIFY_FAILED")),
            absl::InvalidArgumentError("CERTIFICATE_VERIFY_FAILED"));
  EXPECT_EQ(ExplainSecurityError(absl::UnauthenticatedError("the bearer token is not accepted")),
            absl::UnauthenticatedError("the bearer token is not accepted"));
  EXPECT_TRUE(ExplainSecurityError(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace tensorop::client
