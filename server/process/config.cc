// tensord's flags, and their parsing and validation into a ServerConfig. (About
// 820 lines, past the project's ~600: each flag's help text is its whole
// reference, docs/flags.md generated from it, so the definitions are long, and
// the definitions must share this file with the registries their macros fill.)
#include "server/process/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
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
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/limits.h"
#include "core/nearest_name.h"
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

// Each flag's default as a reader says it, where its value alone does not
// (computed from the machine, or a sentinel such as -1); else absent.
std::map<std::string, std::string, std::less<>>& ShownDefaults() {
  static auto* shown = new std::map<std::string, std::string, std::less<>>();
  return *shown;
}

struct ListedFlag {
  ListedFlag(const char* name, const char* shown_default) {
    DefinedFlagNames().emplace_back(name);
    if (*shown_default != '\0') ShownDefaults().emplace(name, shown_default);
  }
};

// The numeric flags' ranges in definition order, each appended as its
// TENSORD_RANGED_FLAG is registered.
std::vector<tensorop::server::FlagRange>& DefinedFlagRanges() {
  static auto* ranges = new std::vector<tensorop::server::FlagRange>();
  return *ranges;
}

// The range of the flag `name`; nullptr for a flag without one.
const tensorop::server::FlagRange* RangeOf(absl::string_view name) {
  for (const tensorop::server::FlagRange& range : DefinedFlagRanges()) {
    if (range.name == name) return &range;
  }
  return nullptr;
}

struct RangedFlag {
  RangedFlag(const char* name, int64_t lo, int64_t hi, const char* hi_text = "") {
    DefinedFlagRanges().push_back({.name = name, .lo = lo, .hi = hi, .hi_text = hi_text});
  }
};

// The bounds the ranges are made of. Generous, but each keeps a typo from
// becoming a server that never answers (2^31 worker threads) or one that
// cannot be stopped.
constexpr int64_t kMax63 = std::numeric_limits<int64_t>::max();
constexpr int kMaxWorkerThreads = 1024;
constexpr int kMaxQueuedRequests = 1 << 20;
// Health and reflection answers must fit, and a chunk plus its framing.
constexpr int64_t kMinMessageBytes = 4096;
constexpr int64_t kDefaultMessageBytes = int64_t{64} << 20;
constexpr int64_t kChunkFraming = 64;  // a chunk plus this much framing is one message
constexpr int64_t kMaxRequestBytes = int64_t{1} << 50;  // 1 PiB
constexpr int kMaxOpenClQueueDepth = 1024;
constexpr int64_t kMaxStagingBytes = int64_t{1} << 40;  // 1 TiB
constexpr int kMaxSeconds = 86400;                      // one day
constexpr int kMaxShutdownSeconds = 3600;
constexpr int kMaxInjectedFailures = 1 << 20;
constexpr int kMaxStreams = 65536;

}  // namespace

// ABSL_FLAG, and the flag listed for --help (both forms) and the parser. The
// help text is the flag's whole reference: docs/flags.md is generated from it
// (tensord --help=markdown).
#define TENSORD_FLAG_SHOWN(Type, name, default_value, shown_default, help) \
  ABSL_FLAG(Type, name, default_value, help);                              \
  static const ListedFlag tensord_listed_flag_##name(#name, shown_default)
#define TENSORD_FLAG(Type, name, default_value, help) \
  TENSORD_FLAG_SHOWN(Type, name, default_value, "", help)
// A numeric flag and its range [lo, hi] (FlagRange): --help appends "in [lo,
// hi]" to `help`, and ValidatedConfig refuses a value outside it.
#define TENSORD_RANGED_FLAG_SHOWN(Type, name, lo, hi, default_value, shown_default, help) \
  TENSORD_FLAG_SHOWN(Type, name, default_value, shown_default, help);                     \
  static const RangedFlag tensord_ranged_flag_##name(#name, lo, hi)
#define TENSORD_RANGED_FLAG(Type, name, lo, hi, default_value, help) \
  TENSORD_RANGED_FLAG_SHOWN(Type, name, lo, hi, default_value, "", help)

TENSORD_FLAG(std::string, address, "0.0.0.0:50051",
             "where to listen (`:0` picks a port; the chosen one is printed); port in [0, 65535]. "
             "May repeat; `unix:PATH` or `unix:///ABSOLUTE_PATH` is a Unix domain socket "
             "(docs/colocated.md). One `tensord listening on ADDRESS` line per address, TCP ones "
             "first");
TENSORD_RANGED_FLAG_SHOWN(
    int, worker_threads, 1, kMaxWorkerThreads,
    static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), "the number of cores",
    "threads running requests: as many for CPU and AUTO requests, "
    "and as many oneTBB workers for OPENCL requests and the parallel loops of "
    "copies over 1 MiB");
TENSORD_RANGED_FLAG(int64_t, max_message_bytes, kMinMessageBytes, int64_t{INT_MAX},
                    kDefaultMessageBytes,
                    "largest gRPC message in either direction (RESOURCE_EXHAUSTED above)");
TENSORD_RANGED_FLAG(int64_t, max_request_bytes, 1, kMaxRequestBytes, int64_t{4} << 30,
                    "inputs plus output buffers of one request (RESOURCE_EXHAUSTED above)");
TENSORD_RANGED_FLAG_SHOWN(int64_t, max_tensor_elements, 1, tensorop::kMaxTensorElements,
                          tensorop::kMaxTensorElements, "2^32-1",
                          "elements of any one tensor (RESOURCE_EXHAUSTED above)");
TENSORD_FLAG(int64_t, chunk_bytes, int64_t{1} << 20, "data bytes per streamed result part");
static const RangedFlag tensord_ranged_flag_chunk_bytes("chunk_bytes", 1,
                                                        kDefaultMessageBytes - kChunkFraming,
                                                        "`--max_message_bytes` - 64");
TENSORD_FLAG(std::string, backend, "auto",
             "where requests asking for AUTO run: `auto` (placed by the cost model), `cpu` or "
             "`opencl`");
TENSORD_RANGED_FLAG(int, max_queued_requests, 1, kMaxQueuedRequests, 256,
                    "requests queued or running (RESOURCE_EXHAUSTED above)");
TENSORD_RANGED_FLAG(
    int, shutdown_grace_seconds, 0, kMaxShutdownSeconds, 30,
    "on SIGTERM/SIGINT, after `--drain_seconds`, within this period: a server holding "
    "handles serves only calls on them (every "
    "other call and every `Put` is `UNAVAILABLE`, which clients retry on another "
    "replica) while calls on them come (until none came for 3 s, no handle is left, "
    "or the period ends: docs/handles.md); then keep "
    "answering until no call is open and the kernel has delivered every byte already "
    "sent (at most half of what is left of it: gRPC closes a connection as soon as its "
    "last call ends after GOAWAY, and a close then can cut the tail of a large answer), "
    "stop accepting, let in-flight calls finish; then they are cancelled and their work "
    "stops at its next stop check; the process exits (status 1) 5 s after the grace "
    "period even if something did not stop, and at once on a second SIGTERM/SIGINT; "
    "a `stopped` event says what was cut short");
TENSORD_RANGED_FLAG(
    int, drain_seconds, 0, kMaxShutdownSeconds, 0,
    "on SIGTERM/SIGINT, first report NOT_SERVING this long while still answering, so "
    "health-checking clients move away (Kubernetes: 5)");
TENSORD_FLAG(std::string, request_log, "all",
             "which calls get a JSON line on stderr: `all`, `errors` (failed calls only), "
             "`sample:N` (every failed call and one OK call in N) or `off`; events, gRPC's and "
             "other libraries' messages are logged regardless");
TENSORD_FLAG(std::string, backends, "cpu,opencl",
             "enabled backends (`cpu` alone skips OpenCL discovery)");
TENSORD_FLAG_SHOWN(std::string, opencl_devices, "", "(all)",
                   "use only OpenCL devices whose name contains this text");
TENSORD_RANGED_FLAG(
    int, opencl_queue_depth, 1, kMaxOpenClQueueDepth, 8,
    "requests queued or running per device; an explicit OPENCL request that finds its "
    "device full waits in the device's FIFO (holding no worker thread) for "
    "`--opencl_max_wait_seconds`; AUTO requests go to the CPU instead");
TENSORD_RANGED_FLAG(
    int64_t, opencl_staging_bytes, 0, kMaxStagingBytes, int64_t{64} << 20,
    "pinned host staging per device (`CL_MEM_ALLOC_HOST_PTR` buffers mapped once, "
    "allocated in chunks of an eighth as transfers need them, at most 8 MiB each) "
    "through which inputs are uploaded and outputs downloaded, host copies overlapping "
    "the DMA; reserved against `--max_memory_bytes` at startup for every device opened "
    "(startup fails, exit 2, naming both flags when it does not fit); 0: no staging, "
    "transfers from the caller's pageable memory");
TENSORD_RANGED_FLAG_SHOWN(
    int64_t, opencl_max_resident_bytes, -1, kMax63, -1, "70% of each device's memory",
    "bytes of handles (`Put` with `OPENCL`, kept outputs of ops on a device) each "
    "OpenCL device may hold, in buffers of their exact size outside its buffer "
    "pool; past it `RESOURCE_EXHAUSTED` naming the flag; -1: the default");
TENSORD_RANGED_FLAG_SHOWN(
    int64_t, auto_opencl_min_bytes, 0, kMax63, std::numeric_limits<int64_t>::max(),
    "(none: the cost model)",
    "when given, replaces the cost model: AUTO requests moving at least this many "
    "output bytes go to a device, smaller ones to the CPU");
TENSORD_FLAG(std::string, calibrate, "on",
             "`on`: right after startup, a background thread measures AUTO's cost model (at most "
             "2 s of measuring; program builds not counted): each OpenCL device's upload and "
             "download rates, fixed cost per request, copy and scatter kernel rates, and oneTBB's "
             "copy and scatter rates and fixed cost at `--worker_threads`; logged as one "
             "`{\"event\":\"calibration\",...}` line and exported on `/metrics`. AUTO then runs "
             "each request where its predicted time is least (docs/backends.md). Until it ends, "
             "and with `off`, AUTO runs on the CPU");
TENSORD_RANGED_FLAG(int, opencl_unhealthy_seconds, 0, kMaxSeconds, 30,
                    "a failed device is left alone this long; its requests are retried on the CPU");
TENSORD_RANGED_FLAG(int, inject_opencl_failures, 0, kMaxInjectedFailures, 0,
                    "testing aid: the first N device executions fail like a broken device");
TENSORD_FLAG(std::string, metrics_address, "127.0.0.1:9464",
             "Prometheus text format at `GET /metrics` (`:0` picks a port, printed as `tensord "
             "metrics on HOST:PORT`; empty: off); loopback unless told otherwise (the image: "
             "`0.0.0.0:9464`; Kubernetes: the pod IP); port in [0, 65535]");
TENSORD_FLAG(std::string, http_address, "0.0.0.0:8000",
             "the Open Inference Protocol (KServe v2) over HTTP/REST, as Triton serves it (`:0` "
             "picks a port, printed as `tensord http on HOST:PORT`; empty: off); HTTPS when "
             "`--tls_cert_file` is set (the gRPC port's certificate, key and client CA); port in "
             "[0, 65535]");
TENSORD_RANGED_FLAG(int, http_keep_alive_seconds, 0, kMaxShutdownSeconds, 60,
                    "how long an answered `--http_address` connection stays open for its next "
                    "request (HTTP/1.1 keep-alive; the idle ones are the first closed when 256 "
                    "connections wait); 0: one request per connection");
TENSORD_RANGED_FLAG(
    int, max_connection_age_seconds, 0, INT_MAX / 1000, 0,
    "close each client connection after about this long (gracefully), so DNS-balancing "
    "clients re-resolve and find new replicas (Kubernetes: 300)");
TENSORD_RANGED_FLAG(int, max_concurrent_streams, 1, kMaxStreams, 128,
                    "calls open at once on one client connection (HTTP/2 "
                    "`SETTINGS_MAX_CONCURRENT_STREAMS`)");
TENSORD_RANGED_FLAG(int, max_connection_idle_seconds, 0, kMaxSeconds, 600,
                    "close a client connection with no call open this long (gracefully); 0: never");
TENSORD_FLAG(bool, echo, false,
             "load-test baseline: `Run` answers zero-filled outputs of the right shape at once; "
             "nothing is executed, logged or counted; other methods are UNIMPLEMENTED");
// Transport security (docs/security.md; server/security/security.h).
TENSORD_FLAG(std::string, tls_cert_file, "",
             "PEM certificate chain (its key: `--tls_key_file`): `--address` serves TLS only "
             "(reloaded when the files change; docs/security.md)");
TENSORD_FLAG(std::string, tls_key_file, "",
             "PEM unencrypted private key of `--tls_cert_file` (reloaded with it)");
TENSORD_FLAG(std::string, tls_client_ca_file, "",
             "PEM CA certificates: every client must present a certificate signed by one (mutual "
             "TLS)");
TENSORD_FLAG(std::string, auth_token_file, "",
             "accepted bearer tokens, one `NAME:TOKEN` (or bare `TOKEN`) a line; calls to "
             "TensorOp without a valid `authorization: Bearer` are UNAUTHENTICATED; reread on "
             "change and on SIGHUP; needs TLS");
TENSORD_FLAG(std::string, reflection, "auth",
             "server reflection: `on` (open to all), `off`, or `auth` (needs a token when "
             "`--auth_token_file` is set, else open)");
TENSORD_FLAG_SHOWN(std::string, health_address, "", "(none)",
                   "a second, plaintext listener serving only `grpc.health.v1` with the same "
                   "statuses, for kubelet probes when `--address` is TLS (`:0` picks a port, "
                   "printed as `tensord health on HOST:PORT`)");
TENSORD_RANGED_FLAG_SHOWN(
    int64_t, max_memory_bytes, 0, kMax63, 0, "half the memory the process may use",
    "bytes all calls together may hold (requests as received and parsed, output "
    "buffers, answers waiting to be sent, streamed results, RunBidi windows); a "
    "call that would pass it is RESOURCE_EXHAUSTED naming the flag. Default: half "
    "the cgroup's `memory.max` (v1: `memory.limit_in_bytes`) when set, else half "
    "the physical RAM (also for 0); printed at startup as "
    "`{\"event\":\"memory_budget\",...}`");
TENSORD_RANGED_FLAG_SHOWN(
    int64_t, buffer_pool_bytes, -1, kMax63, -1, "a quarter of `--max_memory_bytes`",
    "bytes of large (4 MiB and more, whole 2 MiB huge pages) freed output buffers "
    "kept for the next call of the same rounded size, which then writes into "
    "resident pages instead of faulting in fresh zeroed ones (on a 256 MiB result "
    "that costs more than the copy itself); every kept byte is reserved in "
    "`--max_memory_bytes` and freed first when a call needs the room, and a buffer "
    "unused for 10 s is freed, so an idle server gives the memory back; -1: the "
    "default; 0: none (`tensorop_buffer_pool_bytes`, "
    "`tensorop_buffer_pool_reuses_total`, "
    "`tensorop_buffer_pool_allocations_total`)");
TENSORD_RANGED_FLAG(
    int, idle_timeout_seconds, 0, kMaxSeconds, 60,
    "a call whose client sends nothing (a RunChunked upload before its half-close) or "
    "takes nothing (a unary answer, a result part, a RunBidi answer) this long is "
    "cancelled (CANCELLED) and its memory freed; 0: never");
TENSORD_RANGED_FLAG(
    int, opencl_max_wait_seconds, 0, kMaxSeconds, 30,
    "how long an OPENCL request waits for a slot of a busy device (or until its own "
    "deadline, or its cancellation): past it DEADLINE_EXCEEDED naming the wait and this "
    "flag; 0: no waiting");
TENSORD_RANGED_FLAG(
    int, shared_memory_idle_seconds, 0, kMaxSeconds, 300,
    "a shared memory region no request used this long is unmapped (a client that died "
    "leaves no mapping behind); 0: never");
TENSORD_FLAG(bool, shared_memory_remote, false,
             "let clients that are not on this host (neither the Unix socket nor a loopback "
             "address) register shared memory regions; off, since a remote client did not make "
             "the objects in this host's `/dev/shm` and could only map other processes' memory "
             "(`PERMISSION_DENIED`)");

TENSORD_RANGED_FLAG(int, handle_ttl_seconds, 1, kMaxSeconds, 600,
                    "a handle (`Put`, `OutputDesc.keep`) no call used this long is released");
TENSORD_RANGED_FLAG(
    int, handle_max_ttl_seconds, 1, 30 * int64_t{kMaxSeconds}, 86400,
    "the longest time to live a `Put` may ask for (`ttl_seconds`; longer is clamped)");
TENSORD_RANGED_FLAG_SHOWN(
    int64_t, max_resident_bytes_per_client, -1, kMax63, -1, "half of `--max_memory_bytes`",
    "bytes of handles one client (its token name or certificate subject, else its "
    "IP address) may hold; past it `RESOURCE_EXHAUSTED` naming the flag; -1: the "
    "default; 0: no limit beyond `--max_memory_bytes`");
TENSORD_RANGED_FLAG(
    int64_t, max_handles_per_client, 1, 100000000, 100000,
    "handles one client (counted as for `--max_resident_bytes_per_client`) may hold; "
    "past it `RESOURCE_EXHAUSTED` naming the flag; each handle also reserves 1 KiB of "
    "`--max_memory_bytes` for its bookkeeping");
TENSORD_RANGED_FLAG(
    int, max_chain_steps, 1, 4096, 64,
    "the most steps a `RunChain` request may have; more is `RESOURCE_EXHAUSTED` naming "
    "the flag");
TENSORD_FLAG_SHOWN(
    std::string, advertise_address, "", "the first `--address`, unless a wildcard",
    "`host:port` clients reach this server at, named in every handle's `replica`, "
    "where clients send every call on the handle (Kubernetes: `$(POD_IP):50051`); "
    "by default the first `--address`, none when that is a wildcard (`0.0.0.0`, `[::]`); "
    "without one, clients send handle calls over their target; at most 255 bytes");

namespace tensorop::server {
namespace {

constexpr int64_t kMaxPort = 65535;

// What the command line said beyond the flag values themselves.
struct Parsed {
  bool help = false;
  bool help_markdown = false;
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

// "; did you mean --address?" for a mistyped flag near enough to one
// (core/nearest_name.h), else "".
std::string DidYouMean(absl::string_view name) {
  std::vector<std::string> names = TensordFlagNames();
  names.insert(names.end(), {"flagfile", "help", "version"});
  const std::optional<std::string> nearest = NearestName(name, names);
  return nearest.has_value() ? absl::StrCat("; did you mean --", *nearest, "?") : "";
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
    if (arg == "--help" || arg == "-h" || arg == "-help" || arg == "--help=markdown") {
      parsed.help = true;
      parsed.help_markdown = arg == "--help=markdown";
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
    const size_t equals = arg.find('=');
    const absl::string_view name = arg.substr(0, equals);
    // Before its value: a mistyped flag is told as such, not as one needing a value.
    if (name != "flagfile" && !IsTensordFlag(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, "unknown flag --", name, DidYouMean(name)));
    }
    std::string value;
    if (equals != absl::string_view::npos) {
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

// A numeric flag's value, which must lie in its range (TENSORD_RANGED_FLAG),
// with `hi_now` for a bound that follows another flag: out of range is a usage
// error naming the flag and the range ("--worker_threads=0 must be in [1, 1024]").
template <typename T>
absl::StatusOr<T> FlagInRange(const absl::Flag<T>& flag,
                              std::optional<int64_t> hi_now = std::nullopt) {
  const absl::string_view name = absl::GetFlagReflectionHandle(flag).Name();
  const FlagRange* range = RangeOf(name);
  if (range == nullptr) {
    return absl::InternalError(absl::StrCat("--", name, " is not a TENSORD_RANGED_FLAG"));
  }
  const int64_t hi = hi_now.value_or(range->hi);
  const T value = absl::GetFlag(flag);
  if (value < range->lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", value, " must be in [", range->lo, ", ", hi, "]"));
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
// --address (each), --metrics_address, --http_address, --echo.
absl::Status ListenerFlags(const Parsed& parsed, ServerConfig& config) {
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
  return absl::OkStatus();
}

// The workers, the default backend, and the message and request limits.
absl::Status RequestFlags(ServerConfig& config) {
  ASSIGN_OR_RETURN(config.scheduler.worker_threads, FlagInRange(FLAGS_worker_threads));
  ASSIGN_OR_RETURN(config.scheduler.max_queued_requests, FlagInRange(FLAGS_max_queued_requests));
  const std::string backend = absl::GetFlag(FLAGS_backend);
  std::optional<v1::Backend> default_backend = ParseBackendName(backend);
  if (!default_backend.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", backend, ": expected ", kBackendNames));
  }
  config.scheduler.default_backend = *default_backend;

  ASSIGN_OR_RETURN(const int64_t message_bytes, FlagInRange(FLAGS_max_message_bytes));
  config.max_message_bytes = static_cast<int>(message_bytes);
  config.service.max_message_bytes = message_bytes;
  // A chunk plus its few bytes of framing must fit in one message.
  ASSIGN_OR_RETURN(config.service.chunk_bytes,
                   FlagInRange(FLAGS_chunk_bytes, message_bytes - kChunkFraming));
  ASSIGN_OR_RETURN(config.service.max_chain_steps, FlagInRange(FLAGS_max_chain_steps));
  ASSIGN_OR_RETURN(config.service.limits.max_request_bytes, FlagInRange(FLAGS_max_request_bytes));
  ASSIGN_OR_RETURN(config.service.limits.max_tensor_elements,
                   FlagInRange(FLAGS_max_tensor_elements));
  return absl::OkStatus();
}

// --backends and the OpenCL devices' flags.
absl::Status OpenClFlags(const Parsed& parsed, ServerConfig& config) {
  const std::string backends = absl::GetFlag(FLAGS_backends);
  if (backends == "cpu") {
    config.opencl = false;
  } else if (backends != "cpu,opencl" && backends != "opencl,cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backends=", backends, ": expected cpu or cpu,opencl"));
  }
  config.opencl_filter = absl::GetFlag(FLAGS_opencl_devices);
  ASSIGN_OR_RETURN(config.devices.queue_depth, FlagInRange(FLAGS_opencl_queue_depth));
  ASSIGN_OR_RETURN(config.device.staging_bytes, FlagInRange(FLAGS_opencl_staging_bytes));
  ASSIGN_OR_RETURN(config.devices.max_resident_bytes, FlagInRange(FLAGS_opencl_max_resident_bytes));
  ASSIGN_OR_RETURN(const int max_wait, FlagInRange(FLAGS_opencl_max_wait_seconds));
  config.devices.max_wait = std::chrono::seconds(max_wait);
  ASSIGN_OR_RETURN(const int unhealthy, FlagInRange(FLAGS_opencl_unhealthy_seconds));
  config.devices.unhealthy_for = std::chrono::seconds(unhealthy);
  ASSIGN_OR_RETURN(config.devices.inject_failures, FlagInRange(FLAGS_inject_opencl_failures));
  ASSIGN_OR_RETURN(const int64_t auto_min_bytes, FlagInRange(FLAGS_auto_opencl_min_bytes));
  if (parsed.given.count("auto_opencl_min_bytes") > 0) {
    config.scheduler.auto_opencl_min_bytes = auto_min_bytes;
  }
  return absl::OkStatus();
}

// Calibration, the stop, the request log and the connections' limits.
absl::Status LifecycleFlags(ServerConfig& config) {
  const std::string calibrate = absl::GetFlag(FLAGS_calibrate);
  if (calibrate != "on" && calibrate != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--calibrate=", calibrate, ": expected on or off"));
  }
  config.calibrate = calibrate == "on";
  ASSIGN_OR_RETURN(const int grace, FlagInRange(FLAGS_shutdown_grace_seconds));
  config.grace = std::chrono::seconds(grace);
  ASSIGN_OR_RETURN(const int drain, FlagInRange(FLAGS_drain_seconds));
  config.drain = std::chrono::seconds(drain);
  ASSIGN_OR_RETURN(config.request_log, ParseRequestLogPolicy(absl::GetFlag(FLAGS_request_log)));
  ASSIGN_OR_RETURN(config.http_keep_alive_seconds, FlagInRange(FLAGS_http_keep_alive_seconds));
  ASSIGN_OR_RETURN(config.max_connection_age_seconds,
                   FlagInRange(FLAGS_max_connection_age_seconds));
  ASSIGN_OR_RETURN(config.max_concurrent_streams, FlagInRange(FLAGS_max_concurrent_streams));
  ASSIGN_OR_RETURN(config.max_connection_idle_seconds,
                   FlagInRange(FLAGS_max_connection_idle_seconds));
  return absl::OkStatus();
}

// TLS, tokens, reflection and the health listener.
absl::Status SecurityFlags(ServerConfig& config) {
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
  return absl::OkStatus();
}

// The memory budget, the buffer pool, idle calls, shared memory and handles.
absl::Status MemoryAndHandleFlags(ServerConfig& config) {
  ASSIGN_OR_RETURN(config.max_memory_bytes, FlagInRange(FLAGS_max_memory_bytes));
  if (config.max_memory_bytes == 0) {
    const MemoryLimit limit = ProcessMemoryLimit();
    config.max_memory_bytes = std::max<int64_t>(limit.bytes / 2, 1);
    config.max_memory_source =
        absl::StrCat("half of the ", limit.bytes, " bytes of ", limit.source);
  }
  ASSIGN_OR_RETURN(config.buffer_pool_bytes, FlagInRange(FLAGS_buffer_pool_bytes));
  if (config.buffer_pool_bytes == -1) config.buffer_pool_bytes = config.max_memory_bytes / 4;
  ASSIGN_OR_RETURN(const int idle, FlagInRange(FLAGS_idle_timeout_seconds));
  config.service.idle_timeout = absl::Seconds(idle);
  ASSIGN_OR_RETURN(config.shared_memory_idle_seconds,
                   FlagInRange(FLAGS_shared_memory_idle_seconds));
  config.shared_memory_remote = absl::GetFlag(FLAGS_shared_memory_remote);
  ASSIGN_OR_RETURN(const int handle_ttl, FlagInRange(FLAGS_handle_ttl_seconds));
  ASSIGN_OR_RETURN(const int handle_max_ttl, FlagInRange(FLAGS_handle_max_ttl_seconds));
  config.handles.default_ttl = absl::Seconds(handle_ttl);
  config.handles.max_ttl = absl::Seconds(std::max(handle_ttl, handle_max_ttl));
  ASSIGN_OR_RETURN(config.handles.max_bytes_per_client,
                   FlagInRange(FLAGS_max_resident_bytes_per_client));
  if (config.handles.max_bytes_per_client == -1) {
    config.handles.max_bytes_per_client = config.max_memory_bytes / 2;
  }
  ASSIGN_OR_RETURN(config.handles.max_handles_per_client,
                   FlagInRange(FLAGS_max_handles_per_client));
  config.handles.replica = absl::GetFlag(FLAGS_advertise_address);
  if (config.handles.replica.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--advertise_address is ", config.handles.replica.size(), " bytes long; at most 255"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerConfig> ValidatedConfig(const Parsed& parsed) {
  ServerConfig config;
  RETURN_IF_ERROR(ListenerFlags(parsed, config));
  RETURN_IF_ERROR(RequestFlags(config));
  RETURN_IF_ERROR(OpenClFlags(parsed, config));
  RETURN_IF_ERROR(LifecycleFlags(config));
  RETURN_IF_ERROR(SecurityFlags(config));
  RETURN_IF_ERROR(MemoryAndHandleFlags(config));
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

const std::vector<FlagRange>& TensordFlagRanges() { return DefinedFlagRanges(); }

namespace {

constexpr absl::string_view kFlagfileHelp =
    "read flags from a file, one `--name=value` per line, `#` comments; may repeat, later "
    "flags win (Kubernetes mounts them from a ConfigMap)";

// A flag's default as --help and docs/flags.md say it: its shown default,
// else its value (as code in Markdown), sizes of whole MiB or GiB also in
// those units.
std::string ShownDefault(const std::string& name, const absl::CommandLineFlag& flag,
                         bool markdown) {
  auto shown = ShownDefaults().find(name);
  if (shown != ShownDefaults().end()) return shown->second;
  const std::string value = flag.DefaultValue();
  if (value.empty()) return value;
  const std::string code = markdown ? absl::StrCat("`", value, "`") : value;
  int64_t bytes = 0;
  if (absl::EndsWith(name, "_bytes") && absl::SimpleAtoi(value, &bytes) && bytes > 0) {
    constexpr int64_t kMiB = int64_t{1} << 20;
    constexpr int64_t kGiB = int64_t{1} << 30;
    if (bytes % kGiB == 0) return absl::StrCat(code, " (", bytes / kGiB, " GiB)");
    if (bytes % kMiB == 0) return absl::StrCat(code, " (", bytes / kMiB, " MiB)");
  }
  return code;
}

// A bound as --help says it: 2^k or 2^k-1 from 2^20 up, else its digits.
std::string BoundText(int64_t bound) {
  for (int k = 20; k < 64; ++k) {
    const uint64_t power = uint64_t{1} << k;
    if (static_cast<uint64_t>(bound) == power) return absl::StrCat("2^", k);
    if (static_cast<uint64_t>(bound) == power - 1) return absl::StrCat("2^", k, "-1");
  }
  return absl::StrCat(bound);
}

// A flag's help text, then its range when it has one: "...; in [1, 2^20]".
std::string HelpWithRange(const std::string& name, const absl::CommandLineFlag& flag) {
  const FlagRange* range = RangeOf(name);
  if (range == nullptr) return flag.Help();
  return absl::StrCat(flag.Help(), "; in [", BoundText(range->lo), ", ",
                      range->hi_text.empty() ? BoundText(range->hi) : range->hi_text, "]");
}

// `text` in lines of at most `width` characters (longer words alone), each
// after `indent`.
std::string Wrapped(absl::string_view text, absl::string_view indent, size_t width) {
  std::string out;
  size_t line = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line > 0 && line + 1 + word.size() > width) {
      out += "\n";
      line = 0;
    }
    if (line == 0) {
      absl::StrAppend(&out, indent, word);
      line = indent.size() + word.size();
    } else {
      absl::StrAppend(&out, " ", word);
      line += 1 + word.size();
    }
  }
  return out + "\n";
}

// A help text as a Markdown table cell in docs/: its guides named as links.
std::string MarkdownCell(absl::string_view help) {
  std::string cell = absl::StrReplaceAll(help, {{"|", "\\|"}});
  static const std::regex kGuide(R"(docs/([a-z0-9-]+\.md))");
  return std::regex_replace(cell, kGuide, "[$1]($1)");
}

}  // namespace

std::string FlagsHelp() {
  std::string help = "usage: tensord [--flag=value ...]\n\n";
  for (const std::string& name : TensordFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    const std::string shown = ShownDefault(name, *flag, false);
    absl::StrAppend(&help, "  --", name,
                    shown.empty() ? "" : absl::StrCat(" (default ", shown, ")"), "\n",
                    Wrapped(HelpWithRange(name, *flag), "      ", 80));
  }
  absl::StrAppend(&help, "  --flagfile=PATH\n", Wrapped(kFlagfileHelp, "      ", 80));
  return help;
}

std::string FlagsMarkdown() {
  std::string table = "| flag | default | meaning |\n| --- | --- | --- |\n";
  for (const std::string& name : TensordFlagNames()) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    absl::StrAppend(&table, "| `--", name, "` | ", MarkdownCell(ShownDefault(name, *flag, true)),
                    " | ", MarkdownCell(HelpWithRange(name, *flag)), " |\n");
  }
  absl::StrAppend(&table, "| `--flagfile` | | ", MarkdownCell(kFlagfileHelp), " |\n");
  return table;
}

absl::StatusOr<ServerConfig> ConfigFromFlags(const std::vector<std::string>& args) {
  ResetFlags();
  ASSIGN_OR_RETURN(const Parsed parsed, ParseFlags(args));
  if (parsed.help || parsed.version) {
    ServerConfig config;
    config.help = parsed.help;
    config.help_markdown = parsed.help_markdown;
    config.version = parsed.version;
    return config;
  }
  return ValidatedConfig(parsed);
}

}  // namespace tensorop::server
