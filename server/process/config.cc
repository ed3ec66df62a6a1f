// tensord's flags, and their parsing and validation into a ServerConfig.
#include "server/process/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/limits.h"
#include "core/status_macros.h"
#include "proto/backend_name.h"
#include "server/memory/memory_budget.h"
#include "server/process/flag_file.h"

namespace {

// The names of tensord's flags in definition order, which is --help's: each
// TENSORD_FLAG below appends its name as it is registered (static
// initialization runs in definition order within this file). Nothing else
// lists the flags.
std::vector<std::string>& DefinedFlagNames() {
  static auto* names = new std::vector<std::string>();
  return *names;
}

struct ListedFlag {
  explicit ListedFlag(const char* name) { DefinedFlagNames().emplace_back(name); }
};

}  // namespace

// ABSL_FLAG, and the flag's name listed for --help and the parser.
#define TENSORD_FLAG(Type, name, default_value, help) \
  ABSL_FLAG(Type, name, default_value, help);         \
  static const ListedFlag tensord_listed_flag_##name(#name)

TENSORD_FLAG(std::string, address, "0.0.0.0:50051",
             "host:port to listen on (port 0: any free port), or unix:PATH (a Unix domain "
             "socket); may repeat to listen on several");
TENSORD_FLAG(int, worker_threads,
             static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
             "CPU worker threads (default: the hardware concurrency)");
TENSORD_FLAG(int64_t, max_message_bytes, int64_t{64} << 20,
             "largest gRPC message received or sent; a Run answer must fit");
TENSORD_FLAG(int64_t, max_request_bytes, int64_t{4} << 30,
             "largest request: bytes of all inputs plus all outputs");
TENSORD_FLAG(int64_t, max_tensor_elements, tensorop::kMaxTensorElements,
             "most elements in one tensor (at most 2^32-1)");
TENSORD_FLAG(int64_t, chunk_bytes, int64_t{1} << 20, "data bytes per streamed ResultPart chunk");
TENSORD_FLAG(std::string, backend, "auto",
             "where requests asking for AUTO run: auto, cpu or opencl");
TENSORD_FLAG(int, max_queued_requests, 256,
             "requests queued or running at once; more are RESOURCE_EXHAUSTED");
TENSORD_FLAG(int, shutdown_grace_seconds, 30,
             "on SIGTERM/SIGINT, how long in-flight calls may take to finish");
TENSORD_FLAG(int, drain_seconds, 0,
             "on SIGTERM/SIGINT, first report NOT_SERVING on the health service this long "
             "while still serving, so health-checking clients and balancers move away "
             "before new calls are refused");
TENSORD_FLAG(std::string, backends, "cpu,opencl",
             "enabled backends: cpu, or cpu,opencl (the CPU is always enabled)");
TENSORD_FLAG(std::string, opencl_devices, "",
             "use only OpenCL devices whose name contains this text (empty: all)");
TENSORD_FLAG(int, opencl_queue_depth, 8, "requests queued or running per OpenCL device");
TENSORD_FLAG(int64_t, opencl_staging_bytes, int64_t{64} << 20,
             "pinned host staging per OpenCL device for uploads and downloads, counted in "
             "--max_memory_bytes from startup (0: none, transfers from pageable memory)");
TENSORD_FLAG(int64_t, opencl_max_resident_bytes, -1,
             "bytes of handles (Put, OutputDesc.keep) each OpenCL device may hold, in buffers "
             "of their exact size outside the buffer pool; RESOURCE_EXHAUSTED past it (-1: 70% "
             "of the device's global memory)");
TENSORD_FLAG(int64_t, auto_opencl_min_bytes, std::numeric_limits<int64_t>::max(),
             "when given, AUTO requests moving at least this many output bytes go to a "
             "device, instead of where the calibrated cost model predicts them fastest");
TENSORD_FLAG(std::string, calibrate, "on",
             "on: right after startup, measure the CPU's and each OpenCL device's rates in "
             "the background (at most 2 s of measuring) for AUTO's cost model; until then, "
             "and with off, AUTO runs on the CPU unless --auto_opencl_min_bytes is given");
TENSORD_FLAG(int, opencl_unhealthy_seconds, 30,
             "after a device fails, how long it is left alone before being tried again");
TENSORD_FLAG(int, inject_opencl_failures, 0,
             "testing aid: the first N device executions fail as a broken device would");
TENSORD_FLAG(std::string, metrics_address, "127.0.0.1:9464",
             "host:port of the Prometheus /metrics endpoint (port 0: any free port; "
             "empty: no metrics). Loopback by default: a bare run exposes nothing; "
             "Kubernetes sets the pod IP");
TENSORD_FLAG(std::string, http_address, "0.0.0.0:8000",
             "host:port of the Open Inference Protocol's (KServe v2) HTTP/REST API, as "
             "Triton's (port 0: any free port; empty: none). HTTPS when --tls_cert_file is set, "
             "with the gRPC port's certificate, key and client CA");
TENSORD_FLAG(int, max_connection_age_seconds, 0,
             "close each client connection after about this long (gracefully: calls in "
             "flight finish), so clients balancing over DNS re-resolve and reach replicas "
             "added since; 0: never");
TENSORD_FLAG(int, max_concurrent_streams, 128,
             "calls open at once on one client connection (HTTP/2 "
             "SETTINGS_MAX_CONCURRENT_STREAMS); more wait in the client");
TENSORD_FLAG(int, max_connection_idle_seconds, 600,
             "close a client connection with no call open for this long (gracefully); "
             "0: never");
TENSORD_FLAG(bool, echo, false,
             "load-test baseline: Run answers zero-filled outputs of the right shape at "
             "once, without executing; other methods are UNIMPLEMENTED");
// Transport security (docs/security.md; server/security/security.h).
TENSORD_FLAG(std::string, tls_cert_file, "",
             "PEM certificate chain: serve TLS only on --address (reloaded when the file changes)");
TENSORD_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file (unencrypted)");
TENSORD_FLAG(std::string, tls_client_ca_file, "",
             "PEM CA certificates: require client certificates that chain to them (mutual TLS)");
TENSORD_FLAG(std::string, auth_token_file, "",
             "accepted bearer tokens, one NAME:TOKEN (or TOKEN) a line; calls to TensorOp without "
             "one are UNAUTHENTICATED; reread on change and on SIGHUP (needs TLS)");
TENSORD_FLAG(std::string, reflection, "auth",
             "server reflection: on (open to all), off, or auth (needs a token when "
             "--auth_token_file is set)");
TENSORD_FLAG(std::string, health_address, "",
             "host:port of a second, plaintext listener serving only grpc.health.v1 (for kubelet "
             "probes when --address is TLS); empty: none");
TENSORD_FLAG(int64_t, max_memory_bytes, 0,
             "bytes every call together may hold (requests, outputs, answers waiting to be "
             "sent); past it calls are RESOURCE_EXHAUSTED (0: half the memory the process may "
             "use: the cgroup limit, else physical RAM)");
TENSORD_FLAG(int64_t, buffer_pool_bytes, -1,
             "bytes of large (4 MiB and more) freed output buffers kept for reuse, so the next "
             "call writes into resident pages instead of faulting in fresh zeroed ones; "
             "reserved in --max_memory_bytes, freed first when a call needs the room and after "
             "10 s unused (-1: a quarter of --max_memory_bytes; 0: none)");
TENSORD_FLAG(int, idle_timeout_seconds, 60,
             "a call whose client sends nothing (RunChunked upload) or takes nothing (answers, "
             "result parts) this long is cancelled and its memory freed; 0: never");
TENSORD_FLAG(int, opencl_max_wait_seconds, 30,
             "how long an OPENCL request waits for a slot of a busy device before it ends "
             "DEADLINE_EXCEEDED (0: it does not wait)");
TENSORD_FLAG(int, shared_memory_idle_seconds, 300,
             "a shared memory region no request used for this long is unmapped, so a client "
             "that died leaves no mapping behind; 0: never");
TENSORD_FLAG(bool, shared_memory_remote, false,
             "let clients that are not on this host (neither a Unix socket nor a loopback "
             "address) register shared memory regions: off, since a remote client did not make "
             "the objects in this host's /dev/shm and could only map other processes' memory");

TENSORD_FLAG(int, handle_ttl_seconds, 600,
             "a handle (Put, OutputDesc.keep) nobody used for this long is released; in "
             "[1, 86400]");
TENSORD_FLAG(int, handle_max_ttl_seconds, 86400,
             "the longest time to live a Put may ask for (longer is clamped); in [1, 2592000]");
TENSORD_FLAG(int64_t, max_resident_bytes_per_client, -1,
             "bytes of handles one client (its token or certificate identity, else its IP "
             "address) may hold; RESOURCE_EXHAUSTED past it (-1: half of --max_memory_bytes; "
             "0: no limit beyond --max_memory_bytes)");
TENSORD_FLAG(int64_t, max_handles_per_client, 100000,
             "handles one client (as --max_resident_bytes_per_client counts clients) may hold, "
             "each also taking 1 KiB of --max_memory_bytes for its bookkeeping; "
             "RESOURCE_EXHAUSTED past it; in [1, 100000000]");
TENSORD_FLAG(int, max_chain_steps, 64,
             "the most steps a RunChain request may have; RESOURCE_EXHAUSTED past it; in "
             "[1, 4096]");
TENSORD_FLAG(std::string, advertise_address, "",
             "host:port clients reach this server at, named in every handle's replica "
             "(Kubernetes: $(POD_IP):50051); empty: the first --address, unless that is a "
             "wildcard (0.0.0.0, [::]): then none, and clients send handle calls over their "
             "target");

namespace tensorop::server {
namespace {

// The ranges of the numeric flags (out of range: a usage error naming flag and
// range). Generous, but each keeps a typo from becoming a server that never
// answers (2^31 worker threads) or one that cannot be stopped.
constexpr int64_t kMaxPort = 65535;
constexpr int kMaxWorkerThreads = 1024;
constexpr int kMaxQueuedRequests = 1 << 20;
// Health and reflection answers must fit, and a chunk plus its framing.
constexpr int64_t kMinMessageBytes = 4096;
constexpr int64_t kMaxRequestBytes = int64_t{1} << 50;  // 1 PiB
constexpr int kMaxOpenClQueueDepth = 1024;
constexpr int64_t kMaxStagingBytes = int64_t{1} << 40;  // 1 TiB
constexpr int kMaxSeconds = 86400;                      // one day
constexpr int kMaxShutdownSeconds = 3600;
constexpr int kMaxInjectedFailures = 1 << 20;
constexpr int kMaxStreams = 65536;

// What the command line said beyond the flag values themselves.
struct Parsed {
  bool help = false;
  bool version = false;
  // Every --address given, in order (the flag keeps only the last): tensord
  // listens on each.
  std::vector<std::string> addresses;
  // The flags given on the command line or in a flag file (a value equal to
  // the default still counts as given: --auto_opencl_min_bytes replaces the
  // model).
  std::set<std::string> given;
};

// The words of a --flagfile: one --name=value per line; blank lines and lines
// starting with # are skipped. (Kubernetes mounts the flags from a ConfigMap.)
absl::StatusOr<std::vector<Argument>> ReadFlagFile(absl::string_view path,
                                                   absl::string_view origin) {
  std::ifstream file{std::string(path)};
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, "--flagfile=", path, ": cannot read the file"));
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseFlagFile(text.str(), path);
}

bool IsTensordFlag(absl::string_view name) {
  const std::vector<std::string>& names = TensordFlagNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Every tensord flag back to its default, so that parsing starts from a clean
// slate (tests parse many command lines in one process).
void ResetFlags() {
  for (const std::string& name : TensordFlagNames()) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    flag->ParseFrom(flag->DefaultValue(), &error);
  }
}

// Parses --name=value and --name value, and --flagfile=PATH in place (later
// flags win) into the flags. Stops at --help or --version.
absl::StatusOr<Parsed> ParseFlags(const std::vector<std::string>& args) {
  Parsed parsed;
  std::vector<Argument> arguments;
  for (const std::string& arg : args) arguments.push_back({arg, ""});
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view arg = arguments[i].text;
    const std::string origin = arguments[i].origin;
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "--version" || arg == "-version") {
      parsed.version = true;
      return parsed;
    }
    if (!absl::StartsWith(arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat(origin, "unexpected argument \"", arg, "\""));
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
      return absl::InvalidArgumentError(absl::StrCat(origin, "--", name, " needs a value"));
    }
    if (name == "flagfile") {
      ASSIGN_OR_RETURN(std::vector<Argument> from_file, ReadFlagFile(value, origin));
      arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(i) + 1, from_file.begin(),
                       from_file.end());
      continue;
    }
    if (!IsTensordFlag(name)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, "unknown flag --", name));
    }
    if (name == "address" && std::find(parsed.addresses.begin(), parsed.addresses.end(), value) ==
                                 parsed.addresses.end()) {
      parsed.addresses.push_back(value);
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(origin, "--", name, "=", value, ": ", error));
    }
    parsed.given.insert(std::string(name));
  }
  return parsed;
}

// An integer flag's value, which must lie in [lo, hi]: out of range is a usage
// error naming the flag and the range ("--worker_threads=0 must be in [1, 1024]").
template <typename T>
absl::StatusOr<T> FlagInRange(const absl::Flag<T>& flag, absl::string_view name, T lo, T hi) {
  const T value = absl::GetFlag(flag);
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", value, " must be in [", lo, ", ", hi, "]"));
  }
  return value;
}

// Checks a HOST:PORT flag: a colon, and a port of digits in [0, 65535] (0: any
// free port). gRPC and cpp-httplib would otherwise take 99999 modulo 65536 or
// fail later with a vaguer message.
absl::Status CheckHostPort(absl::string_view name, const std::string& address,
                           absl::string_view empty_hint) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", address, ": expected HOST:PORT", empty_hint));
  }
  const std::string port_text = address.substr(colon + 1);
  int64_t port = -1;
  if (port_text.empty() || port_text.find_first_not_of("0123456789") != std::string::npos ||
      port_text.size() > 6 || !absl::SimpleAtoi(port_text, &port) || port > kMaxPort) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", address, ": the port must be in [0, ", kMaxPort, "]"));
  }
  return absl::OkStatus();
}

// Checks a unix:PATH (or unix:///PATH) address before gRPC sees it: gRPC
// reports a missing directory or a path that is not a socket only as "cannot
// listen". A socket left by an earlier run is replaced (gRPC unlinks it).
absl::Status CheckUnixAddress(const std::string& address) {
  if (absl::StartsWith(address, "unix-abstract:")) return absl::OkStatus();
  absl::string_view path = absl::string_view(address).substr(5);
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);  // unix:///abs -> /abs
  const std::string where = absl::StrCat("--address=", address, ": ");
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "expected unix:PATH or unix:///ABSOLUTE_PATH"));
  }
  // sockaddr_un.sun_path holds 108 bytes with the terminating NUL.
  if (path.size() > 107) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "the socket path has ", path.size(),
                     " bytes; a Unix socket path may have at most 107"));
  }
  const size_t slash = path.rfind('/');
  const std::string directory = slash == absl::string_view::npos
                                    ? "."
                                    : std::string(slash == 0 ? "/" : path.substr(0, slash));
  struct stat info {};
  if (stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "the directory ", directory, " does not exist"));
  }
  if (lstat(std::string(path).c_str(), &info) == 0 && !S_ISSOCK(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, std::string(path),
                     " exists and is not a socket; tensord replaces only a stale socket"));
  }
  return absl::OkStatus();
}

// The flags' values, checked, as a ServerConfig.
absl::StatusOr<ServerConfig> ValidatedConfig(const Parsed& parsed) {
  ServerConfig config;
  std::vector<std::string> given = parsed.addresses;
  if (given.empty()) given.push_back(absl::GetFlag(FLAGS_address));
  for (const std::string& address : given) {
    if (IsUnixAddress(address)) continue;
    RETURN_IF_ERROR(CheckHostPort("address", address, ", or unix:PATH"));
    config.addresses.push_back(address);
  }
  for (const std::string& address : given) {
    if (!IsUnixAddress(address)) continue;
    RETURN_IF_ERROR(CheckUnixAddress(address));
    config.addresses.push_back(address);
  }
  config.address = config.addresses.front();
  config.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  if (!config.metrics_address.empty()) {
    RETURN_IF_ERROR(
        CheckHostPort("metrics_address", config.metrics_address, ", or empty for no metrics"));
  }
  config.http_address = absl::GetFlag(FLAGS_http_address);
  if (!config.http_address.empty()) {
    RETURN_IF_ERROR(
        CheckHostPort("http_address", config.http_address, ", or empty for no HTTP API"));
  }
  config.echo = absl::GetFlag(FLAGS_echo);
  ASSIGN_OR_RETURN(config.scheduler.worker_threads,
                   FlagInRange(FLAGS_worker_threads, "worker_threads", 1, kMaxWorkerThreads));
  ASSIGN_OR_RETURN(
      config.scheduler.max_queued_requests,
      FlagInRange(FLAGS_max_queued_requests, "max_queued_requests", 1, kMaxQueuedRequests));
  const std::string backend = absl::GetFlag(FLAGS_backend);
  std::optional<v1::Backend> default_backend = ParseBackendName(backend);
  if (!default_backend.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", backend, ": expected ", kBackendNames));
  }
  config.scheduler.default_backend = *default_backend;

  ASSIGN_OR_RETURN(const int64_t message_bytes,
                   FlagInRange(FLAGS_max_message_bytes, "max_message_bytes", kMinMessageBytes,
                               int64_t{INT_MAX}));
  config.max_message_bytes = static_cast<int>(message_bytes);
  config.service.max_message_bytes = message_bytes;
  // A chunk plus its few bytes of framing must fit in one message.
  ASSIGN_OR_RETURN(config.service.chunk_bytes,
                   FlagInRange(FLAGS_chunk_bytes, "chunk_bytes", int64_t{1}, message_bytes - 64));
  ASSIGN_OR_RETURN(config.service.max_chain_steps,
                   FlagInRange(FLAGS_max_chain_steps, "max_chain_steps", 1, 4096));
  ASSIGN_OR_RETURN(
      config.service.limits.max_request_bytes,
      FlagInRange(FLAGS_max_request_bytes, "max_request_bytes", int64_t{1}, kMaxRequestBytes));
  ASSIGN_OR_RETURN(config.service.limits.max_tensor_elements,
                   FlagInRange(FLAGS_max_tensor_elements, "max_tensor_elements", int64_t{1},
                               kMaxTensorElements));
  const std::string backends = absl::GetFlag(FLAGS_backends);
  if (backends == "cpu") {
    config.opencl = false;
  } else if (backends != "cpu,opencl" && backends != "opencl,cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backends=", backends, ": expected cpu or cpu,opencl"));
  }
  config.opencl_filter = absl::GetFlag(FLAGS_opencl_devices);
  ASSIGN_OR_RETURN(
      config.devices.queue_depth,
      FlagInRange(FLAGS_opencl_queue_depth, "opencl_queue_depth", 1, kMaxOpenClQueueDepth));
  ASSIGN_OR_RETURN(config.device.staging_bytes,
                   FlagInRange(FLAGS_opencl_staging_bytes, "opencl_staging_bytes", int64_t{0},
                               kMaxStagingBytes));
  ASSIGN_OR_RETURN(config.devices.max_resident_bytes,
                   FlagInRange(FLAGS_opencl_max_resident_bytes, "opencl_max_resident_bytes",
                               int64_t{-1}, std::numeric_limits<int64_t>::max()));
  ASSIGN_OR_RETURN(const int max_wait, FlagInRange(FLAGS_opencl_max_wait_seconds,
                                                   "opencl_max_wait_seconds", 0, kMaxSeconds));
  config.devices.max_wait = std::chrono::seconds(max_wait);
  ASSIGN_OR_RETURN(const int unhealthy, FlagInRange(FLAGS_opencl_unhealthy_seconds,
                                                    "opencl_unhealthy_seconds", 0, kMaxSeconds));
  config.devices.unhealthy_for = std::chrono::seconds(unhealthy);
  ASSIGN_OR_RETURN(
      config.devices.inject_failures,
      FlagInRange(FLAGS_inject_opencl_failures, "inject_opencl_failures", 0, kMaxInjectedFailures));
  ASSIGN_OR_RETURN(const int64_t auto_min_bytes,
                   FlagInRange(FLAGS_auto_opencl_min_bytes, "auto_opencl_min_bytes", int64_t{0},
                               std::numeric_limits<int64_t>::max()));
  if (parsed.given.count("auto_opencl_min_bytes") > 0) {
    config.scheduler.auto_opencl_min_bytes = auto_min_bytes;
  }
  const std::string calibrate = absl::GetFlag(FLAGS_calibrate);
  if (calibrate != "on" && calibrate != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--calibrate=", calibrate, ": expected on or off"));
  }
  config.calibrate = calibrate == "on";
  ASSIGN_OR_RETURN(const int grace, FlagInRange(FLAGS_shutdown_grace_seconds,
                                                "shutdown_grace_seconds", 0, kMaxShutdownSeconds));
  config.grace = std::chrono::seconds(grace);
  ASSIGN_OR_RETURN(const int drain,
                   FlagInRange(FLAGS_drain_seconds, "drain_seconds", 0, kMaxShutdownSeconds));
  config.drain = std::chrono::seconds(drain);
  ASSIGN_OR_RETURN(config.max_connection_age_seconds,
                   FlagInRange(FLAGS_max_connection_age_seconds, "max_connection_age_seconds", 0,
                               INT_MAX / 1000));
  ASSIGN_OR_RETURN(
      config.max_concurrent_streams,
      FlagInRange(FLAGS_max_concurrent_streams, "max_concurrent_streams", 1, kMaxStreams));
  ASSIGN_OR_RETURN(config.max_connection_idle_seconds,
                   FlagInRange(FLAGS_max_connection_idle_seconds, "max_connection_idle_seconds", 0,
                               kMaxSeconds));
  config.security.tls = {absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
                         absl::GetFlag(FLAGS_tls_client_ca_file)};
  config.security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  const std::string reflection = absl::GetFlag(FLAGS_reflection);
  std::optional<ReflectionAccess> access = ParseReflectionAccess(reflection);
  if (!access.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reflection=", reflection, ": expected on, off or auth"));
  }
  config.security.reflection = *access;
  if (absl::Status flags = CheckSecurityFlags(config.security); !flags.ok()) {
    return absl::InvalidArgumentError(flags.message());
  }
  config.health_address = absl::GetFlag(FLAGS_health_address);
  if (!config.health_address.empty() && config.health_address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health_address=", config.health_address, ": expected HOST:PORT"));
  }
  config.max_memory_bytes = absl::GetFlag(FLAGS_max_memory_bytes);
  if (config.max_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_memory_bytes=", config.max_memory_bytes, ": must not be negative"));
  }
  if (config.max_memory_bytes == 0) {
    const MemoryLimit limit = ProcessMemoryLimit();
    config.max_memory_bytes = std::max<int64_t>(limit.bytes / 2, 1);
    config.max_memory_source =
        absl::StrCat("half of the ", limit.bytes, " bytes of ", limit.source);
  }
  config.buffer_pool_bytes = absl::GetFlag(FLAGS_buffer_pool_bytes);
  if (config.buffer_pool_bytes < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--buffer_pool_bytes=", config.buffer_pool_bytes,
                     ": must be -1 (a quarter of "
                     "--max_memory_bytes), 0 (none) or a byte count"));
  }
  if (config.buffer_pool_bytes == -1) config.buffer_pool_bytes = config.max_memory_bytes / 4;
  ASSIGN_OR_RETURN(const int idle,
                   FlagInRange(FLAGS_idle_timeout_seconds, "idle_timeout_seconds", 0, kMaxSeconds));
  config.service.idle_timeout = absl::Seconds(idle);
  ASSIGN_OR_RETURN(
      config.shared_memory_idle_seconds,
      FlagInRange(FLAGS_shared_memory_idle_seconds, "shared_memory_idle_seconds", 0, kMaxSeconds));
  config.shared_memory_remote = absl::GetFlag(FLAGS_shared_memory_remote);
  ASSIGN_OR_RETURN(const int handle_ttl,
                   FlagInRange(FLAGS_handle_ttl_seconds, "handle_ttl_seconds", 1, kMaxSeconds));
  ASSIGN_OR_RETURN(
      const int handle_max_ttl,
      FlagInRange(FLAGS_handle_max_ttl_seconds, "handle_max_ttl_seconds", 1, 30 * kMaxSeconds));
  config.handles.default_ttl = absl::Seconds(handle_ttl);
  config.handles.max_ttl = absl::Seconds(std::max(handle_ttl, handle_max_ttl));
  config.handles.max_bytes_per_client = absl::GetFlag(FLAGS_max_resident_bytes_per_client);
  if (config.handles.max_bytes_per_client < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_resident_bytes_per_client=", config.handles.max_bytes_per_client,
                     ": must be -1 (half of --max_memory_bytes), 0 (no limit) or a byte count"));
  }
  if (config.handles.max_bytes_per_client == -1) {
    config.handles.max_bytes_per_client = config.max_memory_bytes / 2;
  }
  ASSIGN_OR_RETURN(config.handles.max_handles_per_client,
                   FlagInRange(FLAGS_max_handles_per_client, "max_handles_per_client", int64_t{1},
                               int64_t{100000000}));
  config.handles.replica = absl::GetFlag(FLAGS_advertise_address);
  if (config.handles.replica.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--advertise_address is ", config.handles.replica.size(), " bytes long; at most 255"));
  }
  return config;
}

}  // namespace

bool IsUnixAddress(absl::string_view address) {
  return absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:");
}

bool IsWildcardAddress(absl::string_view address) {
  if (IsUnixAddress(address)) return false;
  absl::string_view host = address.substr(0, address.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  if (host.empty()) return true;
  const std::string text(host);
  unsigned char bytes[16] = {};
  const bool parsed =
      inet_pton(AF_INET, text.c_str(), bytes) == 1 || inet_pton(AF_INET6, text.c_str(), bytes) == 1;
  return parsed && std::all_of(std::begin(bytes), std::end(bytes),
                               [](unsigned char byte) { return byte == 0; });
}

const std::vector<std::string>& TensordFlagNames() { return DefinedFlagNames(); }

std::string FlagsHelp() {
  std::string help = "usage: tensord [--flag=value ...]\n\n";
  for (const std::string& name : TensordFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppend(&help, "  --", name, " (default ", flag->DefaultValue(), ")\n      ",
                    flag->Help(), "\n");
  }
  absl::StrAppend(&help,
                  "  --flagfile=PATH\n      reads flags from PATH, one --name=value per line "
                  "(# comments); later flags win\n");
  return help;
}

absl::StatusOr<ServerConfig> ConfigFromFlags(const std::vector<std::string>& args) {
  ResetFlags();
  ASSIGN_OR_RETURN(const Parsed parsed, ParseFlags(args));
  if (parsed.help || parsed.version) {
    ServerConfig config;
    config.help = parsed.help;
    config.version = parsed.version;
    return config;
  }
  return ValidatedConfig(parsed);
}

}  // namespace tensorop::server
