// tensord: the tensorop gRPC server.
//
//   tensord --address=0.0.0.0:50051 --worker_threads=8
//
// Prints "tensord listening on HOST:PORT" on stdout once it serves, then
// "tensord metrics on HOST:PORT" where GET /metrics answers (unless
// --metrics_address is empty), writes one JSON line per request on stderr, and
// drains in-flight calls on SIGTERM/SIGINT.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/limits.h"
#include "kernels/opencl/device.h"
#include "server/calibration.h"
#include "server/device_pool.h"
#include "server/echo_service.h"
#include "server/flag_file.h"
#include "server/health_listener.h"
#include "server/inference_service.h"
#include "server/malloc_tuning.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/request_log.h"
#include "server/scheduler.h"
#include "server/security.h"
#include "server/service.h"
#include "server/shared_memory.h"
#include "server/transport.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051",
          "host:port to listen on (port 0: any free port), or unix:PATH (a Unix domain "
          "socket); may repeat to listen on several");
ABSL_FLAG(int, worker_threads,
          static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
          "CPU worker threads (default: the hardware concurrency)");
ABSL_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
          "largest gRPC message received or sent; a Run answer must fit");
ABSL_FLAG(int64_t, max_request_bytes, int64_t{4} << 30,
          "largest request: bytes of all inputs plus all outputs");
ABSL_FLAG(int64_t, max_tensor_elements, tensorop::kMaxTensorElements,
          "most elements in one tensor (at most 2^32-1)");
ABSL_FLAG(int64_t, chunk_bytes, int64_t{1} << 20,
          "data bytes per streamed ResultPart chunk");
ABSL_FLAG(std::string, backend, "auto",
          "where requests asking for AUTO run: auto, cpu or opencl");
ABSL_FLAG(int, max_queued_requests, 256,
          "requests queued or running at once; more are RESOURCE_EXHAUSTED");
ABSL_FLAG(int, shutdown_grace_seconds, 30,
          "on SIGTERM/SIGINT, how long in-flight calls may take to finish");
ABSL_FLAG(int, drain_seconds, 0,
          "on SIGTERM/SIGINT, first report NOT_SERVING on the health service this long "
          "while still serving, so health-checking clients and balancers move away "
          "before new calls are refused");
ABSL_FLAG(std::string, backends, "cpu,opencl",
          "enabled backends: cpu, or cpu,opencl (the CPU is always enabled)");
ABSL_FLAG(std::string, opencl_devices, "",
          "use only OpenCL devices whose name contains this text (empty: all)");
ABSL_FLAG(int, opencl_queue_depth, 8, "requests queued or running per OpenCL device");
ABSL_FLAG(int64_t, opencl_staging_bytes, int64_t{64} << 20,
          "pinned host staging per OpenCL device for uploads and downloads, counted in "
          "--max_memory_bytes from startup (0: none, transfers from pageable memory)");
ABSL_FLAG(int, opencl_max_wait_seconds, 30,
          "how long an OPENCL request waits for a slot of a busy device before it ends "
          "DEADLINE_EXCEEDED (0: it does not wait)");
ABSL_FLAG(int64_t, auto_opencl_min_bytes, std::numeric_limits<int64_t>::max(),
          "when given, AUTO requests moving at least this many output bytes go to a "
          "device, instead of where the calibrated cost model predicts them fastest");
ABSL_FLAG(std::string, calibrate, "on",
          "on: right after startup, measure the CPU's and each OpenCL device's rates in "
          "the background (at most 2 s of measuring) for AUTO's cost model; until then, "
          "and with off, AUTO runs on the CPU unless --auto_opencl_min_bytes is given");
ABSL_FLAG(int, opencl_unhealthy_seconds, 30,
          "after a device fails, how long it is left alone before being tried again");
ABSL_FLAG(int, inject_opencl_failures, 0,
          "testing aid: the first N device executions fail as a broken device would");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "host:port of the Prometheus /metrics endpoint (port 0: any free port; "
          "empty: no metrics). Loopback by default: a bare run exposes nothing; "
          "Kubernetes sets the pod IP");
ABSL_FLAG(int, max_connection_age_seconds, 0,
          "close each client connection after about this long (gracefully: calls in "
          "flight finish), so clients balancing over DNS re-resolve and reach replicas "
          "added since; 0: never");
ABSL_FLAG(int, max_concurrent_streams, 128,
          "calls open at once on one client connection (HTTP/2 "
          "SETTINGS_MAX_CONCURRENT_STREAMS); more wait in the client");
ABSL_FLAG(int, max_connection_idle_seconds, 600,
          "close a client connection with no call open for this long (gracefully); "
          "0: never");
ABSL_FLAG(int64_t, max_memory_bytes, 0,
          "bytes every call together may hold (requests, outputs, answers waiting to be "
          "sent); past it calls are RESOURCE_EXHAUSTED (0: half the memory the process may "
          "use: the cgroup limit, else physical RAM)");
ABSL_FLAG(int, idle_timeout_seconds, 60,
          "a call whose client sends nothing (RunChunked upload) or takes nothing (answers, "
          "result parts) this long is cancelled and its memory freed; 0: never");
ABSL_FLAG(int, shared_memory_idle_seconds, 300,
          "a shared memory region no request used for this long is unmapped, so a client "
          "that died leaves no mapping behind; 0: never");
ABSL_FLAG(bool, echo, false,
          "load-test baseline: Run answers zero-filled outputs of the right shape at "
          "once, without executing; other methods are UNIMPLEMENTED");

// Transport security (README "Security"; server/security.h).
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain: serve TLS only on --address (reloaded when the file changes)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file (unencrypted)");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificates: require client certificates that chain to them (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "accepted bearer tokens, one NAME:TOKEN (or TOKEN) a line; calls to TensorOp without "
          "one are UNAUTHENTICATED; reread on change and on SIGHUP (needs TLS)");
ABSL_FLAG(std::string, reflection, "auth",
          "server reflection: on (open to all), off, or auth (needs a token when "
          "--auth_token_file is set)");
ABSL_FLAG(std::string, health_address, "",
          "host:port of a second, plaintext listener serving only grpc.health.v1 (for kubelet "
          "probes when --address is TLS); empty: none");

namespace tensorop::server {
namespace {

constexpr int kUsageExit = 2;

// The ranges of the numeric flags (out of range: exit 2 naming flag and range).
// Generous, but each keeps a typo from becoming a server that never answers
// (2^31 worker threads) or one that cannot be stopped.
constexpr int64_t kMaxPort = 65535;
constexpr int kMaxWorkerThreads = 1024;
constexpr int kMaxQueuedRequests = 1 << 20;
// Health and reflection answers must fit, and a chunk plus its framing.
constexpr int64_t kMinMessageBytes = 4096;
constexpr int64_t kMaxRequestBytes = int64_t{1} << 50;  // 1 PiB
constexpr int kMaxOpenClQueueDepth = 1024;
constexpr int64_t kMaxStagingBytes = int64_t{1} << 40;  // 1 TiB
constexpr int kMaxSeconds = 86400;  // one day
constexpr int kMaxShutdownSeconds = 3600;
constexpr int kMaxInjectedFailures = 1 << 20;
constexpr int kMaxStreams = 65536;

// Before GOAWAY: waits until no Run call is open and the kernel has handed
// every byte written to the clients, or until `until`. gRPC closes a
// connection as soon as its last call ends after GOAWAY, and Linux resets a
// connection closed with unread input (the client's flow-control updates),
// dropping what it still held for the client: the tail of a large answer.
// Calls keep being served meanwhile; the bound (half the grace period) leaves
// the rest of it to calls that clients which ignore health keep sending.
void WaitForQuiet(const TensorOpService& service, std::chrono::system_clock::time_point until) {
  while (std::chrono::system_clock::now() < until &&
         (service.open_calls() > 0 || UnsentSocketBytes() > 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// How long after the shutdown grace period the process exits even if some work
// did not stop (Kubernetes: inside terminationGracePeriodSeconds' margin).
constexpr std::chrono::seconds kForcedExitAfter{5};
constexpr absl::string_view kServiceName = "tensorop.v1.TensorOp";

// Our flags, in --help order. Only these are accepted on the command line.
constexpr absl::string_view kFlagNames[] = {
    "address",     "worker_threads", "max_message_bytes",   "max_request_bytes",
    "max_tensor_elements", "chunk_bytes", "backend", "max_queued_requests",
    "shutdown_grace_seconds", "drain_seconds", "backends", "opencl_devices", "opencl_queue_depth",
    "opencl_staging_bytes", "auto_opencl_min_bytes", "calibrate", "opencl_unhealthy_seconds", "inject_opencl_failures",
    "metrics_address", "max_connection_age_seconds", "max_concurrent_streams",
    "max_connection_idle_seconds", "echo",
    "tls_cert_file", "tls_key_file", "tls_client_ca_file", "auth_token_file", "reflection",
    "health_address", "max_memory_bytes", "idle_timeout_seconds",
    "opencl_max_wait_seconds", "shared_memory_idle_seconds"};
constexpr absl::string_view kOpenClHealthName = "tensorop.opencl";
constexpr absl::string_view kCpuHealthName = "tensorop.cpu";

[[noreturn]] void UsageError(absl::string_view message) {
  std::cerr << "tensord: " << message << "\n(tensord --help lists the flags)\n";
  std::exit(kUsageExit);
}

// Every --address given, in order (the flag keeps only the last): tensord
// listens on each.
std::vector<std::string>& RepeatedAddresses() {
  static std::vector<std::string> addresses;
  return addresses;
}

void PrintHelp() {
  std::cout << "usage: tensord [--flag=value ...]\n\n";
  for (absl::string_view name : kFlagNames) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::cout << "  --" << name << " (default " << flag->DefaultValue() << ")\n      "
              << flag->Help() << "\n";
  }
  std::cout << "  --flagfile=PATH\n      reads flags from PATH, one --name=value per line "
               "(# comments); later flags win\n";
}

// The words of a --flagfile: one --name=value per line; blank lines and lines
// starting with # are skipped. (Kubernetes mounts the flags from a ConfigMap.)
std::vector<Argument> ReadFlagFile(absl::string_view path, absl::string_view origin) {
  std::ifstream file{std::string(path)};
  if (!file) UsageError(absl::StrCat(origin, "--flagfile=", path, ": cannot read the file"));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::vector<Argument>> arguments = ParseFlagFile(text.str(), path);
  if (!arguments.ok()) UsageError(arguments.status().message());
  return *std::move(arguments);
}

// The flags given on the command line or in a flag file (a value equal to the
// default still counts as given: --auto_opencl_min_bytes replaces the model).
std::set<std::string>& GivenFlags() {
  static std::set<std::string>* given = new std::set<std::string>();
  return *given;
}

// Parses --name=value and --name value, and --flagfile=PATH in place (later
// flags win). absl::ParseCommandLine exits with 1 on a bad flag; the contract
// here is exit status 2 for any usage error.
void ParseFlags(int argc, char** argv) {
  std::vector<Argument> arguments;
  for (int i = 1; i < argc; ++i) arguments.push_back({argv[i], ""});
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view arg = arguments[i].text;
    const std::string origin = arguments[i].origin;
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      PrintHelp();
      std::exit(0);
    }
    if (!absl::StartsWith(arg, "-")) {
      UsageError(absl::StrCat(origin, "unexpected argument \"", arg, "\""));
    }
    arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
    absl::string_view name = arg;
    std::string value;
    if (size_t equals = arg.find('='); equals != absl::string_view::npos) {
      name = arg.substr(0, equals);
      value = std::string(arg.substr(equals + 1));
    } else if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
               flag != nullptr && flag->IsOfType<bool>()) {
      value = "true";  // a bool flag alone (--echo) means true
    } else if (i + 1 < arguments.size() && arguments[i + 1].origin == origin) {
      value = arguments[++i].text;
    } else {
      UsageError(absl::StrCat(origin, "--", name, " needs a value"));
    }
    if (name == "flagfile") {
      std::vector<Argument> from_file = ReadFlagFile(value, origin);
      arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                       from_file.begin(), from_file.end());
      continue;
    }
    if (std::find(std::begin(kFlagNames), std::end(kFlagNames), name) == std::end(kFlagNames)) {
      UsageError(absl::StrCat(origin, "unknown flag --", name));
    }
    if (name == "address" &&
        std::find(RepeatedAddresses().begin(), RepeatedAddresses().end(), value) ==
            RepeatedAddresses().end()) {
      RepeatedAddresses().push_back(value);
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      UsageError(absl::StrCat(origin, "--", name, "=", value, ": ", error));
    }
    GivenFlags().insert(std::string(name));
  }
}

struct Config {
  std::string address;  // the first of `addresses`
  std::vector<std::string> addresses;  // TCP ones first, in the order given
  std::string metrics_address;  // empty: no metrics endpoint
  bool echo = false;
  bool opencl = true;
  bool calibrate = true;
  std::string opencl_filter;
  opencl_backend::DeviceOptions device;
  DevicePoolOptions devices;
  SchedulerOptions scheduler;
  ServiceOptions service;
  int max_message_bytes = 0;
  std::chrono::seconds grace{0};
  std::chrono::seconds drain{0};
  int max_connection_age_seconds = 0;  // 0: never
  int max_concurrent_streams = 0;
  int max_connection_idle_seconds = 0;  // 0: never
  SecurityOptions security;
  std::string health_address;  // empty: no health listener
  int64_t max_memory_bytes = 0;
  std::string max_memory_source;  // where the default came from; "" when set
  int shared_memory_idle_seconds = 0;
};

// An integer flag's value, which must lie in [lo, hi]: out of range is a usage
// error naming the flag and the range ("--worker_threads=0 must be in [1, 1024]").
template <typename T>
T FlagInRange(const absl::Flag<T>& flag, absl::string_view name, T lo, T hi) {
  const T value = absl::GetFlag(flag);
  if (value < lo || value > hi) {
    UsageError(absl::StrCat("--", name, "=", value, " must be in [", lo, ", ", hi, "]"));
  }
  return value;
}

// Checks a HOST:PORT flag: a colon, and a port of digits in [0, 65535] (0: any
// free port). gRPC and cpp-httplib would otherwise take 99999 modulo 65536 or
// fail later with a vaguer message.
void CheckHostPort(absl::string_view name, const std::string& address,
                   absl::string_view empty_hint) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    UsageError(absl::StrCat("--", name, "=", address, ": expected HOST:PORT", empty_hint));
  }
  const std::string port_text = address.substr(colon + 1);
  int64_t port = -1;
  if (port_text.empty() ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      port_text.size() > 6 || !absl::SimpleAtoi(port_text, &port) || port > kMaxPort) {
    UsageError(absl::StrCat("--", name, "=", address, ": the port must be in [0, ", kMaxPort,
                            "]"));
  }
}

bool IsUnixAddress(absl::string_view address) {
  return absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:");
}

// Checks a unix:PATH (or unix:///PATH) address before gRPC sees it: gRPC
// reports a missing directory or a path that is not a socket only as "cannot
// listen". A socket left by an earlier run is replaced (gRPC unlinks it).
void CheckUnixAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix-abstract:")) return;
  absl::string_view path = absl::string_view(address).substr(5);
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);  // unix:///abs -> /abs
  const std::string where = absl::StrCat("--address=", address, ": ");
  if (path.empty()) UsageError(absl::StrCat(where, "expected unix:PATH or unix:///ABSOLUTE_PATH"));
  // sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
  if (path.size() > 107) {
    UsageError(absl::StrCat(where, "the socket path has ", path.size(),
                            " bytes; a Unix socket path may have at most 107"));
  }
  const size_t slash = path.rfind('/');
  const std::string directory =
      slash == absl::string_view::npos ? "." : std::string(slash == 0 ? "/" : path.substr(0, slash));
  struct stat info {};
  if (stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    UsageError(absl::StrCat(where, "the directory ", directory, " does not exist"));
  }
  if (lstat(std::string(path).c_str(), &info) == 0 && !S_ISSOCK(info.st_mode)) {
    UsageError(absl::StrCat(where, std::string(path),
                            " exists and is not a socket; tensord replaces only a stale socket"));
  }
}

Config ValidatedConfig() {
  Config config;
  std::vector<std::string> given = RepeatedAddresses();
  if (given.empty()) given.push_back(absl::GetFlag(FLAGS_address));
  for (const std::string& address : given) {
    if (IsUnixAddress(address)) continue;
    CheckHostPort("address", address, ", or unix:PATH");
    config.addresses.push_back(address);
  }
  for (const std::string& address : given) {
    if (!IsUnixAddress(address)) continue;
    CheckUnixAddress(address);
    config.addresses.push_back(address);
  }
  config.address = config.addresses.front();
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  if (!config.metrics_address.empty()) {
    CheckHostPort("metrics_address", config.metrics_address, ", or empty for no metrics");
  }
  config.echo = absl::GetFlag(FLAGS_echo);
  config.scheduler.worker_threads =
      FlagInRange(FLAGS_worker_threads, "worker_threads", 1, kMaxWorkerThreads);
  config.scheduler.max_queued_requests =
      FlagInRange(FLAGS_max_queued_requests, "max_queued_requests", 1, kMaxQueuedRequests);
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend == "auto") {
    config.scheduler.default_backend = v1::AUTO;
  } else if (backend == "cpu") {
    config.scheduler.default_backend = v1::CPU;
  } else if (backend == "opencl") {
    config.scheduler.default_backend = v1::OPENCL;
  } else {
    UsageError(absl::StrCat("--backend=", backend, ": expected auto, cpu or opencl"));
  }

  const int64_t message_bytes = FlagInRange(FLAGS_max_message_bytes, "max_message_bytes",
                                            kMinMessageBytes, int64_t{INT_MAX});
  config.max_message_bytes = static_cast<int>(message_bytes);
  config.service.max_message_bytes = message_bytes;
  // A chunk plus its few bytes of framing must fit in one message.
  config.service.chunk_bytes =
      FlagInRange(FLAGS_chunk_bytes, "chunk_bytes", int64_t{1}, message_bytes - 64);
  config.service.limits.max_request_bytes =
      FlagInRange(FLAGS_max_request_bytes, "max_request_bytes", int64_t{1}, kMaxRequestBytes);
  config.service.limits.max_tensor_elements = FlagInRange(
      FLAGS_max_tensor_elements, "max_tensor_elements", int64_t{1}, kMaxTensorElements);
  const std::string backends = absl::GetFlag(FLAGS_backends);
  if (backends == "cpu") {
    config.opencl = false;
  } else if (backends != "cpu,opencl" && backends != "opencl,cpu") {
    UsageError(absl::StrCat("--backends=", backends, ": expected cpu or cpu,opencl"));
  }
  config.opencl_filter = absl::GetFlag(FLAGS_opencl_devices);
  config.devices.queue_depth =
      FlagInRange(FLAGS_opencl_queue_depth, "opencl_queue_depth", 1, kMaxOpenClQueueDepth);
  config.device.staging_bytes = FlagInRange(FLAGS_opencl_staging_bytes, "opencl_staging_bytes",
                                            int64_t{0}, kMaxStagingBytes);
  config.devices.max_wait = std::chrono::seconds(
      FlagInRange(FLAGS_opencl_max_wait_seconds, "opencl_max_wait_seconds", 0, kMaxSeconds));
  config.devices.unhealthy_for = std::chrono::seconds(
      FlagInRange(FLAGS_opencl_unhealthy_seconds, "opencl_unhealthy_seconds", 0, kMaxSeconds));
  config.devices.inject_failures = FlagInRange(
      FLAGS_inject_opencl_failures, "inject_opencl_failures", 0, kMaxInjectedFailures);
  const int64_t auto_min_bytes =
      FlagInRange(FLAGS_auto_opencl_min_bytes, "auto_opencl_min_bytes", int64_t{0},
                  std::numeric_limits<int64_t>::max());
  if (GivenFlags().count("auto_opencl_min_bytes") > 0) {
    config.scheduler.auto_opencl_min_bytes = auto_min_bytes;
  }
  const std::string calibrate = absl::GetFlag(FLAGS_calibrate);
  if (calibrate != "on" && calibrate != "off") {
    UsageError(absl::StrCat("--calibrate=", calibrate, ": expected on or off"));
  }
  config.calibrate = calibrate == "on";
  config.grace = std::chrono::seconds(
      FlagInRange(FLAGS_shutdown_grace_seconds, "shutdown_grace_seconds", 0, kMaxShutdownSeconds));
  config.drain = std::chrono::seconds(
      FlagInRange(FLAGS_drain_seconds, "drain_seconds", 0, kMaxShutdownSeconds));
  config.max_connection_age_seconds = FlagInRange(
      FLAGS_max_connection_age_seconds, "max_connection_age_seconds", 0, INT_MAX / 1000);
  config.max_concurrent_streams = FlagInRange(FLAGS_max_concurrent_streams,
                                              "max_concurrent_streams", 1, kMaxStreams);
  config.max_connection_idle_seconds = FlagInRange(
      FLAGS_max_connection_idle_seconds, "max_connection_idle_seconds", 0, kMaxSeconds);
  config.security.tls = {absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
                         absl::GetFlag(FLAGS_tls_client_ca_file)};
  config.security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  const std::string reflection = absl::GetFlag(FLAGS_reflection);
  std::optional<ReflectionAccess> access = ParseReflectionAccess(reflection);
  if (!access.has_value()) {
    UsageError(absl::StrCat("--reflection=", reflection, ": expected on, off or auth"));
  }
  config.security.reflection = *access;
  if (absl::Status flags = CheckSecurityFlags(config.security); !flags.ok()) {
    UsageError(flags.message());
  }
  config.health_address = absl::GetFlag(FLAGS_health_address);
  if (!config.health_address.empty() && config.health_address.find(':') == std::string::npos) {
    UsageError(absl::StrCat("--health_address=", config.health_address, ": expected HOST:PORT"));
  }
  config.max_memory_bytes = absl::GetFlag(FLAGS_max_memory_bytes);
  if (config.max_memory_bytes < 0) UsageError("--max_memory_bytes must not be negative");
  if (config.max_memory_bytes == 0) {
    const MemoryLimit limit = ProcessMemoryLimit();
    config.max_memory_bytes = std::max<int64_t>(limit.bytes / 2, 1);
    config.max_memory_source = absl::StrCat("half of the ", limit.bytes, " bytes of ", limit.source);
  }
  const int idle = absl::GetFlag(FLAGS_idle_timeout_seconds);
  if (idle < 0 || idle > 86400) UsageError("--idle_timeout_seconds must be in [0, 86400]");
  config.service.idle_timeout = absl::Seconds(idle);
  config.shared_memory_idle_seconds =
      FlagInRange(FLAGS_shared_memory_idle_seconds, "shared_memory_idle_seconds", 0, kMaxSeconds);
  return config;
}

// A startup fact on stderr, as a JSON line like the request log's.
void LogStartupEvent(absl::string_view event, absl::string_view detail) {
  nlohmann::ordered_json line;
  line["event"] = event;
  line["detail"] = detail;
  std::cerr << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

// "HOST:PORT" with the port the server actually bound.
std::string ListeningAddress(const std::string& address, int port) {
  if (IsUnixAddress(address)) return address;
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

int Main(int argc, char** argv) {
  ExecWithHugePageMalloc(argv);  // first: no thread may exist yet
  ParseFlags(argc, argv);
  const Config config = ValidatedConfig();
  // Blocks of 4 MiB and more (inputs, outputs, answers) are mapped on their own
  // (on huge pages: server/malloc_tuning.h) and unmapped when freed, so memory
  // the budget gave back leaves the process. glibc's default raises this
  // threshold after each such free, up to 32 MiB, and keeps freed blocks below
  // it resident. Below 4 MiB blocks come from the heap, reused from call to
  // call instead of paying a page fault per 4 KiB each time (at 1 MiB that was
  // most of a 1 MiB Run's CPU), and given back by the idle trim below.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  // And the heap keeps up to twice that free at its top rather than handing
  // it back (and faulting it in again) after every call: glibc's own ratio.
  mallopt(M_TRIM_THRESHOLD, 8 << 20);

  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only the sigwait() thread below receives them.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);
  if (config.security.reloads()) {
    // SIGHUP rereads the certificate and token files (server/security.h).
    sigset_t reload_signals;
    sigemptyset(&reload_signals);
    Security::AddReloadSignal(&reload_signals);
    pthread_sigmask(SIG_BLOCK, &reload_signals, nullptr);
  }

  // Hold one gRPC initialization for the life of the process and never release
  // it: releasing the last one runs gRPC's synchronous shutdown, which joins an
  // executor thread that may sit in a 10 s poll, and would delay every exit.
  grpc_init();

  // Every connection (gRPC and /metrics) takes a descriptor, and gRPC stops
  // accepting for good once accept4 fails with EMFILE: take all we may.
  if (absl::StatusOr<uint64_t> files = RaiseOpenFileLimit(); files.ok()) {
    LogStartupEvent("open_files", absl::StrCat("RLIMIT_NOFILE ", *files));
  } else {
    LogStartupEvent("open_files", files.status().message());
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
    for (const std::string& reason : skipped) LogStartupEvent("device_skipped", reason);
  }
  DevicePool devices(std::move(opened), config.devices);
  for (size_t i = 0; i < devices.size(); ++i) {
    LogStartupEvent("device", absl::StrCat(i, " ", devices.Label(static_cast<int>(i))));
  }
  Config effective = config;
  effective.scheduler.devices = &devices;
  Scheduler scheduler(effective.scheduler);
  Metrics metrics;
  AddServerSeries(metrics, scheduler, devices);
  effective.service.metrics = &metrics;
  MemoryBudget memory_budget(config.max_memory_bytes);
  AddMemoryBudgetSeries(metrics, memory_budget);
  effective.service.memory_budget = &memory_budget;
  // Each device's staging may grow to --opencl_staging_bytes: charged here,
  // once, for that bound and the process's life, so no request waits on the
  // budget for staging and the figure is fixed from startup.
  MemoryBudget::Reservation staging_reservation;
  if (devices.size() > 0 && config.device.staging_bytes > 0) {
    const int64_t staging = static_cast<int64_t>(devices.size()) * config.device.staging_bytes;
    absl::StatusOr<MemoryBudget::Reservation> reserved =
        memory_budget.TryReserve(staging, "OpenCL staging (--opencl_staging_bytes)");
    if (!reserved.ok()) {
      UsageError(absl::StrCat("--opencl_staging_bytes=", config.device.staging_bytes, " for ",
                              devices.size(), " OpenCL device(s) does not fit --max_memory_bytes=",
                              config.max_memory_bytes));
    }
    staging_reservation = *std::move(reserved);
    LogStartupEvent("opencl_staging",
                    absl::StrCat(staging, " bytes reserved (--opencl_staging_bytes=",
                                 config.device.staging_bytes, " for ", devices.size(),
                                 " device(s))"));
  }
  LogStartupEvent("memory_budget",
                  absl::StrCat(config.max_memory_bytes, " bytes (--max_memory_bytes",
                               config.max_memory_source.empty()
                                   ? ")"
                                   : absl::StrCat(": ", config.max_memory_source, ")")));
  // Regions map client memory: counted in the budget, so declared after it
  // and before the service, which must not outlive it.
  SharedMemoryRegistry shared_memory(SharedMemoryOptions{
      .idle_timeout = absl::Seconds(config.shared_memory_idle_seconds),
      .budget = &memory_budget});
  AddSharedMemorySeries(metrics, shared_memory);
  effective.service.shared_memory = &shared_memory;
  TensorOpService service(effective.service, &scheduler);
  // The Open Inference Protocol (KServe v2) on the same port(s), run by `service`.
  InferenceService inference(&service, &metrics);
  EchoService echo(config.service.max_message_bytes);
  AddCalibrationSeries(metrics, scheduler, devices);
  // AUTO's cost model, measured in the background while the server starts
  // and serves (AUTO runs on the CPU until it is set). Declared after what it
  // uses: leaving Main early stops and joins it first.
  std::jthread calibration;
  if (config.calibrate && !config.echo) {
    calibration = std::jthread([&scheduler, &devices, to_calibrate,
                                threshold = config.scheduler.auto_opencl_min_bytes,
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
  if (!security.ok()) {
    std::cerr << "tensord: " << security.status().message() << "\n";
    return 1;
  }

  // Before the gRPC port, so a taken metrics port stops startup before anyone
  // is told the server listens.
  std::unique_ptr<MetricsHttpServer> metrics_http;
  if (!config.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(config.metrics_address, &metrics);
    if (!started.ok()) {
      std::cerr << "tensord: " << started.status().message() << "\n";
      return 1;
    }
    metrics_http = *std::move(started);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::vector<int> ports(config.addresses.size(), 0);
  std::shared_ptr<grpc::ServerCredentials> credentials;
  (*security)->Configure(builder, &credentials);
  for (size_t i = 0; i < config.addresses.size(); ++i) {
    builder.AddListeningPort(config.addresses[i], credentials, &ports[i]);
  }
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.SetMaxSendMessageSize(config.max_message_bytes);
  if (config.max_connection_age_seconds > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               config.max_connection_age_seconds * 1000);
  }
  TransportOptions transport;
  transport.max_concurrent_streams = config.max_concurrent_streams;
  transport.max_connection_idle_seconds = config.max_connection_idle_seconds;
  // gRPC's own buffers give way (it shrinks them, then cancels calls) before
  // the kernel's OOM killer ends the whole process.
  transport.quota_memory_bytes = ProcessMemoryBytes();
  grpc::ResourceQuota quota("tensord");
  ApplyTransportLimits(transport, quota, builder);
  if (config.echo) {
    builder.RegisterService(&echo);
  } else {
    builder.RegisterService(&service);
    builder.RegisterService(&inference);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  for (size_t i = 0; i < config.addresses.size(); ++i) {
    if (server == nullptr || ports[i] == 0) {
      std::cerr << "tensord: cannot listen on " << config.addresses[i] << "\n";
      return 1;
    }
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  // --health_address: every status below goes to both servers.
  HealthListener health_listener;
  std::unique_ptr<HealthMirror> health_mirror;
  if (!config.health_address.empty()) {
    absl::StatusOr<HealthListener> started = StartHealthListener(config.health_address);
    if (!started.ok()) {
      std::cerr << "tensord: " << started.status().message() << "\n";
      return 1;
    }
    health_listener = *std::move(started);
    health_mirror = std::make_unique<HealthMirror>(std::vector<grpc::HealthCheckServiceInterface*>{
        health, health_listener.server->GetHealthCheckService()});
    health = health_mirror.get();
  }
  (*security)->StartReloading();
  health->SetServingStatus("", true);
  health->SetServingStatus(std::string(kServiceName), true);
  inference.SetReady(true);
  health->SetServingStatus(std::string(kCpuHealthName), true);
  // tensorop.opencl follows the pool: NOT_SERVING while no device works. A
  // failed device recovers by time alone, so look once a second.
  std::mutex ticker_mutex;
  std::condition_variable ticker_wake;
  bool stopping = false;
  std::thread opencl_health([&] {
    std::unique_lock<std::mutex> lock(ticker_mutex);
    bool trimmed = true;
    while (!stopping) {
      health->SetServingStatus(std::string(kOpenClHealthName), devices.AnyHealthy());
      // Once no call holds memory, hand what malloc keeps of freed small blocks
      // (per-thread arenas) back to the system: once per busy spell, so an idle
      // server does not walk its heap every second.
      if (memory_budget.reserved() > 0) {
        trimmed = false;
      } else if (!trimmed) {
        malloc_trim(0);
        trimmed = true;
      }
      ticker_wake.wait_for(lock, std::chrono::seconds(1));
    }
  });

  std::thread shutdown([&] {
    int signal = 0;
    sigwait(&shutdown_signals, &signal);
    // Health first, so balancers and health-checking clients stop sending, and
    // keep serving while they notice (gRPC answers calls that arrive after
    // Shutdown with CANCELLED, which clients do not retry). Then stop accepting
    // calls and let in-flight ones finish within the grace period (after it
    // gRPC cancels them, which our tasks notice at their next stop check).
    health->SetServingStatus(false);
    inference.SetReady(false);
    std::this_thread::sleep_for(config.drain);
    // Ends the clients' health Watch streams too, which Shutdown would otherwise
    // wait on for the whole grace period.
    health->Shutdown();
    // The grace period is a bound: at its end gRPC cancels the calls still in
    // flight, which our tasks notice at their next stop check (validation and
    // every kernel loop look at bounded intervals). Whatever still has not
    // stopped kForcedExitAfter later does not hold the process: it exits 1.
    std::thread([grace = config.grace] {
      std::this_thread::sleep_for(grace + kForcedExitAfter);
      LogStartupEvent("forced_exit",
                      absl::StrCat("work still running ", kForcedExitAfter.count(),
                                   " s after --shutdown_grace_seconds=", grace.count()));
      std::_Exit(1);
    }).detach();
    const auto grace_end = std::chrono::system_clock::now() + config.grace;
    WaitForQuiet(service, std::chrono::system_clock::now() +
                              std::chrono::duration_cast<std::chrono::milliseconds>(config.grace) / 2);
    server->Shutdown(grace_end);
  });

  // One line per address, TCP first: scripts and tests read the first line's port.
  for (size_t i = 0; i < config.addresses.size(); ++i) {
    std::cout << "tensord listening on " << ListeningAddress(config.addresses[i], ports[i])
              << std::endl;
  }
  if (metrics_http != nullptr) {
    std::cout << "tensord metrics on "
              << ListeningAddress(config.metrics_address, metrics_http->port()) << std::endl;
  }
  if (health_listener.server != nullptr) {
    std::cout << "tensord health on "
              << ListeningAddress(config.health_address, health_listener.port) << std::endl;
  }

  server->Wait();
  shutdown.join();
  if (health_listener.server != nullptr) {
    health_listener.server->Shutdown();
    health_listener.server->Wait();
  }
  {
    std::lock_guard<std::mutex> lock(ticker_mutex);
    stopping = true;
  }
  ticker_wake.notify_all();
  opencl_health.join();
  if (calibration.joinable()) {
    calibration.request_stop();
    calibration.join();
  }
  // No call is left to wait for a device slot; should one be, it ends rather
  // than hold the scheduler's wait.
  devices.CancelWaiters(absl::CancelledError("the server is shutting down"));
  // Tasks may still be logging after their call finished.
  scheduler.Wait();
  FlushRequestLog();
  return 0;
}

}  // namespace
}  // namespace tensorop::server

int main(int argc, char** argv) { return tensorop::server::Main(argc, argv); }
