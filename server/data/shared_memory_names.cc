// Who may register shared memory, and what a region's name and an object's
// key may be: the checks every surface (native, v2 gRPC and HTTP) applies
// before the registry opens anything. Apart from shared_memory.cc, which maps
// and keeps the regions.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/data/shared_memory.h"
#include "server/security/auth.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

bool IsNameByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

bool IsLoopbackAddress(absl::string_view ip) {
  absl::ConsumePrefix(&ip, "::ffff:");  // IPv4-mapped
  return absl::StartsWith(ip, "127.") || ip == "::1";
}

bool IsLocalGrpcPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  if (absl::ConsumePrefix(&peer, "ipv4:")) return absl::StartsWith(peer, "127.");
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    // "[::1]:5" or, percent-encoded, "%5B::1%5D:5"
    if (!absl::ConsumePrefix(&peer, "[")) absl::ConsumePrefix(&peer, "%5B");
    const size_t close = std::min(peer.find(']'), peer.find("%5D"));
    return close != absl::string_view::npos && IsLoopbackAddress(peer.substr(0, close));
  }
  return false;
}

SharedMemoryCaller SharedMemoryCallerOf(const grpc::ServerContextBase& context) {
  return SharedMemoryCaller{.owner = PeerIdentity(context),
                            .local = IsLocalGrpcPeer(context.peer())};
}

absl::Status CheckRegionName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > kMaxRegionNameBytes ||
      !std::all_of(name.begin(), name.end(), IsNameByte)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", Quoted(name), " is not a region name (1..", kMaxRegionNameBytes,
                     " bytes of A-Z a-z 0-9 _ . -)"));
  }
  return absl::OkStatus();
}

absl::Status CheckSharedMemoryKey(absl::string_view key, absl::string_view field) {
  const absl::string_view bare = absl::StripPrefix(key, "/");
  if (bare.empty() || bare.size() > kMaxKeyBytes || bare == "." || bare == ".." ||
      !std::all_of(bare.begin(), bare.end(), IsNameByte)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", Quoted(key), " is not a shared memory key (an optional leading '/', then 1..",
        kMaxKeyBytes, " bytes of A-Z a-z 0-9 _ . -, not \".\" or \"..\")"));
  }
  return absl::OkStatus();
}

}  // namespace tensorop::server
