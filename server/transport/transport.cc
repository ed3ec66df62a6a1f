#include "server/transport/transport.h"

#include <dirent.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <grpc/grpc.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/transport/http_head.h"

namespace tensorop::server {
namespace {

constexpr int kKeepaliveTimeMs = 60'000;
constexpr int kKeepaliveTimeoutMs = 20'000;
constexpr int kMinClientPingIntervalMs = 10'000;
constexpr int kMaxPingStrikes = 2;

// The number in `path` ("max" or unreadable: none).
std::optional<int64_t> ReadLimit(const char* path) {
  std::ifstream file(path);
  std::string text;
  if (!(file >> text)) return std::nullopt;
  int64_t value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value <= 0) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

void ApplyTransportLimits(const TransportOptions& options, grpc::ResourceQuota& quota,
                          grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  if (options.max_connection_idle_seconds > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               options.max_connection_idle_seconds * 1000);
  }
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             kMinClientPingIntervalMs);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  quota.Resize(static_cast<size_t>(options.quota_memory_bytes));
  quota.SetMaxThreads(options.quota_max_threads);
  builder.SetResourceQuota(quota);
}

absl::StatusOr<uint64_t> RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE, ", limit.rlim_max, "): ", std::strerror(errno)));
    }
    limit = raised;
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

int64_t UnsentSocketBytes() {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return 0;
  int64_t unsent = 0;
  while (const dirent* entry = readdir(fds)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(fds)) continue;
    // Only stream sockets: SIOCOUTQ shares its number with TIOCOUTQ, and other
    // descriptors (a GPU driver's device files) must not get foreign ioctls.
    struct stat info;
    int type = 0;
    socklen_t type_size = sizeof(type);
    if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode) ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_size) != 0 || type != SOCK_STREAM) {
      continue;
    }
    int queued = 0;
    // Listening sockets answer EINVAL: nothing queued.
    if (ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0) unsent += queued;
  }
  closedir(fds);
  return unsent;
}

int64_t ProcessMemoryBytes() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page_size = sysconf(_SC_PAGE_SIZE);
  int64_t memory = pages > 0 && page_size > 0 ? pages * page_size : int64_t{1} << 30;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (std::optional<int64_t> limit = ReadLimit(path)) {
      memory = std::min(memory, *limit);
      break;
    }
  }
  return memory;
}

namespace {

// The OS's reason a server socket cannot bind `address` now; nothing when it can.
std::optional<std::string> ListenFailure(const std::string& address) {
  absl::StatusOr<HttpHostPort> split = SplitHttpHostPort(address, "address");
  if (!split.ok()) return std::string(split.status().message());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(split->port);
  if (const int error = getaddrinfo(split->host.empty() ? nullptr : split->host.c_str(),
                                    port.c_str(), &hints, &found);
      error != 0) {
    return gai_strerror(error);
  }
  std::optional<std::string> reason;
  for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
    const int fd = socket(at->ai_family, at->ai_socktype | SOCK_CLOEXEC, at->ai_protocol);
    if (fd < 0) {
      reason = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    const bool bound = bind(fd, at->ai_addr, at->ai_addrlen) == 0;
    if (!bound) reason = std::strerror(errno);
    close(fd);
    if (!bound) break;
  }
  freeaddrinfo(found);
  return reason;
}

}  // namespace

std::string CannotListen(absl::string_view flag, const std::vector<std::string>& addresses) {
  for (const std::string& address : addresses) {
    if (absl::StartsWith(address, "unix")) continue;  // unix: and unix-abstract:
    if (std::optional<std::string> reason = ListenFailure(address); reason.has_value()) {
      return absl::StrCat(flag, "=", address, ": cannot listen there: ", *reason);
    }
  }
  return absl::StrCat(flag, "=", addresses.front(), ": cannot listen there");
}

}  // namespace tensorop::server
