// The HTTP side of the metrics: GET /metrics answers Metrics::Exposition() on a
// port of its own, served by a BoundedHttpServer (server/transport/bounded_http.h) on
// its own threads, apart from the gRPC server.
#ifndef TENSOROP_SERVER_TRANSPORT_METRICS_HTTP_H_
#define TENSOROP_SERVER_TRANSPORT_METRICS_HTTP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/telemetry/metrics.h"
#include "server/transport/bounded_http.h"

namespace tensorop::server {

class MetricsHttpServer {
 public:
  // Listens on `address` ("HOST:PORT", "[V6HOST]:PORT"; port 0 picks a free
  // one) and serves `metrics`, which must outlive the server. UNAVAILABLE when
  // the address cannot be bound (in use, or no such host), INVALID_ARGUMENT
  // when it is not HOST:PORT.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  const Metrics* metrics);
  // Stops listening, finishes the scrapes being answered and joins.
  ~MetricsHttpServer() = default;
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port bound.
  int port() const { return http_->port(); }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<BoundedHttpServer> http_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TRANSPORT_METRICS_HTTP_H_
