// tensord: the tensorop gRPC server.
//
//   tensord --address=0.0.0.0:50051 --worker_threads=8
//
// Prints "tensord listening on HOST:PORT" on stdout once it serves, then
// "tensord metrics on HOST:PORT" where GET /metrics answers (unless
// --metrics_address is empty), writes one JSON line per request on stderr, and
// drains in-flight calls on SIGTERM/SIGINT.
//
// main parses the flags (server/process/config.h), builds the Server
// (server/process/server.h) and owns the signals; exit status 2 is a usage error.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/version.h"
#include "server/memory/malloc_tuning.h"
#include "server/process/config.h"
#include "server/process/server.h"
#include "server/telemetry/request_log.h"

namespace tensorop::server {
namespace {

constexpr int kUsageExit = 2;

int UsageError(absl::string_view message) {
  WriteToStderr(absl::StrCat("tensord: ", message, "\n(tensord --help lists the flags)\n"));
  return kUsageExit;
}

// gRPC core's messages (handshake failures, ...) as the log's JSON lines.
void LogGrpcMessage(gpr_log_func_args* args) {
  const absl::string_view file = args->file != nullptr ? args->file : "";
  LogForeign(
      "grpc",
      args->severity == GPR_LOG_SEVERITY_ERROR  ? "error"
      : args->severity == GPR_LOG_SEVERITY_INFO ? "info"
                                                : "debug",
      absl::StrCat(args->message, " (", file.substr(file.rfind('/') + 1), ":", args->line, ")"));
}

int Main(int argc, char** argv) {
  ExecWithHugePageMalloc(argv);  // first: no thread may exist yet
  const absl::StatusOr<ServerConfig> parsed =
      ConfigFromFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return UsageError(parsed.status().message());
  if (parsed->help) {
    std::cout << (parsed->help_markdown ? FlagsMarkdown() : FlagsHelp());
    return 0;
  }
  if (parsed->version) {
    std::cout << "tensord " << Version() << "\n";
    return 0;
  }
  const ServerConfig& config = *parsed;
  // Blocks of 4 MiB and more (inputs, outputs, answers) are mapped on their own
  // (on huge pages: server/memory/malloc_tuning.h) and unmapped when freed, so memory
  // the budget gave back leaves the process. glibc's default raises this
  // threshold after each such free, up to 32 MiB, and keeps freed blocks below
  // it resident. Below 4 MiB blocks come from the heap, reused from call to
  // call instead of paying a page fault per 4 KiB each time (at 1 MiB that was
  // most of a 1 MiB Run's CPU), and given back by the server's idle trim.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  // And the heap keeps up to 64 MiB free at its top rather than handing it
  // back and faulting it in again: gRPC's receive buffers (reads of up to
  // 4 MiB, several in flight) are freed and taken again all through a large
  // request or an upload. At 8 MiB a third of every uploaded byte landed in a
  // freshly faulted page (333k page faults over four 1 GiB uploads; 8k now).
  // The server's idle trim gives it back once calls stop.
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  // One malloc arena for all threads, not glibc's up to eight per core: a
  // freed block is reused only in the arena it came from, so with several the
  // received bytes (64 KiB slices, read by whichever poller thread) and the
  // outputs below 4 MiB (workers) left each arena's own peak resident, their
  // sum more than the server ever held at once: a 32 MiB round trip read
  // backwards at -c 2 peaked at 1.14-1.42x its payload per request with two
  // arenas, 1.07-1.09x with one; 1 MiB at -c 2 at 1.6-3.5x, 1.4-2.3x. Calls/s
  // and CPU per call did not move, from small calls to 32 MiB (bench/NOTES.md,
  // "One malloc arena"): small blocks stay in each thread's cache (glibc's
  // tcache), so the arena's lock is taken for large blocks only. A many-core
  // host that finds it contended sets GLIBC_TUNABLES=glibc.malloc.arena_max=N.
  if (!GlibcTunableSet("glibc.malloc.arena_max")) mallopt(M_ARENA_MAX, 1);

  // Block the shutdown signals before any thread starts, so every thread
  // inherits the mask and only the sigwait() below receives them.
  sigset_t shutdown_signals;
  sigemptyset(&shutdown_signals);
  sigaddset(&shutdown_signals, SIGTERM);
  sigaddset(&shutdown_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &shutdown_signals, nullptr);
  if (config.security.reloads()) {
    // SIGHUP rereads the certificate and token files (server/security/security.h).
    sigset_t reload_signals;
    sigemptyset(&reload_signals);
    Security::AddReloadSignal(&reload_signals);
    pthread_sigmask(SIG_BLOCK, &reload_signals, nullptr);
  }

  // Every line on stderr is JSON: gRPC's through its log hook, anything else
  // written there (PoCL's warnings) read back and wrapped.
  gpr_set_log_function(LogGrpcMessage);
  CaptureForeignStderr();
  SetRequestLogPolicy(config.request_log);

  // Hold one gRPC initialization for the life of the process and never release
  // it: releasing the last one runs gRPC's synchronous shutdown, which joins an
  // executor thread that may sit in a 10 s poll, and would delay every exit.
  grpc_init();

  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(config);
  if (!server.ok()) {
    // Staging that does not fit the memory budget is a usage error.
    if (absl::IsResourceExhausted(server.status())) return UsageError(server.status().message());
    WriteToStderr(absl::StrCat("tensord: ", server.status().message(), "\n"));
    return 1;
  }
  if (absl::Status started = (*server)->Start(); !started.ok()) {
    WriteToStderr(absl::StrCat("tensord: ", started.message(), "\n"));
    return 1;
  }
  int signal = 0;
  sigwait(&shutdown_signals, &signal);
  // A second SIGTERM or SIGINT while the first one drains: stop at once
  // (an operator's "now", as a second Ctrl-C), saying what it cut short.
  std::thread([&shutdown_signals, stopping = server->get()] {
    int again = 0;
    sigwait(&shutdown_signals, &again);
    FlushRequestLog();
    LogEvent("stopped",
             absl::StrCat("at once, on a second ", again == SIGINT ? "SIGINT" : "SIGTERM", ": ",
                          stopping->CutShort()));
    std::_Exit(1);
  }).detach();
  (*server)->Shutdown();
  (*server)->Wait();
  (*server)->LogStopped();
  return 0;
}

}  // namespace
}  // namespace tensorop::server

int main(int argc, char** argv) { return tensorop::server::Main(argc, argv); }
