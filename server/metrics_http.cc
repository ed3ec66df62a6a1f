#include "server/metrics_http.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

// Scrapes are rare and small; two threads let a slow scraper not hold up the
// next one.
constexpr size_t kHttpThreads = 2;

struct HostPort {
  std::string host;
  int port = 0;
};

absl::StatusOr<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort split;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &split.port) ||
      split.port < 0 || split.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", address, "\": expected HOST:PORT"));
  }
  split.host = address.substr(0, colon);
  // [::1] -> ::1, as getaddrinfo wants it.
  if (split.host.size() >= 2 && split.host.front() == '[' && split.host.back() == ']') {
    split.host = split.host.substr(1, split.host.size() - 2);
  }
  return split;
}

// httplib's default sets SO_REUSEPORT, with which a second server on a taken
// port would bind and silently share the scrapes. SO_REUSEADDR alone still
// allows a quick restart while refusing a port another process listens on.
void ExclusiveSocketOptions(socket_t socket) {
  int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, const Metrics* metrics) {
  absl::StatusOr<HostPort> host_port = SplitHostPort(address);
  if (!host_port.ok()) return host_port.status();

  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->http_;
  http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  http.set_socket_options(ExclusiveSocketOptions);
  http.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics->Exposition(), std::string(kExpositionContentType));
  });

  if (host_port->port == 0) {
    server->port_ = http.bind_to_any_port(host_port->host);
  } else if (http.bind_to_port(host_port->host, host_port->port)) {
    server->port_ = host_port->port;
  } else {
    server->port_ = -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", address));
  }
  auto returned = std::make_shared<std::atomic<bool>>(false);
  server->listener_ = std::thread([&http, returned] {
    http.listen_after_bind();
    returned->store(true);
  });
  // stop() does nothing until the listener runs; waiting for it here makes the
  // destructor's stop() always take effect. The listener marks itself running
  // first thing, so this takes a moment.
  while (!http.is_running() && !returned->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (!listener_.joinable()) return;  // Start() failed before listening
  http_->stop();
  listener_.join();
}

}  // namespace tensorop::server
