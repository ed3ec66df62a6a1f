#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tensorop::testing {

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  // stdout through a pipe, stderr to a file: reading one pipe to its end cannot
  // deadlock against a child blocked on the other.
  char err_path[] = "/tmp/tensorctl-test-stderr-XXXXXX";
  const int err_fd = mkstemp(err_path);
  int out_pipe[2];
  if (err_fd < 0 || pipe(out_pipe) != 0) std::abort();
  const pid_t pid = fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    close(out_pipe[0]);
    close(out_pipe[1]);
    close(err_fd);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_fd);
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.out.append(buffer, static_cast<size_t>(n));
  }
  close(out_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  result.err = text.str();
  unlink(err_path);
  return result;
}

}  // namespace tensorop::testing
