#include "server/transport/metrics_http.h"

#include <chrono>
#include <memory>
#include <string>

#include <httplib.h>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

// Bounds that keep /metrics from starving scrapes or the process's file
// descriptors (which gRPC needs to accept connections): at most 64 waiting
// connections, a request complete within 2 s and 8 KiB, two workers with 16
// requests queued, answers written within 5 s (server/transport/bounded_http.h).
BoundedHttpOptions MetricsOptions() {
  BoundedHttpOptions options;
  options.max_waiting = 64;
  options.request_deadline = std::chrono::milliseconds(2000);
  options.max_header_bytes = 8192;
  options.worker_threads = 2;
  options.queued_requests = 16;
  options.write_deadline = std::chrono::milliseconds(5000);
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, const Metrics* metrics) {
  absl::StatusOr<std::unique_ptr<BoundedHttpServer>> http = BoundedHttpServer::Start(
      address, "--metrics_address", MetricsOptions(), [metrics](httplib::Server& routes) {
        routes.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& response) {
          response.set_content(metrics->Exposition(), std::string(kExpositionContentType));
        });
      });
  if (!http.ok()) return http.status();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = *std::move(http);
  return server;
}

}  // namespace tensorop::server
