#include "tests/support/tensord_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tensorop::testing {

std::string TensordPath() { return TENSOROP_TENSORD_PATH; }
std::string TensorctlPath() { return TENSOROP_TENSORCTL_PATH; }
std::string ConformanceCasesDir() { return TENSOROP_CONFORMANCE_DIR; }

TensordProcess::TensordProcess(std::vector<std::string> extra_flags) {
  char log_template[] = "/tmp/tensord-test-log-XXXXXX";
  int log_fd = mkstemp(log_template);
  if (log_fd < 0) std::abort();
  log_path_ = log_template;

  int out_pipe[2];
  if (pipe(out_pipe) != 0) std::abort();

  std::vector<std::string> args = {TensordPath(), "--address=127.0.0.1:0"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());

  pid_ = fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
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

  // Read stdout line by line until the server says where it listens.
  FILE* out = fdopen(out_pipe[0], "r");
  char line[512];
  const std::string marker = "tensord listening on ";
  while (fgets(line, sizeof(line), out) != nullptr) {
    std::string text(line);
    auto at = text.find(marker);
    if (at != std::string::npos) {
      target_ = text.substr(at + marker.size());
      while (!target_.empty() && (target_.back() == '\n' || target_.back() == '\r')) {
        target_.pop_back();
      }
      break;
    }
  }
  if (target_.empty()) {
    fprintf(stderr, "tensord did not start; its log:\n%s\n", Log().c_str());
    std::abort();
  }
  // Keep draining stdout in the child's favour: closing our end would SIGPIPE it
  // if it printed again, so hand the pipe to /dev/null via a detached reader.
  // tensord prints nothing more on stdout after the listening line.
  fclose(out);
}

TensordProcess::~TensordProcess() {
  Stop();
  unlink(log_path_.c_str());
}

int TensordProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
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
