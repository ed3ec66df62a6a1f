#include "tests/support/tensord_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace tensorop::testing {

std::string TensordPath() { return TENSOROP_TENSORD_PATH; }
std::string TensorctlPath() { return TENSOROP_TENSORCTL_PATH; }
std::string ConformanceCasesDir() { return TENSOROP_CONFORMANCE_DIR; }
std::string ViewCasesPath() { return TENSOROP_VIEW_CASES_PATH; }

namespace {

// The value the last `flag` (--metrics_address, ...) in `args` gives (tensord lets later
// flags win), in either --name=value or --name value form.
std::string AddressFlag(const std::vector<std::string>& args, const std::string& flag) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(flag + "=", 0) == 0) {
      value = args[i].substr(flag.size() + 1);
    } else if (args[i] == flag && i + 1 < args.size()) {
      value = args[++i];
    }
  }
  return value;
}

// Reads lines from `out` until one contains `marker` and returns what follows
// it on that line, or "" when the stream ends first.
std::string ReadAnnouncement(FILE* out, const std::string& marker) {
  char line[512];
  while (fgets(line, sizeof(line), out) != nullptr) {
    std::string text(line);
    auto at = text.find(marker);
    if (at == std::string::npos) continue;
    std::string rest = text.substr(at + marker.size());
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.pop_back();
    return rest;
  }
  return "";
}

}  // namespace

TensordProcess::TensordProcess(std::vector<std::string> extra_flags)
    : TensordProcess(std::move(extra_flags), 0) {}

TensordProcess::TensordProcess(std::vector<std::string> extra_flags, int max_open_files) {
  char log_template[] = "/tmp/tensord-test-log-XXXXXX";
  int log_fd = mkstemp(log_template);
  if (log_fd < 0) std::abort();
  log_path_ = log_template;

  int out_pipe[2];
  if (pipe(out_pipe) != 0) std::abort();

  // Metrics on a port of their own too: tests run in parallel, and the default
  // port would be taken by the first server.
  // No calibration unless a test asks for it (--calibrate=on): AUTO then runs on
  // the CPU whatever the host measures, and dozens of servers started by the
  // suite do not each spend their first seconds measuring.
  // The v2 HTTP API likewise; with TLS (then HTTPS) it is off unless the test
  // sets it, as most TLS tests are about gRPC.
  // No buffer pool unless a test asks for one: kept buffers stay reserved in
  // the budget for seconds after a call, and the memory tests assert that a
  // finished call leaves nothing reserved.
  std::vector<std::string> args = {TensordPath(),
                                   "--address=127.0.0.1:0",
                                   "--metrics_address=127.0.0.1:0",
                                   "--http_address=127.0.0.1:0",
                                   "--calibrate=off",
                                   "--buffer_pool_bytes=0"};
  if (!AddressFlag(extra_flags, "--tls_cert_file").empty() &&
      AddressFlag(extra_flags, "--http_address").empty()) {
    args.push_back("--http_address=");
  }
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  const bool metrics = !AddressFlag(args, "--metrics_address").empty();
  const bool health = !AddressFlag(args, "--health_address").empty();
  const bool http = !AddressFlag(args, "--http_address").empty() &&
                    AddressFlag(args, "--echo") != "true" &&
                    std::find(args.begin(), args.end(), std::string("--echo")) == args.end();

  pid_ = fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
    if (max_open_files > 0) {
      const rlimit limit{static_cast<rlim_t>(max_open_files), static_cast<rlim_t>(max_open_files)};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(log_fd);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(log_fd);

  // Read stdout line by line until the server says where it listens (and
  // where its metrics are, which it prints next).
  FILE* out = fdopen(out_pipe[0], "r");
  target_ = ReadAnnouncement(out, "tensord listening on ");
  if (!target_.empty() && metrics) metrics_target_ = ReadAnnouncement(out, "tensord metrics on ");
  if (!target_.empty() && http) http_target_ = ReadAnnouncement(out, "tensord http on ");
  if (!target_.empty() && health) health_target_ = ReadAnnouncement(out, "tensord health on ");
  if (target_.empty() || (metrics && metrics_target_.empty()) || (http && http_target_.empty()) ||
      (health && health_target_.empty())) {
    fprintf(stderr, "tensord did not start; its log:\n%s\n", Log().c_str());
    std::abort();
  }
  // tensord prints nothing more on stdout after these lines, so closing our end
  // cannot SIGPIPE it.
  fclose(out);
}

int TensordProcess::http_port() const {
  if (http_target_.empty()) return -1;
  return std::atoi(http_target_.substr(http_target_.rfind(':') + 1).c_str());
}

int TensordProcess::metrics_port() const {
  if (metrics_target_.empty()) return -1;
  return std::atoi(metrics_target_.substr(metrics_target_.rfind(':') + 1).c_str());
}

TensordProcess::~TensordProcess() {
  Stop();
  unlink(log_path_.c_str());
}

int TensordProcess::Signal(int signal) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

std::string TensordProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tensorop::testing
