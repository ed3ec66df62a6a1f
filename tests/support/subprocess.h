// Runs a program to completion and captures what it printed, for tests of
// tensorctl as a user runs it.
#ifndef TENSOROP_TESTS_SUPPORT_SUBPROCESS_H_
#define TENSOROP_TESTS_SUPPORT_SUBPROCESS_H_

#include <string>
#include <vector>

namespace tensorop::testing {

struct CommandResult {
  // The exit status, or 128 + the signal that ended it.
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] with `argv` (no shell) and waits for it.
CommandResult RunCommand(const std::vector<std::string>& argv);

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_SUBPROCESS_H_
