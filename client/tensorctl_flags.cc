#include "client/tensorctl_flags.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/status_macros.h"
#include "core/nearest_name.h"
#include "proto/backend_name.h"

namespace tensorop::client {
namespace {

struct FlagSpec {
  absl::string_view name;
  absl::string_view value;  // what follows it ("ADDR"), or "" for a switch
  absl::string_view help;
};

// Every flag, in the order the usage texts list them.
const std::vector<FlagSpec>& AllFlags() {
  static const auto* const flags = new std::vector<FlagSpec>{
      {"target", "ADDR",
       "the server (default localhost:50051): HOST:PORT; a list\n"
       "IP:PORT,IP:PORT,... of replicas (round-robin);\n"
       "dns:///NAME:PORT; unix:///PATH (a Unix socket)"},
      {"backend", "B", "auto (the default: the server picks), cpu or opencl"},
      {"stream", "", "RunStream: each output comes back in chunks"},
      {"chunked", "", "RunChunked: inputs go up in chunks, outputs come back\nin chunks"},
      {"shared_memory", "",
       "inputs and outputs through a shared memory region\n"
       "tensorctl creates (a server on this machine)"},
      {"handles", "",
       "Put each input, run on the handles keeping every output,\n"
       "Fetch the outputs and Release every handle"},
      {"chain", "", "each case's steps as one RunChain"},
      {"keep", "", "outputs stay on the server; prints their handles in\nplace of their data"},
      {"case", "NAME", "the case of FILE to encode"},
      {"service", "NAME",
       "one service's health: tensorop.v1.TensorOp, tensorop.cpu\n"
       "or tensorop.opencl (default: the whole server)"},
      {"ttl_seconds", "N",
       "seconds a handle lives after its last use (default 0:\n"
       "the server's --handle_ttl_seconds)"},
      {"strides", "S,S,...", "the layout to fetch in, in elements (default: packed)"},
      {"region", "NAME", "the region's name in the server"},
      {"key", "KEY", "the POSIX shared memory object, as shm_open names it"},
      {"byte_size", "N", "bytes to map (default 0: the whole object)"},
      {"tls", "", "TLS, trusting the system's CA certificates"},
      {"ca_file", "PEM", "TLS, trusting these CA certificates"},
      {"cert_file", "PEM", "mutual TLS: this client certificate chain"},
      {"key_file", "PEM", "its private key"},
      {"token_file", "FILE", "send the bearer token this file holds"},
  };
  return *flags;
}

constexpr absl::string_view kSecurityFlags[] = {"tls", "ca_file", "cert_file", "key_file",
                                                "token_file"};

constexpr absl::string_view kSecurityNote =
    "security flags may come from the environment instead (flags win): TENSOROP_TLS=1,\n"
    "TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE, TENSOROP_TOKEN_FILE; any file\n"
    "implies --tls (docs/security.md).\n";

struct CommandSpec {
  absl::string_view name;
  absl::string_view synopsis;  // after "tensorctl NAME "
  absl::string_view about;
  std::vector<absl::string_view> flags;  // besides the security flags
  bool connects;                         // takes the security flags
  absl::string_view example;
};

constexpr absl::string_view kStyles = "[--stream|--chunked|--shared_memory|--handles|--chain]";

const std::vector<CommandSpec>& Commands() {
  static const auto* const commands = new std::vector<CommandSpec>{
      {"run",
       "[--target ADDR] [--backend auto|cpu|opencl]\n"
       "      [--stream|--chunked|--shared_memory|--handles|--chain] [--keep] FILE...",
       "Runs the cases of each FILE (a case file, or a directory of *.json case files)\n"
       "and prints one JSON line per case: its outputs, or the error the server answered.\n"
       "A case tensorctl cannot read is told on stderr (tensorctl: FILE: case NAME: why).\n"
       "Exits 1 when the server cannot be reached or a case cannot be read, else 0.",
       {"target", "backend", "stream", "chunked", "shared_memory", "handles", "chain", "keep"},
       true,
       "tensorctl run --target localhost:50051 tests/conformance/cases/slice.json"},
      {"conformance",
       "[--target ADDR] [--backend B]\n"
       "      [--stream|--chunked|--shared_memory|--handles|--chain] PATH...",
       "Runs the cases of each PATH (a case file, or a directory of *.json case files),\n"
       "compares every answer with the case's expectation exactly, prints one FAIL line\n"
       "per failing case and a summary line. Exits 1 on any failure.",
       {"target", "backend", "stream", "chunked", "shared_memory", "handles", "chain"},
       true,
       "tensorctl conformance --target localhost:50051 --stream tests/conformance/cases"},
      {"encode",
       "FILE --case NAME [--backend B]",
       "Writes the RunRequest of one case of FILE to stdout as binary protobuf (for\n"
       "`ghz -B`); the same case always encodes to the same bytes.",
       {"case", "backend"},
       false,
       "tensorctl encode tests/conformance/cases/slice.json \\\n"
       "      --case slice/doc_example_1_positive_strides > slice.bin"},
      {"health",
       "[--target ADDR] [--service NAME]",
       "Prints the gRPC health status of the server, or of one of its services\n"
       "(SERVING, NOT_SERVING, or the call's error); exits 0 only for SERVING. It waits\n"
       "2 seconds at most (the container's HEALTHCHECK).",
       {"target", "service"},
       true,
       "tensorctl health --target localhost:50051 --service tensorop.opencl"},
      {"put",
       "[--target ADDR] [--backend auto|cpu] [--ttl_seconds N] PATH...",
       "Uploads every input of every case in PATH as a handle (a tensor that stays on\n"
       "the server) and prints one line per input: CASE:INPUT ID {handle}. Exits 1 if\n"
       "any input failed, after trying every one.",
       {"target", "backend", "ttl_seconds"},
       true,
       "tensorctl put --target localhost:50051 --ttl_seconds 600 padded.json"},
      {"fetch",
       "[--target ADDR] [--strides S,S,...] ID",
       "Prints handle ID's tensor as run prints an output, packed or with --strides.",
       {"target", "strides"},
       true,
       "tensorctl fetch --target localhost:50051 --strides 6,1 0123456789abcdef0123456789abcdef"},
      {"release",
       "[--target ADDR] ID...",
       "Frees the handles; prints \"released ID\" for each. Unknown IDs are ignored.",
       {"target"},
       true,
       "tensorctl release --target localhost:50051 0123456789abcdef0123456789abcdef"},
      {"handles",
       "[--target ADDR]",
       "Lists the caller's handles, one JSON line each (id, dtype, sizes, byte_size,\n"
       "expires_unix_ms, ...).",
       {"target"},
       true,
       "tensorctl handles --target localhost:50051"},
      {"shm-register",
       "[--target ADDR] --region NAME --key KEY [--byte_size N]",
       "Maps the POSIX shared memory object KEY in the server as region NAME, for\n"
       "requests that reference it (docs/colocated.md).",
       {"target", "region", "key", "byte_size"},
       true,
       "tensorctl shm-register --target unix:///run/tensord/tensord.sock --region in \\\n"
       "      --key /tensors"},
      {"shm-unregister",
       "[--target ADDR] --region NAME",
       "Unmaps region NAME in the server.",
       {"target", "region"},
       true,
       "tensorctl shm-unregister --target unix:///run/tensord/tensord.sock --region in"},
      {"shm-status",
       "[--target ADDR] [--region NAME]",
       "Prints every region (or the one named): key, bytes, calls using it; then the\n"
       "bytes mapped.",
       {"target", "region"},
       true,
       "tensorctl shm-status --target unix:///run/tensord/tensord.sock"},
  };
  return *commands;
}

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

const FlagSpec& FindFlag(absl::string_view name) {
  for (const FlagSpec& flag : AllFlags()) {
    if (flag.name == name) return flag;
  }
  std::abort();  // every name the table uses is a flag
}

// The flags `command` takes, security ones last.
std::vector<std::string> FlagNames(const CommandSpec& command) {
  std::vector<std::string> names;
  for (absl::string_view name : command.flags) names.emplace_back(name);
  if (command.connects) {
    for (absl::string_view name : kSecurityFlags) names.emplace_back(name);
  }
  return names;
}

// "unknown flag --tagret; did you mean --target?": the nearest of the
// command's flags, else of any.
absl::Status UnknownFlag(absl::string_view dashes, absl::string_view name,
                         const CommandSpec& command) {
  std::vector<std::string> names = FlagNames(command);
  names.insert(names.end(), {"help", "version"});
  std::optional<std::string> nearest = NearestName(name, names);
  if (!nearest.has_value()) {
    std::vector<std::string> all;
    for (const FlagSpec& flag : AllFlags()) all.emplace_back(flag.name);
    nearest = NearestName(name, all);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag ", dashes, name,
                   nearest.has_value() ? absl::StrCat("; did you mean --", *nearest, "?") : ""));
}

// "2,1" -> {2, 1}.
absl::StatusOr<std::vector<int64_t>> ParseStrides(absl::string_view text) {
  std::vector<int64_t> strides;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t stride = 0;
    if (!absl::SimpleAtoi(part, &stride)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--strides is a comma-separated list of integers, not \"", text, "\""));
    }
    strides.push_back(stride);
  }
  return strides;
}

// "  --target ADDR   the server ..." with continuation lines indented alike.
std::string FlagLines(const FlagSpec& flag) {
  const std::string left = absl::StrCat("--", flag.name, flag.value.empty() ? "" : " ", flag.value);
  std::string lines;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(flag.help, '\n')) {
    absl::StrAppendFormat(&lines, "  %-20s %s\n", first ? left : "", line);
    first = false;
  }
  return lines;
}

std::string CommandNames() {
  std::vector<absl::string_view> names;
  for (const CommandSpec& command : Commands()) names.push_back(command.name);
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back());
}

}  // namespace

bool IsSharedMemoryCommand(absl::string_view command) {
  return command == "shm-register" || command == "shm-unregister" || command == "shm-status";
}

bool IsHandleIdCommand(absl::string_view command) {
  return command == "fetch" || command == "release" || command == "handles";
}

std::string Usage() {
  std::string usage =
      "usage:\n"
      "  tensorctl --help | -h          this text\n"
      "  tensorctl COMMAND --help       the command's usage: what it does, its flags, an example\n"
      "  tensorctl --version            tensorctl VERSION\n";
  for (const CommandSpec& command : Commands()) {
    absl::StrAppend(&usage, "  tensorctl ", command.name, " ", command.synopsis, "\n");
  }
  absl::StrAppend(
      &usage,
      "run, conformance: --shared_memory sends inputs and outputs through a shared memory region;\n"
      "  --handles Puts each input, runs on the handles keeping every output, Fetches the\n"
      "  outputs and Releases every handle. --chain runs each case's steps as one RunChain.\n"
      "  run --keep: outputs stay on the server; prints\n"
      "  their handles in place of their data.\n"
      "put: every input of every case in PATH; one line per input: CASE:INPUT ID {handle}.\n"
      "fetch: the handle's tensor as JSON, packed or with --strides. handles: one JSON line\n"
      "  per handle (id, dtype, sizes, byte_size, expires_unix_ms, ...).\n"
      "security (every command but encode): [--tls] [--ca_file PEM] [--cert_file PEM --key_file "
      "PEM]\n"
      "  [--token_file FILE]; or TENSOROP_TLS=1, TENSOROP_CA_FILE, TENSOROP_CERT_FILE,\n"
      "  TENSOROP_KEY_FILE, TENSOROP_TOKEN_FILE. Any file implies --tls.\n"
      "FILE/PATH: a case file, or a directory of *.json case files.\n"
      "ADDR (default ",
      kDefaultTarget,
      "): HOST:PORT, a list IP:PORT,IP:PORT,... of replicas, dns:///NAME:PORT,\n"
      "  or unix:///PATH (a Unix domain socket).\n");
  return usage;
}

std::optional<std::string> CommandUsage(absl::string_view name) {
  const CommandSpec* command = FindCommand(name);
  if (command == nullptr) return std::nullopt;
  std::string usage = absl::StrCat("usage: tensorctl ", command->name, " ", command->synopsis,
                                   "\n\n", command->about, "\n\nflags:\n");
  for (const std::string& flag : FlagNames(*command)) {
    absl::StrAppend(&usage, FlagLines(FindFlag(flag)));
  }
  if (command->connects) absl::StrAppend(&usage, kSecurityNote);
  absl::StrAppend(&usage, "\nexample:\n  ", command->example, "\n");
  return usage;
}

std::string HelpHint(int argc, char** argv) {
  if (argc >= 2 && FindCommand(argv[1]) != nullptr) {
    return absl::StrCat("tensorctl ", argv[1], " --help");
  }
  return "tensorctl --help";
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  if (argc < 2 || absl::StartsWith(argv[1], "-")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the first word is a command: ", CommandNames()));
  }
  Flags flags;
  flags.command = argv[1];
  const CommandSpec* command = FindCommand(flags.command);
  if (command == nullptr) {
    std::vector<std::string> names;
    for (const CommandSpec& known : Commands()) names.emplace_back(known.name);
    const std::optional<std::string> nearest = NearestName(flags.command, names);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command \"", flags.command, "\"",
                     nearest.has_value() ? absl::StrCat("; did you mean ", *nearest, "?")
                                         : absl::StrCat("; the commands are ", CommandNames())));
  }
  std::optional<std::string> backend;
  bool stream = false;
  bool chunked = false;
  bool shared_memory = false;
  bool handles = false;
  bool chain = false;
  for (int i = 2; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      flags.paths.emplace_back(arg);
      continue;
    }
    if (!absl::StartsWith(arg, "--")) return UnknownFlag("-", arg.substr(1), *command);
    // --name=value or --name value.
    absl::string_view name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t equals = name.find('='); equals != absl::string_view::npos) {
      value = std::string(name.substr(equals + 1));
      name = name.substr(0, equals);
    }
    auto take_value = [&]() -> absl::StatusOr<std::string> {
      if (value.has_value()) return *value;
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      return std::string(argv[++i]);
    };
    if (name == "tls") {
      if (value.has_value()) return absl::InvalidArgumentError("--tls takes no value");
      flags.security.tls = true;
    } else if (name == "ca_file") {
      ASSIGN_OR_RETURN(flags.security.ca_file, take_value());
    } else if (name == "cert_file") {
      ASSIGN_OR_RETURN(flags.security.cert_file, take_value());
    } else if (name == "key_file") {
      ASSIGN_OR_RETURN(flags.security.key_file, take_value());
    } else if (name == "token_file") {
      ASSIGN_OR_RETURN(flags.security.token_file, take_value());
    } else if (name == "stream" || name == "chunked" || name == "shared_memory" ||
               name == "handles" || name == "chain" || name == "keep") {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      if ((name == "handles" || name == "chain") && flags.command != "run" &&
          flags.command != "conformance") {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " is for run and conformance"));
      }
      if (name == "keep" && flags.command != "run") {
        return absl::InvalidArgumentError("--keep is for run");
      }
      (name == "stream"          ? stream
       : name == "chunked"       ? chunked
       : name == "shared_memory" ? shared_memory
       : name == "handles"       ? handles
       : name == "chain"         ? chain
                                 : flags.keep) = true;
    } else if (name == "ttl_seconds") {
      if (flags.command != "put") return absl::InvalidArgumentError("--ttl_seconds is for put");
      ASSIGN_OR_RETURN(std::string text, take_value());
      if (!absl::SimpleAtoi(text, &flags.ttl_seconds) || flags.ttl_seconds < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ttl_seconds is a number of seconds >= 0, not \"", text, "\""));
      }
    } else if (name == "strides") {
      if (flags.command != "fetch") return absl::InvalidArgumentError("--strides is for fetch");
      ASSIGN_OR_RETURN(std::string text, take_value());
      ASSIGN_OR_RETURN(flags.strides, ParseStrides(text));
    } else if (name == "region" || name == "key" || name == "byte_size") {
      if (!IsSharedMemoryCommand(flags.command)) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " is for shm-* commands"));
      }
      ASSIGN_OR_RETURN(std::string text, take_value());
      if (name == "region") {
        flags.region = text;
      } else if (name == "key") {
        flags.key = text;
      } else if (!absl::SimpleAtoi(text, &flags.byte_size) || flags.byte_size < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--byte_size is a byte count >= 0, not \"", text, "\""));
      }
    } else if (name == "target") {
      ASSIGN_OR_RETURN(flags.target, take_value());
    } else if (name == "backend") {
      ASSIGN_OR_RETURN(backend, take_value());
    } else if (name == "case") {
      ASSIGN_OR_RETURN(flags.case_name, take_value());
    } else if (name == "service") {
      if (flags.command != "health") return absl::InvalidArgumentError("--service is for health");
      ASSIGN_OR_RETURN(flags.health_service, take_value());
    } else {
      return UnknownFlag("--", name, *command);
    }
  }
  if (backend.has_value()) {
    std::optional<v1::Backend> parsed = ParseBackendName(*backend);
    if (!parsed.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend is ", kBackendNames, ", not \"", *backend, "\""));
    }
    flags.backend = *parsed;
  }
  if (static_cast<int>(stream) + static_cast<int>(chunked) + static_cast<int>(shared_memory) +
          static_cast<int>(handles) + static_cast<int>(chain) >
      1) {
    return absl::InvalidArgumentError(
        "--stream, --chunked, --shared_memory, --handles and --chain exclude each other");
  }
  if (flags.keep && (shared_memory || handles || chain)) {
    return absl::InvalidArgumentError("--keep excludes --shared_memory, --handles and --chain");
  }
  flags.style = stream          ? CallStyle::kStream
                : chunked       ? CallStyle::kChunked
                : shared_memory ? CallStyle::kSharedMemory
                : handles       ? CallStyle::kHandles
                : chain         ? CallStyle::kChain
                                : CallStyle::kUnary;
  if (command->connects) {
    RETURN_IF_ERROR(ChannelTarget(flags.target).status());
    flags.security = WithSecurityEnvironment(flags.security);
    // A missing or unreadable file is a usage error, before any call.
    RETURN_IF_ERROR(ChannelCredentials(flags.security).status());
  }
  if (flags.command == "health") {
    if (!flags.paths.empty()) return absl::InvalidArgumentError("health takes no case files");
    return flags;
  }
  if (IsSharedMemoryCommand(flags.command)) {
    if (!flags.paths.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flags.command, " takes no case files"));
    }
    if (flags.command != "shm-status" && flags.region.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flags.command, " needs --region NAME"));
    }
    if (flags.command == "shm-register" && flags.key.empty()) {
      return absl::InvalidArgumentError("shm-register needs --key KEY");
    }
    return flags;
  }
  if (IsHandleIdCommand(flags.command)) {
    if (flags.command == "fetch" && flags.paths.size() != 1) {
      return absl::InvalidArgumentError("fetch takes one handle ID");
    }
    if (flags.command == "release" && flags.paths.empty()) {
      return absl::InvalidArgumentError("release takes one or more handle IDs");
    }
    if (flags.command == "handles" && !flags.paths.empty()) {
      return absl::InvalidArgumentError("handles takes no arguments");
    }
    return flags;
  }
  if (flags.paths.empty()) return absl::InvalidArgumentError("no case files given");
  if (flags.command == "encode") {
    if (flags.paths.size() != 1) return absl::InvalidArgumentError("encode takes one FILE");
    if (flags.case_name.empty()) return absl::InvalidArgumentError("encode needs --case NAME");
  } else if (!flags.case_name.empty()) {
    return absl::InvalidArgumentError("--case is for encode");
  }
  return flags;
}

}  // namespace tensorop::client
