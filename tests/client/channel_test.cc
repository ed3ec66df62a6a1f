// ChannelTarget: what users type as --target becomes the gRPC target that
// balances over the replicas; malformed lists are INVALID_ARGUMENT naming the
// entry. And the service config every channel gets, and a replica's channel.
#include "client/channel.h"

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace tensorop::client {
namespace {

using ::tensorop::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ChannelTargetTest, OneAddressOrNameIsLeftToGrpcsResolver) {
  EXPECT_EQ(*ChannelTarget("127.0.0.1:50051"), "127.0.0.1:50051");
  EXPECT_EQ(*ChannelTarget("localhost:50051"), "localhost:50051");
  EXPECT_EQ(*ChannelTarget("tensord-headless.ml.svc.cluster.local:50051"),
            "tensord-headless.ml.svc.cluster.local:50051");
}

TEST(ChannelTargetTest, TargetUrisAreUnchanged) {
  for (const std::string target : {"dns:///tensord-headless:50051", "dns://8.8.8.8/tensord:50051",
                                   "ipv4:10.0.0.1:1,10.0.0.2:2", "ipv6:[::1]:1",
                                   "unix:/run/tensord.sock", "unix-abstract:tensord"}) {
    EXPECT_EQ(*ChannelTarget(target), target);
  }
}

TEST(ChannelTargetTest, ListsOfIpLiteralsBecomeIpv4OrIpv6Uris) {
  EXPECT_EQ(*ChannelTarget("10.0.0.1:50051,10.0.0.2:50051, 10.0.0.3:50052"),
            "ipv4:10.0.0.1:50051,10.0.0.2:50051,10.0.0.3:50052");
  EXPECT_EQ(*ChannelTarget("[::1]:1,[fe80::1]:2"), "ipv6:[::1]:1,[fe80::1]:2");
}

TEST(ChannelTargetTest, MalformedTargetsNameTheEntry) {
  EXPECT_THAT(ChannelTarget(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target is empty")));
  EXPECT_THAT(ChannelTarget(" "),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("target is empty")));
  EXPECT_THAT(ChannelTarget("10.0.0.1:1,,10.0.0.2:2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "target \"10.0.0.1:1,,10.0.0.2:2\" has an empty entry 1"));
  EXPECT_THAT(ChannelTarget("10.0.0.1:1,tensord-b:2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target entry 1 \"tensord-b:2\" is not an IP address with a "
                                 "port")));
  for (const std::string entry : {"10.0.0.2", "10.0.0.2:0", "10.0.0.2:65536", "10.0.0.2:x", "::1:5",
                                  "[::1]", "[10.0.0.2]:5", "300.0.0.1:5"}) {
    EXPECT_THAT(ChannelTarget("10.0.0.1:1," + entry),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("target entry 1 \"" + entry + "\" is not an IP address")))
        << entry;
  }
  EXPECT_THAT(ChannelTarget("10.0.0.1:1,[::1]:2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("target entry 1 \"[::1]:2\" mixes IPv4 and IPv6")));
}

TEST(ServiceConfigTest, RoundRobinHealthCheckedAndRetriesUnavailable) {
  const nlohmann::json config = nlohmann::json::parse(ServiceConfigJson());
  EXPECT_EQ(config["loadBalancingConfig"], nlohmann::json::parse(R"([{"round_robin": {}}])"));
  EXPECT_EQ(config["healthCheckConfig"]["serviceName"], "tensorop.v1.TensorOp");
  const nlohmann::json& method = config["methodConfig"][0];
  EXPECT_EQ(method["name"], nlohmann::json::parse(R"([{"service": "tensorop.v1.TensorOp"}])"));
  EXPECT_EQ(method["retryPolicy"]["retryableStatusCodes"],
            nlohmann::json::parse(R"(["UNAVAILABLE"])"));
  EXPECT_EQ(method["retryPolicy"]["maxAttempts"], 4);
}

// A replica's channel: the same retries, one address, and no health checking
// (a draining replica still serves its handles).
TEST(ServiceConfigTest, ReplicaChannelsPickFirstWithoutHealthChecks) {
  const nlohmann::json shared = nlohmann::json::parse(ServiceConfigJson());
  const nlohmann::json replica = nlohmann::json::parse(ReplicaServiceConfigJson());
  EXPECT_EQ(replica["loadBalancingConfig"], nlohmann::json::parse(R"([{"pick_first": {}}])"));
  EXPECT_FALSE(replica.contains("healthCheckConfig"));
  EXPECT_EQ(replica["methodConfig"], shared["methodConfig"]);
}

TEST(TargetAuthorityTest, TheOneHostATargetNames) {
  EXPECT_EQ(TargetAuthority("tensord.example:50051"), "tensord.example:50051");
  EXPECT_EQ(TargetAuthority("dns:///tensord.default.svc:50051"), "tensord.default.svc:50051");
  EXPECT_EQ(TargetAuthority("dns://10.0.0.10:53/tensord:50051"), "tensord:50051");
  EXPECT_EQ(TargetAuthority("dns:tensord:50051"), "tensord:50051");
  for (const char* none : {"10.0.0.1:50051,10.0.0.2:50051", "ipv4:10.0.0.1:50051",
                           "ipv6:[::1]:50051", "unix:///run/tensord.sock", ""}) {
    EXPECT_EQ(TargetAuthority(none), "") << none;
  }
}

}  // namespace
}  // namespace tensorop::client
