// Starts the real tensord binary on a loopback port for integration tests and
// stops it (SIGTERM, then waits) when the object goes away.
#ifndef TENSOROP_TESTS_SUPPORT_TENSORD_PROCESS_H_
#define TENSOROP_TESTS_SUPPORT_TENSORD_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace tensorop::testing {

class TensordProcess {
 public:
  // Runs `tensord --address=127.0.0.1:0 --metrics_address=127.0.0.1:0
  // --http_address=127.0.0.1:0 --calibrate=off --buffer_pool_bytes=0
  // <extra_flags...>` (later flags
  // win; with --tls_cert_file and no --http_address, --http_address= is
  // passed: TLS tests that want HTTPS name --http_address) and waits for the line
  // "tensord listening on HOST:PORT" on its stdout, then, unless the flags
  // leave --metrics_address empty, for "tensord metrics on HOST:PORT", and
  // likewise "tensord http on HOST:PORT". Its stderr
  // (the request log) goes to a file, readable with Log(). Aborts the test
  // binary if it fails.
  explicit TensordProcess(std::vector<std::string> extra_flags = {});
  // The same, with the child's open-file limit (soft and hard, so tensord
  // cannot raise it) set to `max_open_files` before exec: descriptor
  // exhaustion within a bounded test.
  TensordProcess(std::vector<std::string> extra_flags, int max_open_files);
  ~TensordProcess();
  TensordProcess(const TensordProcess&) = delete;
  TensordProcess& operator=(const TensordProcess&) = delete;

  // "127.0.0.1:PORT"
  const std::string& target() const { return target_; }
  // Where GET /metrics answers: "127.0.0.1:PORT", or "" without metrics.
  const std::string& metrics_target() const { return metrics_target_; }
  // Where the plaintext health listener answers (--health_address, announced
  // as "tensord health on HOST:PORT"), or "" without one.
  const std::string& health_target() const { return health_target_; }
  // The metrics port, or -1 without metrics.
  int metrics_port() const;
  // Where the v2 HTTP/REST API answers: "127.0.0.1:PORT", or "" without it;
  // and its port, or -1.
  const std::string& http_target() const { return http_target_; }
  int http_port() const;
  pid_t pid() const { return pid_; }
  // Everything the server wrote to stderr so far.
  std::string Log() const;
  // Sends SIGTERM and waits; returns the exit status as from waitpid, or -1.
  int Stop() { return Signal(SIGTERM); }
  // SIGKILL, as a crashed machine or an OOM kill would end it; then waits.
  int Kill() { return Signal(SIGKILL); }
  // Sends `signal` and waits; the exit status as from waitpid, or -1 if the
  // process was already stopped.
  int Signal(int signal);

 private:
  pid_t pid_ = -1;
  std::string target_;
  std::string metrics_target_;
  std::string health_target_;
  std::string http_target_;
  std::string log_path_;
};

// The path of the built tensord / tensorctl (compile definitions set by CMake).
std::string TensordPath();
std::string TensorctlPath();
// The directory of the public conformance cases (tests/conformance/cases).
std::string ConformanceCasesDir();
// The project's own cases of several steps (tests/conformance/views.json).
std::string ViewCasesPath();

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_TENSORD_PROCESS_H_
