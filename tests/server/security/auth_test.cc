// The token file format, the constant-time token check, reloading, and the
// request log's identity field (server/security/auth.h).
#include "server/security/auth.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/telemetry/request_log.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_files.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::StatusIs;
using ::tensorop::testing::TempFiles;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

std::vector<std::string> Names(const std::vector<AcceptedToken>& tokens) {
  std::vector<std::string> names;
  for (const AcceptedToken& token : tokens) names.push_back(token.name);
  return names;
}

TEST(TokenFileTest, NamedAndBareTokensCommentsAndBlankLines) {
  absl::StatusOr<std::vector<AcceptedToken>> tokens =
      ParseTokenFile("/t", "# accepted\n\nci:abc123\n  ops-1@example.com : def456  \nghi789\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_THAT(Names(*tokens), ElementsAre("ci", "ops-1@example.com", "line-5"));
}

TEST(TokenFileTest, ErrorsNameTheLineNeverTheToken) {
  EXPECT_THAT(
      ParseTokenFile("/t", "ci:\n"),
      StatusIs(absl::StatusCode::kInvalidArgument, "--auth_token_file=/t:1: the token is empty"));
  EXPECT_THAT(ParseTokenFile("/t", "a b:secret-one\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth_token_file=/t:1: a token's name (before the first ':') must be "
                       "letters, digits and ._-@"));
  EXPECT_THAT(ParseTokenFile("/t", "ci:secret-one\nci:secret-two\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth_token_file=/t:2: the name \"ci\" is used twice"));
  EXPECT_THAT(ParseTokenFile("/t", "ci:secret one\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth_token_file=/t:1: a token is printable ASCII without spaces"));
  EXPECT_THAT(ParseTokenFile("/t", "# nothing\n\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth_token_file=/t: no tokens in the file (it would refuse every call)"));
  for (const std::string text : {"a b:secret-one\n", "ci:secret one\n"}) {
    EXPECT_THAT(std::string(ParseTokenFile("/t", text).status().message()),
                Not(HasSubstr("secret")));
  }
}

TEST(TokenStoreTest, ChecksWholeTokensAndReloads) {
  TempFiles files;
  const std::string path = files.Write("ci:abc123\nops:def456\n");
  std::vector<std::pair<std::string, std::string>> events;
  absl::StatusOr<std::unique_ptr<TokenStore>> store =
      TokenStore::Load(path, [&](absl::string_view event, absl::string_view detail) {
        events.emplace_back(std::string(event), std::string(detail));
      });
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT((*store)->Check("abc123"), Optional(std::string("ci")));
  EXPECT_THAT((*store)->Check("def456"), Optional(std::string("ops")));
  EXPECT_EQ((*store)->Check("abc12"), std::nullopt);
  EXPECT_EQ((*store)->Check("abc1234"), std::nullopt);
  EXPECT_EQ((*store)->Check(""), std::nullopt);

  (*store)->Reload();  // unchanged: nothing happens
  EXPECT_TRUE(events.empty());

  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    std::fputs("ops:def456\n", file);
    std::fclose(file);
  }
  (*store)->Reload();
  EXPECT_EQ((*store)->Check("abc123"), std::nullopt);
  EXPECT_THAT((*store)->Check("def456"), Optional(std::string("ops")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].first, "auth_tokens_reloaded");

  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    std::fputs("ops:\n", file);
    std::fclose(file);
  }
  (*store)->Reload();
  (*store)->Reload();  // reported once
  EXPECT_THAT((*store)->Check("def456"), Optional(std::string("ops")));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].first, "auth_tokens_reload_failed");
  EXPECT_THAT(events[1].second, HasSubstr(":1: the token is empty; still accepting the previous"));
}

TEST(TokenStoreTest, LoadErrorsNameTheFile) {
  EXPECT_THAT(TokenStore::Load("/no/such/tokens", nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth_token_file=/no/such/tokens: cannot read the file: No such file or "
                       "directory"));
}

TEST(ReflectionAccessTest, ParsesTheThreeModes) {
  EXPECT_EQ(ParseReflectionAccess("on"), ReflectionAccess::kOn);
  EXPECT_EQ(ParseReflectionAccess("off"), ReflectionAccess::kOff);
  EXPECT_EQ(ParseReflectionAccess("auth"), ReflectionAccess::kAuth);
  EXPECT_EQ(ParseReflectionAccess("yes"), std::nullopt);
}

TEST(CallerIdentityTest, TokenThenCertificateJoinedByASpace) {
  EXPECT_EQ(CallerIdentity("", ""), "");
  EXPECT_EQ(CallerIdentity("alice", ""), "token:alice");
  EXPECT_EQ(CallerIdentity("", "CN=alice,O=tensorop test"), "cert:CN=alice,O=tensorop test");
  EXPECT_EQ(CallerIdentity("alice", "CN=alice,O=tensorop test"),
            "token:alice cert:CN=alice,O=tensorop test");
  // The subject as given (RFC 2253 escapes kept): one caller, one string.
  EXPECT_EQ(CallerIdentity("ci", R"(CN=alice\, ops,O=tensorop test)"),
            R"(token:ci cert:CN=alice\, ops,O=tensorop test)");
  // Different tokens or certificates are different callers.
  EXPECT_NE(CallerIdentity("alice", "CN=a"), CallerIdentity("alice", "CN=b"));
  EXPECT_NE(CallerIdentity("alice", "CN=a"), CallerIdentity("alice", ""));
  EXPECT_NE(CallerIdentity("alice", ""), CallerIdentity("", "CN=alice"));
}

TEST(RequestLogIdentityTest, LoggedOnlyForAnAuthenticatedCaller) {
  CallRecord record;
  record.method = "Run";
  const absl::Time end = absl::FromUnixSeconds(0);
  record.start = end;
  EXPECT_THAT(FormatLogLine(record, absl::OkStatus(), end), Not(HasSubstr("identity")));
  record.identity = "token:ci cert:CN=client-a";
  EXPECT_THAT(FormatLogLine(record, absl::OkStatus(), end),
              HasSubstr(",\"status\":\"OK\",\"identity\":\"token:ci cert:CN=client-a\"}"));
}

}  // namespace
}  // namespace tensorop::server
