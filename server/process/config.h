// tensord's command line: the flag definitions (server/process/config.cc, the only
// file that defines tensord's flags) and ConfigFromFlags, which parses and
// validates them into a ServerConfig. Every usage error is a status naming the
// flag and the value; nothing here prints or exits (main does: status 2).
#ifndef TENSOROP_SERVER_PROCESS_CONFIG_H_
#define TENSOROP_SERVER_PROCESS_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/opencl/device.h"
#include "server/data/handle_store.h"
#include "server/native/service.h"
#include "server/placement/device_pool.h"
#include "server/placement/scheduler.h"
#include "server/security/security.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {

struct ServerConfig {
  // --help was given (before any error): print FlagsHelp(), exit 0. Nothing
  // else below is set then.
  bool help = false;
  // --help=markdown: FlagsMarkdown() instead.
  bool help_markdown = false;
  // --version was given (likewise): print "tensord VERSION", exit 0.
  bool version = false;
  std::string address;                 // the first of `addresses`
  std::vector<std::string> addresses;  // TCP ones first, in the order given
  std::string metrics_address;         // empty: no metrics endpoint
  std::string http_address;            // empty: no v2 HTTP/REST API
  int http_keep_alive_seconds = 60;    // 0: one request per connection
  bool echo = false;
  bool opencl = true;
  bool calibrate = true;
  std::string opencl_filter;
  opencl_backend::DeviceOptions device;
  DevicePoolOptions devices;
  SchedulerOptions scheduler;  // `devices` is set by the Server
  ServiceOptions service;      // metrics, budget and regions are set by the Server
  int max_message_bytes = 0;
  std::chrono::seconds grace{0};
  std::chrono::seconds drain{0};
  RequestLogPolicy request_log;        // --request_log
  int max_connection_age_seconds = 0;  // 0: never
  int max_concurrent_streams = 0;
  int max_connection_idle_seconds = 0;  // 0: never
  SecurityOptions security;
  std::string health_address;  // empty: no health listener
  int64_t max_memory_bytes = 0;
  std::string max_memory_source;  // where the default came from; "" when set
  int64_t buffer_pool_bytes = 0;  // resolved: -1 became a quarter of max_memory_bytes
  int shared_memory_idle_seconds = 0;
  bool shared_memory_remote = false;
  HandleStoreOptions handles;  // budget set by the Server
};

// Parses tensord's arguments (argv without argv[0]): --name=value and
// --name value, a bool flag alone (--echo), --flagfile=PATH read in place,
// later flags winning; --address may repeat. Every tensord flag is first reset
// to its default, so a call depends only on `args`. Errors are
// INVALID_ARGUMENT naming the flag and value (and, in a flag file, the file
// and line).
absl::StatusOr<ServerConfig> ConfigFromFlags(const std::vector<std::string>& args);

// tensord's flag names in --help order, as defined in server/process/config.cc: the
// only names ConfigFromFlags accepts (besides flagfile and help).
const std::vector<std::string>& TensordFlagNames();

// A numeric flag's range [lo, hi]: the one statement of it, which validation
// ("--NAME=V must be in [lo, hi]", a usage error), --help and docs/flags.md
// ("in [lo, hi]" after the help text) and the range test read. `hi_text`,
// when set, is hi as --help says it where hi follows another flag (chunk_bytes:
// `--max_message_bytes` - 64); `hi` is then its bound at that flag's default.
struct FlagRange {
  std::string name;
  int64_t lo = 0;
  int64_t hi = 0;
  std::string hi_text;
};

// Every numeric flag's range, in --help order.
const std::vector<FlagRange>& TensordFlagRanges();

// The --help text: every flag with its default and help, then --flagfile.
std::string FlagsHelp();
// The same as docs/flags.md's table (--help=markdown): one row a flag.
std::string FlagsMarkdown();

// "unix:" and "unix-abstract:" addresses (no port to report or check).
bool IsUnixAddress(absl::string_view address);

// A TCP address whose host is unspecified ("0.0.0.0:50051", "[::]:50051",
// ":50051"): it listens everywhere but names no address a client can dial.
bool IsWildcardAddress(absl::string_view address);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PROCESS_CONFIG_H_
