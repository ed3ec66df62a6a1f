#include "server/process/server.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/checked_math.h"
#include "core/version.h"
#include "kernels/opencl/device.h"
#include "server/engine/chain.h"
#include "server/pipeline/pipeline.h"
#include "server/placement/calibration.h"
#include "server/placement/placement_series.h"
#include "server/telemetry/process_series.h"
#include "server/telemetry/request_log.h"
#include "server/transport/tls_stream.h"
#include "server/transport/transport.h"

namespace tensorop::server {
namespace {

// How long after the shutdown grace period the process exits even if some work
// did not stop (Kubernetes: inside terminationGracePeriodSeconds' margin).
constexpr std::chrono::seconds kForcedExitAfter{5};
constexpr absl::string_view kServiceName = "tensorop.v1.TensorOp";
constexpr absl::string_view kOpenClHealthName = "tensorop.opencl";
constexpr absl::string_view kCpuHealthName = "tensorop.cpu";

// Before GOAWAY: waits until no Run call is open and the kernel has handed
// every byte written to the clients, or until `until`. gRPC closes a
// connection as soon as its last call ends after GOAWAY, and Linux resets a
// connection closed with unread input (the client's flow-control updates),
// dropping what it still held for the client: the tail of a large answer.
// Calls keep being served meanwhile; the bound (half the grace period) leaves
// the rest of it to calls that clients which ignore health keep sending.
void WaitForQuiet(const Engine& engine, std::chrono::system_clock::time_point until) {
  while (std::chrono::system_clock::now() < until &&
         (engine.open_calls() > 0 || UnsentSocketBytes() > 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// How long a draining replica waits for the next call on one of its
// handles: handles nobody reads (forgotten ones, a client gone) do not hold
// the stop for the whole grace period, and a client reading them in turn
// keeps it going.
constexpr absl::Duration kHandlesQuietFor = absl::Seconds(3);

// A draining replica's grace period: it serves calls on its handles (and
// only those: HandleStore::Admit) until `until`, until no handle is left
// (released or expired), or until no call used one for kHandlesQuietFor;
// then it goes on to shut down as one without handles. Says which ended it.
std::string ServeHandlesUntil(const HandleStore& handles,
                              std::chrono::system_clock::time_point until) {
  const absl::Time started = absl::Now();
  for (;;) {
    if (handles.handles() == 0) return "every handle was released or expired";
    if (absl::Now() - std::max(started, handles.last_use()) >= kHandlesQuietFor) {
      return absl::StrCat("no call used a handle for ", absl::FormatDuration(kHandlesQuietFor));
    }
    if (std::chrono::system_clock::now() >= until) return "the grace period ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// "HOST:PORT" with the port the server actually bound.
std::string ListeningAddress(const std::string& address, int port) {
  if (IsUnixAddress(address)) return address;
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

// gRPC's refusal of a message over its limit names no flag ("Received message
// larger than max"), so its receive limit is a backstop at twice
// --max_message_bytes: a message between the two reaches tensord's methods,
// which refuse it naming the flag (CheckReceivedBytes) before anything else.
// Not unlimited: gRPC's own typed services (health, reflection) and the
// bench's echo parse what gRPC lets through, outside the budget.
void SetMessageLimits(int max_message_bytes, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(std::numeric_limits<int>::max(), 2 * int64_t{max_message_bytes})));
  builder.SetMaxSendMessageSize(max_message_bytes);
}

}  // namespace

Server::Server(const ServerConfig& config) : config_(config) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerConfig& config) {
  std::unique_ptr<Server> server(new Server(config));
  ServerConfig& effective = server->config_;
  LogEvent("starting", absl::StrCat("tensord ", Version()));

  // Every connection (gRPC and /metrics) takes a descriptor, and gRPC stops
  // accepting for good once accept4 fails with EMFILE: take all we may.
  if (absl::StatusOr<uint64_t> files = RaiseOpenFileLimit(); files.ok()) {
    LogEvent("open_files", absl::StrCat("RLIMIT_NOFILE ", *files));
  } else {
    LogEvent("open_files", files.status().message());
  }

  // The device pool: every OpenCL device the ICD loader offers, or those the
  // filter names. Each is listed on stderr with its index.
  std::vector<std::unique_ptr<opencl_backend::Device>> opened;
  std::vector<opencl_backend::Device*> to_calibrate;  // owned by the pool below
  if (config.opencl) {
    std::vector<std::string> skipped;
    for (auto& device : opencl_backend::OpenAllDevices(&skipped, config.device)) {
      if (device->name().find(config.opencl_filter) == std::string::npos) continue;
      to_calibrate.push_back(device.get());
      opened.push_back(std::move(device));
    }
    for (const std::string& reason : skipped) LogEvent("device_skipped", reason);
  }
  server->devices_ = std::make_unique<DevicePool>(std::move(opened), config.devices);
  DevicePool& devices = *server->devices_;
  for (size_t i = 0; i < devices.size(); ++i) {
    LogEvent("device", absl::StrCat(i, " ", devices.Label(static_cast<int>(i))));
  }
  effective.scheduler.devices = &devices;
  server->scheduler_ = std::make_unique<Scheduler>(effective.scheduler);
  Scheduler& scheduler = *server->scheduler_;
  Metrics& metrics = server->metrics_;
  AddProcessSeries(metrics);
  AddServerSeries(metrics, scheduler, devices);
  effective.service.metrics = &metrics;
  server->memory_budget_ = std::make_unique<MemoryBudget>(config.max_memory_bytes);
  MemoryBudget& memory_budget = *server->memory_budget_;
  AddMemoryBudgetSeries(metrics, memory_budget);
  effective.service.memory_budget = &memory_budget;
  // Each device's staging may grow to --opencl_staging_bytes: charged here,
  // once, for that bound and the process's life, so no request waits on the
  // budget for staging and the figure is fixed from startup.
  if (devices.size() > 0 && config.device.staging_bytes > 0) {
    const int64_t staging = static_cast<int64_t>(devices.size()) * config.device.staging_bytes;
    absl::StatusOr<MemoryBudget::Reservation> reserved =
        memory_budget.TryReserve(staging, "OpenCL staging (--opencl_staging_bytes)");
    if (!reserved.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--opencl_staging_bytes=", config.device.staging_bytes, " for ", devices.size(),
          " OpenCL device(s) does not fit --max_memory_bytes=", config.max_memory_bytes));
    }
    server->staging_reservation_ = *std::move(reserved);
    LogEvent("opencl_staging",
             absl::StrCat(staging, " bytes reserved (--opencl_staging_bytes=",
                          config.device.staging_bytes, " for ", devices.size(), " device(s))"));
  }
  server->buffer_pool_ = std::make_unique<BufferPool>(config.buffer_pool_bytes, &memory_budget);
  BufferPool& buffer_pool = *server->buffer_pool_;
  memory_budget.SetReclaimer(
      [&buffer_pool](int64_t missing) { return buffer_pool.Release(missing); });
  AddBufferPoolSeries(metrics, buffer_pool);
  effective.service.buffer_pool = &buffer_pool;
  LogEvent("memory_budget", absl::StrCat(config.max_memory_bytes, " bytes (--max_memory_bytes",
                                         config.max_memory_source.empty()
                                             ? ")"
                                             : absl::StrCat(": ", config.max_memory_source, ")")));
  server->shared_memory_ = std::make_unique<SharedMemoryRegistry>(
      SharedMemoryOptions{.idle_timeout = absl::Seconds(config.shared_memory_idle_seconds),
                          .budget = &memory_budget,
                          .allow_remote = config.shared_memory_remote});
  AddSharedMemorySeries(metrics, *server->shared_memory_);
  effective.service.shared_memory = server->shared_memory_.get();
  HandleStoreOptions handles = config.handles;
  handles.budget = &memory_budget;
  handles.devices = devices.size() > 0 ? &devices : nullptr;
  server->handles_ = std::make_unique<HandleStore>(std::move(handles));
  // A device that fails takes its handles with it.
  devices.SetFailureListener(
      [store = server->handles_.get()](int index) { store->LoseDevice(index); });
  AddHandleSeries(metrics, *server->handles_);
  metrics.AddSampled("tensorop_chain_steps_fused_total",
                     "RunChain window steps not run: their outputs were views on another "
                     "step's input, copied once where bytes were needed.",
                     "counter", {}, [] { return FusedChainSteps(); });
  metrics.AddSampled("tensorop_chain_results_lent_total",
                     "RunChain steps answered without a copy: from a resident tensor's bytes "
                     "through views, or from an earlier step's output.",
                     "counter", {}, [] { return LentChainSteps(); });
  effective.service.handles = server->handles_.get();
  server->engine_ = std::make_unique<Engine>(effective.service, &scheduler);
  server->service_ = std::make_unique<TensorOpService>(server->engine_.get());
  metrics.AddSampled("tensorop_forwarded_answers_total",
                     "Run calls answered with the bytes their requests carried (every output a "
                     "contiguous run of an input): no kernel, no copy, no worker.",
                     "counter", {},
                     [engine = server->engine_.get()] { return engine->forwarded_answers(); });
  metrics.AddSampled("tensorop_requests_run_here_total",
                     absl::StrCat("Run, RunBidi and ModelInfer requests run on the thread that "
                                  "read them, "
                                  "with no hop to a worker: copies of at most ",
                                  kTinyRequestBytes >> 10, " KiB on the CPU."),
                     "counter", {},
                     [engine = server->engine_.get()] { return engine->requests_run_here(); });
  server->inference_ = std::make_unique<InferenceService>(server->engine_.get(), &metrics);
  server->echo_ = std::make_unique<EchoService>(config.service.max_message_bytes);
  AddCalibrationSeries(metrics, scheduler, devices);
  // AUTO's cost model, measured in the background while the server starts
  // and serves (AUTO runs on the CPU until it is set).
  if (config.calibrate && !config.echo) {
    server->calibration_ = std::jthread(
        [&scheduler, &devices, to_calibrate, threshold = config.scheduler.auto_opencl_min_bytes,
         workers = config.scheduler.worker_threads](std::stop_token stop) {
          CalibrationOptions options;
          options.worker_threads = workers;
          CalibrationReport report = Calibrate(to_calibrate, options, stop);
          std::vector<std::string> labels;
          for (size_t i = 0; i < devices.size(); ++i) {
            labels.push_back(devices.Label(static_cast<int>(i)));
          }
          std::string line = DescribeCalibration(report, labels);
          if (threshold.has_value()) {
            absl::StrAppend(&line, "; AUTO follows --auto_opencl_min_bytes=", *threshold,
                            " instead");
          }
          scheduler.SetCostModel(std::move(report.model));
          LogEvent("calibration", line);
        });
  }

  // Certificates, keys and tokens are read now: a bad file stops startup,
  // naming the file and the problem.
  absl::StatusOr<std::unique_ptr<Security>> security = Security::Create(config.security, &metrics);
  if (!security.ok()) return security.status();
  server->security_ = *std::move(security);

  // Before the gRPC port, so a taken metrics port stops startup before anyone
  // is told the server listens.
  if (!config.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(config.metrics_address, &metrics);
    if (!started.ok()) return started.status();
    server->metrics_http_ = *std::move(started);
  }
  // Likewise the v2 HTTP port (not in echo mode, which serves no models).
  if (!config.http_address.empty() && !config.echo) {
    InferenceHttpOptions http;
    http.max_body_bytes = config.max_message_bytes;
    http.keep_alive_idle = std::chrono::seconds(config.http_keep_alive_seconds);
    http.tokens = server->security_->tokens();
    http.auth_counters = server->security_->auth_counters();
    // With --tls_cert_file: HTTPS with gRPC's certificate, key and client CA,
    // following their reloads.
    if (TlsCredentials* tls = server->security_->tls_credentials(); tls != nullptr) {
      absl::StatusOr<std::shared_ptr<TlsContextHolder>> holder = FollowTlsCredentials(*tls);
      if (!holder.ok()) return holder.status();
      http.make_connection = TlsConnections(*std::move(holder));
    }
    absl::StatusOr<std::unique_ptr<InferenceHttpServer>> started = InferenceHttpServer::Start(
        config.http_address, server->engine_.get(), &metrics, std::move(http));
    if (!started.ok()) return started.status();
    server->inference_http_ = *std::move(started);
  }
  return server;
}

void Server::RegisterServices(grpc::ServerBuilder& builder) {
  if (config_.echo) {
    builder.RegisterService(echo_.get());
  } else {
    builder.RegisterService(service_.get());
    builder.RegisterService(inference_.get());
  }
}

absl::Status Server::Start() {
  const ServerConfig& config = config_;
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ports_.assign(config.addresses.size(), 0);
  std::shared_ptr<grpc::ServerCredentials> credentials;
  security_->Configure(builder, &credentials);
  for (size_t i = 0; i < config.addresses.size(); ++i) {
    builder.AddListeningPort(config.addresses[i], credentials, &ports_[i]);
  }
  // A taken port is an error, never a port shared with another process
  // (gRPC's default SO_REUSEPORT would split the calls between the two).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  SetMessageLimits(config.max_message_bytes, builder);
  if (config.max_connection_age_seconds > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               config.max_connection_age_seconds * 1000);
  }
  TransportOptions transport;
  transport.max_concurrent_streams = config.max_concurrent_streams;
  transport.max_connection_idle_seconds = config.max_connection_idle_seconds;
  // gRPC's own buffers give way (it shrinks them, then cancels calls) past
  // what the calls may hold and two whole messages in flight beside it.
  // gRPC 1.51 reads a message past its limit whole before refusing it, so
  // this quota is what bounds an oversized one (RELIABILITY.md); the
  // bytes a handler took are in both the budget and the quota until freed.
  transport.quota_memory_bytes =
      std::min(ProcessMemoryBytes(),
               CheckedAdd(config.max_memory_bytes, 2 * int64_t{config.max_message_bytes})
                   .value_or(std::numeric_limits<int64_t>::max()));
  quota_ = std::make_unique<grpc::ResourceQuota>("tensord");
  ApplyTransportLimits(transport, *quota_, builder);
  RegisterServices(builder);
  health_service_ = health_->NewService();
  builder.RegisterService(health_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || std::count(ports_.begin(), ports_.end(), 0) > 0) {
    return absl::UnavailableError(CannotListen("--address", config.addresses));
  }
  // Handles name the first address as their replica unless --advertise_address
  // did; a wildcard one is no address to route to, so they name none (clients
  // then send handle calls over their own target).
  if (!IsWildcardAddress(config.addresses[0])) {
    handles_->SetReplica(ListeningAddress(config.addresses[0], ports_[0]));
  }
  // --health_address: a second server answering from the same statuses.
  if (!config.health_address.empty()) {
    absl::StatusOr<HealthListener> started = StartHealthListener(config.health_address, *health_);
    if (!started.ok()) {
      return absl::UnavailableError(CannotListen("--health_address", {config.health_address}));
    }
    health_listener_ = *std::move(started);
  }
  security_->StartReloading();
  health_->SetServingStatus("", true);
  health_->SetServingStatus(std::string(kServiceName), true);
  inference_->SetReady(true);
  if (inference_http_ != nullptr) inference_http_->SetReady(true);
  health_->SetServingStatus(std::string(kCpuHealthName), true);
  ticker_ = std::thread([this] { RunTicker(); });

  // One line per address, TCP first: scripts and tests read the first line's port.
  for (size_t i = 0; i < config.addresses.size(); ++i) {
    std::cout << "tensord listening on " << ListeningAddress(config.addresses[i], ports_[i])
              << std::endl;
  }
  if (metrics_http_ != nullptr) {
    std::cout << "tensord metrics on "
              << ListeningAddress(config.metrics_address, metrics_http_->port()) << std::endl;
  }
  if (inference_http_ != nullptr) {
    std::cout << "tensord http on "
              << ListeningAddress(config.http_address, inference_http_->port()) << std::endl;
  }
  if (health_listener_.server != nullptr) {
    std::cout << "tensord health on "
              << ListeningAddress(config.health_address, health_listener_.port) << std::endl;
  }
  return absl::OkStatus();
}

// tensorop.opencl follows the pool: NOT_SERVING while no device works. A
// failed device recovers by time alone, so look once a second.
void Server::RunTicker() {
  std::unique_lock<std::mutex> lock(ticker_mutex_);
  IdleTrim idle_trim(memory_budget_->reserved_total());
  while (!stopping_) {
    health_->SetServingStatus(std::string(kOpenClHealthName), devices_->AnyHealthy());
    buffer_pool_->ReleaseIdle();
    // What the server holds by itself (staging, kept buffers, handles) is no call's.
    const int64_t held_by_server =
        staging_reservation_.bytes() + buffer_pool_->kept_bytes() + handles_->resident_bytes();
    if (idle_trim.Tick(memory_budget_->reserved_total(),
                       memory_budget_->reserved() > held_by_server)) {
      malloc_trim(0);  // the per-thread arenas' freed blocks
    }
    ticker_wake_.wait_for(lock, std::chrono::seconds(1));
  }
}

void Server::Shutdown() {
  stop_.signalled = absl::Now();
  // Health first, so balancers and health-checking clients stop sending, and
  // keep serving while they notice (gRPC answers calls that arrive after
  // Shutdown with CANCELLED, which clients do not retry). Then stop accepting
  // calls and let in-flight ones finish within the grace period (after it
  // gRPC cancels them, which our tasks notice at their next stop check). A
  // replica holding handles first serves calls on them for the grace period.
  health_->SetServingStatus(false);
  inference_->SetReady(false);
  if (inference_http_ != nullptr) inference_http_->SetReady(false);
  std::this_thread::sleep_for(config_.drain);
  // Ends the clients' health Watch streams too, which Shutdown would otherwise
  // wait on for the whole grace period.
  health_->Shutdown();
  // The grace period is a bound: at its end gRPC cancels the calls still in
  // flight, which our tasks notice at their next stop check (validation and
  // every kernel loop look at bounded intervals). Whatever still has not
  // stopped kForcedExitAfter later does not hold the process: it exits 1.
  std::thread([grace = config_.grace] {
    std::this_thread::sleep_for(grace + kForcedExitAfter);
    LogEvent("forced_exit",
             absl::StrCat("work still running ", kForcedExitAfter.count(),
                          " s after --shutdown_grace_seconds=", grace.count()),
             "error");
    std::_Exit(1);
  }).detach();
  const auto grace_end = std::chrono::system_clock::now() + config_.grace;
  // A handle lives on this replica alone: while it holds any, calls on them
  // are served while clients still make them (within the grace period), and
  // every other call is turned away for clients to retry elsewhere. Without
  // handles, nothing waits here.
  if (const int64_t held = handles_->handles(); held > 0) {
    handles_->StartDraining();
    LogEvent("draining",
             absl::StrCat(held,
                          " handles: serving only calls on them while they come (until none "
                          "came for ",
                          absl::FormatDuration(kHandlesQuietFor),
                          ") within --shutdown_grace_seconds=", config_.grace.count()));
    stop_.handles_wait = ServeHandlesUntil(*handles_, grace_end);
  }
  // WaitForQuiet's bound: half of what is left of the grace period.
  const auto now = std::chrono::system_clock::now();
  WaitForQuiet(*engine_,
               now + std::max(grace_end - now, std::chrono::system_clock::duration::zero()) / 2);
  stop_.calls_open_at_shutdown = engine_->open_calls();
  server_->Shutdown(grace_end);
  stop_.grace_ran_out = std::chrono::system_clock::now() >= grace_end;
}

std::string Server::CutShort() const {
  return absl::StrCat(engine_->open_calls(), " calls open, ", handles_->handles(),
                      " handles dropped");
}

void Server::LogStopped() const {
  std::string detail = absl::StrCat(
      "after ", absl::StrFormat("%.2f", absl::ToDoubleSeconds(absl::Now() - stop_.signalled)),
      " s; ", handles_->handles(), " handles dropped");
  if (!stop_.handles_wait.empty()) {
    absl::StrAppend(&detail, "; handles served until ", stop_.handles_wait);
  }
  if (stop_.grace_ran_out) {
    absl::StrAppend(&detail, "; --shutdown_grace_seconds=", config_.grace.count(), " ran out with ",
                    stop_.calls_open_at_shutdown,
                    " calls open: those still running were cancelled");
  }
  LogEvent("stopped", detail);
}

void Server::Wait() {
  server_->Wait();
  // No HTTP inference may queue work once the scheduler is waited for.
  inference_http_.reset();
  if (health_listener_.server != nullptr) {
    health_listener_.server->Shutdown();
    health_listener_.server->Wait();
  }
  {
    std::lock_guard<std::mutex> lock(ticker_mutex_);
    stopping_ = true;
  }
  ticker_wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  if (calibration_.joinable()) {
    calibration_.request_stop();
    calibration_.join();
  }
  // No call is left to wait for a device slot; should one be, it ends rather
  // than hold the scheduler's wait.
  devices_->CancelWaiters(absl::CancelledError("the server is shutting down"));
  // Tasks may still be logging after their call finished.
  scheduler_->Wait();
  FlushRequestLog();
}

Server::~Server() {
  // Only after a failed Start (Wait joins it otherwise).
  if (ticker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(ticker_mutex_);
      stopping_ = true;
    }
    ticker_wake_.notify_all();
    ticker_.join();
  }
}

}  // namespace tensorop::server
