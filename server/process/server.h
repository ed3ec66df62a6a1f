// tensord's server: everything a ServerConfig asks for, wired together (the
// OpenCL device pool, the scheduler, the memory budget, the services, the gRPC
// listeners, /metrics, the health listener, calibration and the health/trim
// ticker), and its orderly shutdown. Signals stay with main().
//
//   Create (opens devices, starts calibration, reads security files, binds
//   /metrics) -> Start (gRPC listens; "tensord listening on ..." lines) ->
//   Shutdown (drain, health NOT_SERVING, calls on handles only while any are
//   held, quiet, gRPC Shutdown with grace) ->
//   Wait (the rest stops; the request log is flushed).
#ifndef TENSOROP_SERVER_PROCESS_SERVER_H_
#define TENSOROP_SERVER_PROCESS_SERVER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/engine/engine.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/native/echo_service.h"
#include "server/native/service.h"
#include "server/placement/device_pool.h"
#include "server/placement/scheduler.h"
#include "server/process/config.h"
#include "server/security/health_listener.h"
#include "server/security/health_statuses.h"
#include "server/security/security.h"
#include "server/telemetry/metrics.h"
#include "server/transport/metrics_http.h"
#include "server/v2/inference_http.h"
#include "server/v2/inference_service.h"

namespace tensorop::server {

class Server {
 public:
  // Opens what `config` names. RESOURCE_EXHAUSTED when the OpenCL staging does
  // not fit --max_memory_bytes (a usage error: main exits 2); other errors
  // (a bad certificate or token file, a taken metrics port) exit 1.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerConfig& config);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // Starts gRPC on every address and the health listener, reports the
  // services SERVING, and prints the "tensord listening on ..." lines (then
  // metrics and health) on stdout. An address that cannot be bound is an
  // error; call at most once.
  absl::Status Start();

  // The shutdown sequence (server.cc): health NOT_SERVING for --drain_seconds
  // while still serving; then, while the replica holds handles, only calls on
  // them until --shutdown_grace_seconds ends (HandleStore::StartDraining);
  // then quiet, then gRPC Shutdown within what is left of the grace period.
  // Returns once gRPC has shut down; the process exits 1 should work not stop
  // within the grace period and 5 s more.
  void Shutdown();

  // Waits for gRPC to end (after Shutdown), then stops the health listener,
  // the ticker and calibration, and waits for the scheduler's tasks.
  void Wait();

  // After Wait: the "stopped" event, with how long the stop took and what it
  // cut short (handles dropped, calls cancelled when the grace period ran out).
  void LogStopped() const;
  // For a stop cut short at once (a second signal): the calls still open and
  // the handles about to be dropped. Thread-safe.
  std::string CutShort() const;

  // After Start: the port each address listens on, in --address order.
  const std::vector<int>& ports() const { return ports_; }
  // What every front end runs its requests through: its open calls and the
  // memory budget, read by in-process tests (tests/server/process/in_process_server.h).
  const Engine& engine() const { return *engine_; }

 private:
  explicit Server(const ServerConfig& config);

  // The one place services are added to the builder.
  void RegisterServices(grpc::ServerBuilder& builder);
  // Every second: tensorop.opencl's health, the buffer pool's idle buffers
  // freed, and malloc_trim after a busy spell.
  void RunTicker();

  // Declared in the order they are built: each is destroyed before what it uses.
  ServerConfig config_;  // with the pointers below filled in
  std::unique_ptr<DevicePool> devices_;
  std::unique_ptr<Scheduler> scheduler_;
  Metrics metrics_;
  std::unique_ptr<MemoryBudget> memory_budget_;
  MemoryBudget::Reservation staging_reservation_;
  // Large freed buffers kept for reuse, reserved in the budget.
  std::unique_ptr<BufferPool> buffer_pool_;
  // Regions map client memory: counted in the budget, so declared after it
  // and before the service, which must not outlive it.
  std::unique_ptr<SharedMemoryRegistry> shared_memory_;
  // Handles' resident bytes, counted in the budget likewise.
  std::unique_ptr<HandleStore> handles_;
  // What runs every front end's requests (server/engine/engine.h).
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TensorOpService> service_;
  // The Open Inference Protocol (KServe v2) on the same port(s), run by engine_.
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<EchoService> echo_;
  // AUTO's cost model, measured in the background. Declared after what it
  // uses: destroying the Server stops and joins it first.
  std::jthread calibration_;
  std::unique_ptr<Security> security_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  // The v2 HTTP/REST API (--http_address), run by engine_.
  std::unique_ptr<InferenceHttpServer> inference_http_;
  std::unique_ptr<grpc::ResourceQuota> quota_;
  std::vector<int> ports_;
  // grpc.health.v1's statuses, served on the main server and the health
  // listener; the services outlive the servers.
  std::unique_ptr<HealthStatuses> health_ = std::make_unique<HealthStatuses>();
  std::unique_ptr<grpc::Service> health_service_;
  std::unique_ptr<grpc::Server> server_;
  HealthListener health_listener_;
  std::mutex ticker_mutex_;
  std::condition_variable ticker_wake_;
  bool stopping_ = false;  // guarded by ticker_mutex_
  std::thread ticker_;
  // How the stop went, for LogStopped; written by Shutdown.
  struct StopRecord {
    absl::Time signalled;
    std::string handles_wait;  // what ended the wait for handle calls; empty: none held
    int64_t calls_open_at_shutdown = 0;
    bool grace_ran_out = false;
  } stop_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PROCESS_SERVER_H_
