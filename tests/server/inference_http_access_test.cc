// The v2 HTTP front end's access: bearer tokens checked and counted as gRPC's
// are, and the --http_address flag.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/process/config.h"
#include "server/security/auth.h"
#include "server/v2/inference_http.h"
#include "server/wire/status_map.h"
#include "tests/support/temp_files.h"

namespace tensorop::server {
namespace {

TEST(InferenceHttpAuth, BearerTokensAreCheckedAndCountedAsForGrpc) {
  testing::TempFiles files;
  const std::string path = files.Write("alice:s3cret\n");
  absl::StatusOr<std::unique_ptr<TokenStore>> tokens =
      TokenStore::Load(path, [](absl::string_view, absl::string_view) {});
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  AuthCounters counters;
  absl::StatusOr<std::string> missing = CheckHttpBearer(nullptr, **tokens, counters);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.status().message(),
              ::testing::HasSubstr("send the header \"Authorization: Bearer <token>\""));
  const std::string basic = "Basic abc";
  EXPECT_EQ(CheckHttpBearer(&basic, **tokens, counters).status().code(),
            absl::StatusCode::kUnauthenticated);
  const std::string wrong = "Bearer nope";
  absl::StatusOr<std::string> invalid = CheckHttpBearer(&wrong, **tokens, counters);
  EXPECT_THAT(invalid.status().message(),
              ::testing::HasSubstr("the bearer token is not accepted by this server"));
  const std::string right = "Bearer s3cret";
  absl::StatusOr<std::string> name = CheckHttpBearer(&right, **tokens, counters);
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(*name, "alice");
  EXPECT_EQ(counters.missing.load(), 2u);
  EXPECT_EQ(counters.invalid.load(), 1u);
  EXPECT_EQ(ToHttpStatus(missing.status().code()), 401);
}

TEST(InferenceHttpConfig, HttpAddressFlag) {
  absl::StatusOr<ServerConfig> config = ConfigFromFlags({});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->http_address, "0.0.0.0:8000");
  config = ConfigFromFlags({"--http_address="});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->http_address, "");
  EXPECT_THAT(ConfigFromFlags({"--http_address=localhost:99999"}).status().message(),
              ::testing::HasSubstr("--http_address=localhost:99999: the port must be in"));
  EXPECT_THAT(ConfigFromFlags({"--http_address=nohost"}).status().message(),
              ::testing::HasSubstr("--http_address=nohost: expected HOST:PORT"));
  // With TLS the v2 HTTP API serves HTTPS on its address (no longer refused).
  config = ConfigFromFlags({"--tls_cert_file=/x/c.pem", "--tls_key_file=/x/k.pem"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_address, "0.0.0.0:8000");
  EXPECT_EQ(config->security.tls.cert_file, "/x/c.pem");
}

}  // namespace
}  // namespace tensorop::server
