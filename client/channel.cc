#include "client/channel.h"

#include <arpa/inet.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/service_config_json.h"

namespace tensorop::client {
namespace {

// Target schemes gRPC resolves (grpc/src/core/ext/filters/client_channel/resolver).
constexpr absl::string_view kSchemes[] = {"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:"};

enum class Family { kIpv4, kIpv6 };

// "1.2.3.4:80" or "[::1]:80" → its family; nothing for anything else.
std::optional<Family> IpLiteralFamily(absl::string_view entry) {
  const size_t colon = entry.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return std::nullopt;
  }
  absl::string_view host = entry.substr(0, colon);
  unsigned char address[16];
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    const std::string inner(host.substr(1, host.size() - 2));
    if (inet_pton(AF_INET6, inner.c_str(), address) == 1) return Family::kIpv6;
    return std::nullopt;
  }
  if (inet_pton(AF_INET, std::string(host).c_str(), address) == 1) return Family::kIpv4;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::string> ChannelTarget(absl::string_view target) {
  if (absl::StripAsciiWhitespace(target).empty()) {
    return absl::InvalidArgumentError("target is empty: expected HOST:PORT, a list of them, "
                                      "or a gRPC target such as dns:///NAME:PORT");
  }
  for (absl::string_view scheme : kSchemes) {
    if (absl::StartsWith(target, scheme)) return std::string(target);
  }
  if (!absl::StrContains(target, ',')) return std::string(target);

  std::vector<std::string> entries;
  std::optional<Family> family;
  for (absl::string_view raw : absl::StrSplit(target, ',')) {
    absl::string_view entry = absl::StripAsciiWhitespace(raw);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("target \"", target, "\" has an empty entry ", entries.size()));
    }
    std::optional<Family> entry_family = IpLiteralFamily(entry);
    if (!entry_family.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target entry ", entries.size(), " \"", entry,
          "\" is not an IP address with a port; a list names replicas by address "
          "(1.2.3.4:50051 or [::1]:50051), a name that resolves to every replica is one "
          "target (dns:///NAME:PORT)"));
    }
    if (family.has_value() && *family != *entry_family) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target entry ", entries.size(), " \"", entry,
          "\" mixes IPv4 and IPv6 in one list; gRPC balances over one family per target"));
    }
    family = entry_family;
    entries.emplace_back(entry);
  }
  return absl::StrCat(*family == Family::kIpv4 ? "ipv4:" : "ipv6:",
                      absl::StrJoin(entries, ","));
}

absl::string_view ServiceConfigJson() { return kServiceConfigJson; }

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& channel_target,
                                             int max_message_bytes,
                                             bool skip_unhealthy_replicas) {
  grpc::ChannelArguments args;
  if (!skip_unhealthy_replicas) args.SetInt(GRPC_ARG_INHIBIT_HEALTH_CHECKING, 1);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetServiceConfigJSON(std::string(ServiceConfigJson()));
  return grpc::CreateCustomChannel(channel_target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace tensorop::client
