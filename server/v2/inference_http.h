// The Open Inference Protocol (KServe v2) over HTTP/REST on --http_address, as
// Triton serves it: health, server and model metadata, readiness,
// repository index, statistics, POST /v2/models/{name}/infer with JSON
// tensors and the binary tensor data extension, and the system shared memory
// extension (/v2/systemsharedmemory/..., the gRPC calls' logic and messages;
// /v2/cudasharedmemory/... answers 501). A BoundedHttpServer
// (server/transport/bounded_http.h) reads each request; an infer request is converted
// (server/v2/inference_http_json.h) into an inference::ModelInferRequest and
// runs exactly as gRPC ModelInfer does (server/v2/inference_models.h, then
// Engine::ExecuteOnWorker on a scheduler worker), its bytes reserved
// in the memory budget before its body is read. Errors are the gRPC API's
// messages as {"error": ...} with ToHttpStatus's status. The caller is who
// it is over gRPC: CallerIdentity (server/security/auth.h) of its bearer token
// and its verified client certificate, for its shared memory regions and its
// request log line.
#ifndef TENSOROP_SERVER_V2_INFERENCE_HTTP_H_
#define TENSOROP_SERVER_V2_INFERENCE_HTTP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/engine/engine.h"
#include "server/security/auth.h"
#include "server/transport/bounded_http.h"

namespace tensorop::server {

class Metrics;

struct InferenceHttpOptions {
  // The largest request body (--max_message_bytes, as gRPC's message limit).
  int64_t max_body_bytes = int64_t{64} << 20;
  // Bearer tokens (--auth_token_file): every route but /v2/health/* needs one.
  // Null: none. Not owned.
  const TokenStore* tokens = nullptr;
  AuthCounters* auth_counters = nullptr;
  // How long a connection may take to send its request, and the answer to be
  // written; an inference itself is bounded by `infer_deadline`.
  std::chrono::milliseconds request_deadline{30000};
  std::chrono::milliseconds write_deadline{30000};
  std::chrono::milliseconds infer_deadline{60000};
  size_t worker_threads = 4;
  // How long an answered connection stays open for its next request; 0: one
  // request per connection (BoundedHttpOptions::keep_alive_idle).
  std::chrono::milliseconds keep_alive_idle{0};
  // The TLS seam (server/transport/bounded_http.h); null: plaintext.
  std::function<std::unique_ptr<Connection>(int fd)> make_connection;
};

// The bearer token check of the gRPC API (server/security/auth.h) for an HTTP
// Authorization header (`header` null: none): OK with the token's name, or
// UNAUTHENTICATED with the gRPC API's message, counted in `counters`.
absl::StatusOr<std::string> CheckHttpBearer(const std::string* header, const TokenStore& tokens,
                                            AuthCounters& counters);

class InferenceHttpServer {
 public:
  // Serves on `address` (HOST:PORT; port 0: a free one). `engine` runs every
  // inference and `metrics` (may be null) gives statistics; both must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<InferenceHttpServer>> Start(const std::string& address,
                                                                    Engine* engine,
                                                                    const Metrics* metrics,
                                                                    InferenceHttpOptions options);
  // Stops serving; answers being written end at their next wait.
  ~InferenceHttpServer();
  InferenceHttpServer(const InferenceHttpServer&) = delete;
  InferenceHttpServer& operator=(const InferenceHttpServer&) = delete;

  int port() const { return http_->port(); }
  // GET /v2/health/ready and model readiness: true once the server serves,
  // false from the moment it starts draining.
  void SetReady(bool ready) { state_->ready.store(ready, std::memory_order_release); }

  struct State {
    Engine* engine = nullptr;
    const Metrics* metrics = nullptr;
    InferenceHttpOptions options;
    std::atomic<bool> ready{false};
    std::atomic<bool> stopping{false};
  };

 private:
  InferenceHttpServer() = default;

  std::shared_ptr<State> state_;
  std::unique_ptr<BoundedHttpServer> http_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_HTTP_H_
