#include "client/channel.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "absl/strings/strip.h"
#include "client/service_config_json.h"
#include "nlohmann/json.hpp"

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
    return absl::InvalidArgumentError(
        "target is empty: expected HOST:PORT, a list of them, "
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
  return absl::StrCat(*family == Family::kIpv4 ? "ipv4:" : "ipv6:", absl::StrJoin(entries, ","));
}

absl::string_view ServiceConfigJson() { return kServiceConfigJson; }

absl::string_view ReplicaServiceConfigJson() {
  static const std::string* const config = [] {
    nlohmann::json json = nlohmann::json::parse(kServiceConfigJson);
    json["loadBalancingConfig"] = nlohmann::json::parse(R"([{"pick_first": {}}])");
    json.erase("healthCheckConfig");
    return new std::string(json.dump());
  }();
  return *config;
}

std::string TargetAuthority(absl::string_view target) {
  if (absl::ConsumePrefix(&target, "dns:")) {
    // dns:[//server/]name:port
    if (absl::ConsumePrefix(&target, "//")) {
      const size_t slash = target.find('/');
      if (slash == absl::string_view::npos) return "";
      target.remove_prefix(slash + 1);
    }
    return std::string(target);
  }
  for (absl::string_view scheme : kSchemes) {
    if (absl::StartsWith(target, scheme)) return "";
  }
  if (absl::StrContains(target, ',') || absl::StripAsciiWhitespace(target).empty()) return "";
  return std::string(target);
}

namespace {

// What every client channel is made with: the message limits both ways and
// `service_config`.
grpc::ChannelArguments ChannelArguments(int max_message_bytes, absl::string_view service_config) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetServiceConfigJSON(std::string(service_config));
  return args;
}

}  // namespace

std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& channel_target, int max_message_bytes, bool skip_unhealthy_replicas,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args = ChannelArguments(max_message_bytes, ServiceConfigJson());
  if (!skip_unhealthy_replicas) args.SetInt(GRPC_ARG_INHIBIT_HEALTH_CHECKING, 1);
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(channel_target, credentials, args);
}

std::shared_ptr<grpc::Channel> CreateReplicaChannel(
    const std::string& replica, int max_message_bytes,
    std::shared_ptr<grpc::ChannelCredentials> credentials, const std::string& authority) {
  grpc::ChannelArguments args = ChannelArguments(max_message_bytes, ReplicaServiceConfigJson());
  args.SetInt(GRPC_ARG_INHIBIT_HEALTH_CHECKING, 1);
  if (!authority.empty()) args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(replica, credentials, args);
}

namespace {

absl::StatusOr<std::string> ReadOptionFile(absl::string_view option, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", option, "=", path, ": cannot read the file: ", std::strerror(errno)));
  }
  std::string text;
  char buffer[8192];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, got);
  std::fclose(file);
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", option, "=", path, ": the file is empty"));
  }
  return text;
}

std::string Environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

ChannelSecurity WithSecurityEnvironment(ChannelSecurity security) {
  const std::string tls = absl::AsciiStrToLower(Environment("TENSOROP_TLS"));
  if (tls == "1" || tls == "true" || tls == "yes") security.tls = true;
  auto fill = [](std::string& field, const char* name) {
    if (field.empty()) field = Environment(name);
  };
  fill(security.ca_file, "TENSOROP_CA_FILE");
  fill(security.cert_file, "TENSOROP_CERT_FILE");
  fill(security.key_file, "TENSOROP_KEY_FILE");
  fill(security.token_file, "TENSOROP_TOKEN_FILE");
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ChannelSecurity& security) {
  if (!security.enabled()) return grpc::InsecureChannelCredentials();
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--cert_file and --key_file go together: a client certificate needs its key");
  }
  grpc::SslCredentialsOptions options;
  if (!security.ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadOptionFile("ca_file", security.ca_file);
    if (!roots.ok()) return roots.status();
    options.pem_root_certs = *std::move(roots);
  }
  if (!security.cert_file.empty()) {
    absl::StatusOr<std::string> chain = ReadOptionFile("cert_file", security.cert_file);
    if (!chain.ok()) return chain.status();
    absl::StatusOr<std::string> key = ReadOptionFile("key_file", security.key_file);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(chain);
    options.pem_private_key = *std::move(key);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (!security.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadOptionFile("token_file", security.token_file);
    if (!token.ok()) return token.status();
    // gRPC sends call credentials only over a secure channel: the token never
    // travels in plaintext.
    credentials = grpc::CompositeChannelCredentials(
        credentials, grpc::AccessTokenCredentials(std::string(absl::StripAsciiWhitespace(*token))));
  }
  return credentials;
}

absl::Status ExplainSecurityError(const absl::Status& status) {
  const absl::string_view message = status.message();
  auto with = [&](absl::string_view explanation) {
    return absl::Status(status.code(), absl::StrCat(explanation, ": ", message));
  };
  // UNAUTHENTICATED already names itself, and tensord's message says whether
  // the token was missing or refused; TLS failures arrive as UNAVAILABLE with
  // OpenSSL's words somewhere in gRPC's message.
  if (status.code() != absl::StatusCode::kUnavailable) return status;
  if (absl::StrContains(message, "Peer name") &&
      absl::StrContains(message, "not in peer certificate")) {
    return with(
        "TLS hostname mismatch: the server's certificate does not name the host in "
        "--target");
  }
  if (absl::StrContains(message, "CERTIFICATE_VERIFY_FAILED") ||
      absl::StrContains(message, "certificate verify failed")) {
    return with(
        "TLS: the server's certificate is not trusted (not signed by --ca_file / "
        "TENSOROP_CA_FILE, or by the system's roots without one)");
  }
  if (absl::StrContains(message, "WRONG_VERSION_NUMBER") ||
      absl::StrContains(message, "wrong version number")) {
    return with("TLS: the server does not speak TLS on this port (drop --tls)");
  }
  if (absl::StrContains(message, "ALERT_CERTIFICATE_REQUIRED") ||
      absl::StrContains(message, "ALERT_HANDSHAKE_FAILURE") ||
      absl::StrContains(message, "ALERT_BAD_CERTIFICATE") ||
      absl::StrContains(message, "ALERT_UNKNOWN_CA") ||
      absl::StrContains(message, "ALERT_CERTIFICATE_EXPIRED")) {
    return with(
        "TLS: the server refused our client certificate, or its absence (mutual TLS: "
        "--cert_file and --key_file, signed by the server's client CA, not expired)");
  }
  return status;
}

absl::Status ExplainClosedConnection(const absl::Status& status, bool tls) {
  if (status.code() != absl::StatusCode::kUnavailable ||
      !absl::StrContains(status.message(), "Socket closed")) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrCat(tls ? "TLS: the server closed the connection during or right after the "
                         "handshake; with mutual TLS it does so for a missing client "
                         "certificate, one from another CA or an expired one (--cert_file, "
                         "--key_file): "
                       : "the server closed the connection at once; if it serves TLS, connect "
                         "with --tls (and --ca_file): ",
                   status.message()));
}

}  // namespace tensorop::client
