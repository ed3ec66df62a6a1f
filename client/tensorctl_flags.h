// tensorctl's command line: its commands and flags in one table that both the
// parser and the usage texts read (`tensorctl --help`, `tensorctl COMMAND
// --help`), so a flag cannot be taken without being described or described
// without being taken. A usage error is one line: what is wrong, "did you mean"
// for a mistyped flag or command (core/nearest_name.h), and which --help to
// read. The commands themselves are in client/tensorctl.cc.
#ifndef TENSOROP_CLIENT_TENSORCTL_FLAGS_H_
#define TENSOROP_CLIENT_TENSORCTL_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/channel.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// --target when none is given: tensord's default port on this machine.
inline constexpr absl::string_view kDefaultTarget = "localhost:50051";

enum class CallStyle { kUnary, kStream, kChunked, kSharedMemory, kHandles, kChain };

struct Flags {
  std::string command;
  std::string target = std::string(kDefaultTarget);
  v1::Backend backend = v1::AUTO;
  CallStyle style = CallStyle::kUnary;
  std::string case_name;
  std::string health_service;
  std::vector<std::string> paths;
  ChannelSecurity security;
  std::string region;  // shm-*
  std::string key;
  int64_t byte_size = 0;
  bool keep = false;             // run
  int64_t ttl_seconds = 0;       // put
  std::vector<int64_t> strides;  // fetch
};

bool IsSharedMemoryCommand(absl::string_view command);
// The commands that name handles rather than case files.
bool IsHandleIdCommand(absl::string_view command);

// argv checked into Flags (the security files read, the target parsed);
// INVALID_ARGUMENT with the one-line reason ("unknown flag --tagret; did you
// mean --target?") for a usage error. --help and --version are Main's.
absl::StatusOr<Flags> ParseFlags(int argc, char** argv);

// Every command's synopsis and what the flags common to them mean (`tensorctl
// --help`); starts "usage:\n".
std::string Usage();

// One command's usage: its synopsis, what it does, its flags and an example
// (`tensorctl COMMAND --help`); nullopt for an unknown command.
std::optional<std::string> CommandUsage(absl::string_view command);

// Where a usage error of this command line points: "tensorctl run --help" when
// argv names a command, else "tensorctl --help".
std::string HelpHint(int argc, char** argv);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_TENSORCTL_FLAGS_H_
