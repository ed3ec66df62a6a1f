// The v2 HTTP front end's access: bearer tokens checked and counted as gRPC's
// are.
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tensorop::server
