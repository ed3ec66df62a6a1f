// tensorctl: runs conformance cases against a tensord. (About 670 lines, past
// the project's ~600: one program's usage, flags and one short function per
// command, kept in one file so the usage text and its parser change together.)
//
//   tensorctl run --target ADDR [--backend auto|cpu|opencl]
//       [--stream|--chunked|--shared_memory|--handles|--chain] [--keep] FILE...
//   tensorctl conformance --target ADDR [--backend B]
//       [--stream|--chunked|--shared_memory|--handles|--chain] PATH...
//   tensorctl encode FILE --case NAME [--backend B]
//   tensorctl health --target ADDR [--service NAME]
//   tensorctl shm-register --target ADDR --region NAME --key KEY [--byte_size N]
//   tensorctl shm-unregister --target ADDR --region NAME
//   tensorctl shm-status --target ADDR [--region NAME]
//   tensorctl put --target ADDR [--backend auto|cpu] [--ttl_seconds N] PATH...
//   tensorctl fetch --target ADDR [--strides S,S,...] ID
//   tensorctl release --target ADDR ID...
//   tensorctl handles --target ADDR
//
// run and conformance with --shared_memory send every case through a shared
// memory region tensorctl creates: inputs read by the server in place, outputs
// written by it into the region (unary Run; client/shared_memory.h). With
// --handles every case goes through handles (client.h: RunWithHandles): each
// input is Put, the op runs on the handles with every output kept, the
// outputs are Fetched (with the case's output strides) and every handle is
// Released. With --chain every case is one RunChain of its steps answering
// every output of the last (client.h: ChainOf); without, a case with later
// steps ("then": tests/conformance/README.md) runs them one call each, the
// output before fed in as bytes. run --keep keeps every output of a case's
// last step on the server and prints its handle in place of its data.
//
// Handles: put uploads every input of each case (the inputs of case files, as
// run sends them) and prints one line per input, "CASE:INPUT ID {handle}";
// fetch prints a handle's tensor as run prints an output (packed, or with
// --strides); release frees handles; handles lists the caller's handles, one
// JSON line each. Each exits 1 on an error (put after trying every input).
//
// A target may be a Unix socket: unix:///run/tensord/tensord.sock.
//
// ADDR is one address, a comma-separated list of replicas' IP addresses, or a
// gRPC target such as dns:///NAME:PORT; calls go round-robin over the replicas
// (client/channel.h).
//
// run prints one JSON line per case and exits 1 only when the server cannot be
// reached (UNAVAILABLE); conformance prints each failure and a summary line and
// exits 1 on any failure; encode writes one case's RunRequest as binary protobuf
// (for `ghz -B`); health prints the gRPC health status of the server (or of one
// of its services) and exits 0 only for SERVING (the container's HEALTHCHECK).
// Usage errors exit 2.
//
// Transport security, for every command that connects: --tls, --ca_file,
// --cert_file, --key_file, --token_file, or from the environment (flags win):
// TENSOROP_TLS=1, TENSOROP_CA_FILE, TENSOROP_CERT_FILE, TENSOROP_KEY_FILE,
// TENSOROP_TOKEN_FILE (client/channel.h).
#include <unistd.h>

#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/case_compare.h"
#include "client/case_format.h"
#include "client/channel.h"
#include "client/client.h"
#include "client/shared_memory.h"
#include "client/status_macros.h"
#include "core/version.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/backend_name.h"

namespace tensorop::client {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr absl::string_view kUsage =
    "usage:\n"
    "  tensorctl --help | -h          this text\n"
    "  tensorctl --version            tensorctl VERSION\n"
    "  tensorctl run --target ADDR [--backend auto|cpu|opencl]\n"
    "      [--stream|--chunked|--shared_memory|--handles|--chain] [--keep] FILE...\n"
    "  tensorctl conformance --target ADDR [--backend B]\n"
    "      [--stream|--chunked|--shared_memory|--handles|--chain] PATH...\n"
    "  tensorctl encode FILE --case NAME [--backend B]\n"
    "  tensorctl health --target ADDR [--service NAME]\n"
    "  tensorctl shm-register --target ADDR --region NAME --key KEY [--byte_size N]\n"
    "  tensorctl shm-unregister --target ADDR --region NAME\n"
    "  tensorctl shm-status --target ADDR [--region NAME]\n"
    "  tensorctl put --target ADDR [--backend auto|cpu] [--ttl_seconds N] PATH...\n"
    "  tensorctl fetch --target ADDR [--strides S,S,...] ID\n"
    "  tensorctl release --target ADDR ID...\n"
    "  tensorctl handles --target ADDR\n"
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
    "ADDR: HOST:PORT, a list IP:PORT,IP:PORT,... of replicas, dns:///NAME:PORT, or\n"
    "  unix:///PATH (a Unix domain socket).\n";

// A health check answers at once or not at all; Docker's HEALTHCHECK gives 3 s.
constexpr absl::Duration kHealthDeadline = absl::Seconds(2);

enum class CallStyle { kUnary, kStream, kChunked, kSharedMemory, kHandles, kChain };

struct Flags {
  std::string command;
  std::string target;
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

bool IsSharedMemoryCommand(absl::string_view command) {
  return command == "shm-register" || command == "shm-unregister" || command == "shm-status";
}

// The commands that name handles rather than case files.
bool IsHandleIdCommand(absl::string_view command) {
  return command == "fetch" || command == "release" || command == "handles";
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

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  if (argc < 2) return absl::InvalidArgumentError("no command");
  Flags flags;
  flags.command = argv[1];
  if (flags.command != "run" && flags.command != "conformance" && flags.command != "encode" &&
      flags.command != "health" && flags.command != "put" &&
      !IsSharedMemoryCommand(flags.command) && !IsHandleIdCommand(flags.command)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown command \"", flags.command, "\""));
  }
  std::optional<std::string> backend;
  bool stream = false;
  bool chunked = false;
  bool shared_memory = false;
  bool handles = false;
  bool chain = false;
  for (int i = 2; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      flags.paths.emplace_back(arg);
      continue;
    }
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
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
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
  if (flags.command != "encode") {
    if (flags.target.empty()) return absl::InvalidArgumentError("--target ADDR is required");
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

absl::StatusOr<std::vector<LoadedCase>> LoadAll(const std::vector<std::string>& paths) {
  std::vector<LoadedCase> all;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::vector<LoadedCase> cases, LoadCases(path));
    std::move(cases.begin(), cases.end(), std::back_inserter(all));
  }
  return all;
}

// A progress line on stderr, for transfers that take more than a second; at most
// five updates a second.
class ProgressLine {
 public:
  void Start() {
    start_ = absl::Now();
    last_ = absl::InfinitePast();
    shown_ = false;
  }
  void Update(const Progress& progress) {
    const absl::Time now = absl::Now();
    if (now - start_ < absl::Seconds(1) || now - last_ < absl::Milliseconds(200)) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\r%s %s of %s   ",
                 progress.direction == Progress::Direction::kUpload ? "uploaded" : "downloaded",
                 Bytes(progress.done).c_str(), Bytes(progress.total).c_str());
    std::fflush(stderr);
  }
  void Stop() {
    if (shown_) std::fputc('\n', stderr);
    shown_ = false;
  }

 private:
  static std::string Bytes(int64_t bytes) {
    return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  absl::Time start_;
  absl::Time last_;
  bool shown_ = false;
};

absl::StatusOr<Result> Call(Client& client, ProgressLine& progress, CallStyle style,
                            const v1::RunRequest& request) {
  progress.Start();
  absl::StatusOr<Result> result;
  switch (style) {
    case CallStyle::kUnary:
      result = client.Run(request);
      break;
    case CallStyle::kStream:
      result = client.RunStream(request);
      break;
    case CallStyle::kChunked:
      result = client.RunChunked(request);
      break;
    case CallStyle::kSharedMemory:
      result = RunInSharedMemory(client, request, absl::StrCat("tensorctl-", getpid()));
      break;
    case CallStyle::kHandles: {
      // The inputs live where the case runs: on a device for OPENCL.
      PutOptions put;
      if (request.backend() == v1::OPENCL) {
        put.backend = v1::OPENCL;
        if (request.has_device_index()) put.device_index = request.device_index();
      }
      result = RunWithHandles(client, request, put);
      break;
    }
    case CallStyle::kChain:
      result = client.RunChain(OneStepChain(request));
      break;
  }
  progress.Stop();
  return result;
}

// A case's steps in `style`: with --chain one RunChain; else its first step,
// then each later one with its "input" the output before it (as bytes) in a
// call of its own. `keep` keeps the last step's outputs.
absl::StatusOr<Result> RunSteps(Client& client, ProgressLine& progress, CallStyle style,
                                v1::Backend backend, bool keep, const Case& c) {
  std::vector<v1::RunRequest> steps = {c.request};
  std::vector<int> from;
  for (const LaterStep& later : c.then) {
    steps.push_back(later.request);
    from.push_back(later.from);
  }
  for (v1::RunRequest& step : steps) step.set_backend(backend);
  if (keep) KeepOutputs(steps.back());
  if (style == CallStyle::kChain && steps.size() > 1) {
    progress.Start();
    absl::StatusOr<Result> result = client.RunChain(ChainOf(steps, from));
    progress.Stop();
    return result;
  }
  ASSIGN_OR_RETURN(Result result, Call(client, progress, style, steps.front()));
  for (size_t i = 1; i < steps.size(); ++i) {
    const int output = from[i - 1];
    if (output >= static_cast<int>(result.outputs.size())) {
      return absl::InvalidArgumentError(absl::StrCat("then[", i - 1, "].from is ", output,
                                                     " but the step before has ",
                                                     result.outputs.size(), " outputs"));
    }
    HostTensor& previous = result.outputs[output];
    v1::Tensor& input = (*steps[i].mutable_inputs())["input"];
    input.set_dtype(previous.dtype);
    input.mutable_sizes()->Add(previous.sizes.begin(), previous.sizes.end());
    input.mutable_strides()->Add(previous.strides.begin(), previous.strides.end());
    input.set_data(std::move(previous.data));
    ASSIGN_OR_RETURN(result, Call(client, progress, style, steps[i]));
  }
  return result;
}

int RunCases(const Flags& flags, const std::vector<LoadedCase>& cases) {
  ProgressLine progress;
  ClientOptions options;
  options.progress = [&progress](const Progress& p) { progress.Update(p); };
  options.security = flags.security;
  Client client(flags.target, options);
  const bool conformance = flags.command == "conformance";
  int passed = 0;
  int failed = 0;
  bool unreachable = false;
  for (const LoadedCase& loaded : cases) {
    absl::StatusOr<Result> result;
    std::optional<std::string> mismatch;
    if (!loaded.parsed.ok()) {
      result = absl::InvalidArgumentError(
          absl::StrCat("invalid case: ", loaded.parsed.status().message()));
      mismatch = std::string(result.status().message());
    } else {
      result = RunSteps(client, progress, flags.style, flags.backend, flags.keep, *loaded.parsed);
      if (conformance) mismatch = FindMismatch(*loaded.parsed, result);
      unreachable |= result.status().code() == absl::StatusCode::kUnavailable;
    }
    if (!conformance) {
      std::printf("%s\n", RunLineJson(loaded.name, result).c_str());
    } else if (mismatch.has_value()) {
      ++failed;
      std::printf("FAIL %s: %s\n", loaded.name.c_str(), mismatch->c_str());
    } else {
      ++passed;
    }
    std::fflush(stdout);
  }
  if (conformance) {
    std::printf("conformance: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : kExitFailure;
  }
  return unreachable ? kExitFailure : 0;
}

int Encode(const Flags& flags, const std::vector<LoadedCase>& cases) {
  for (const LoadedCase& loaded : cases) {
    if (loaded.name != flags.case_name) continue;
    if (!loaded.parsed.ok()) {
      std::fprintf(stderr, "tensorctl: invalid case %s: %s\n", loaded.name.c_str(),
                   std::string(loaded.parsed.status().message()).c_str());
      return kExitFailure;
    }
    if (!loaded.parsed->then.empty()) {
      std::fprintf(stderr, "tensorctl: case %s has %zu later steps; encode takes one request\n",
                   loaded.name.c_str(), loaded.parsed->then.size());
      return kExitFailure;
    }
    v1::RunRequest request = loaded.parsed->request;
    request.set_backend(flags.backend);
    // Deterministic, so the same case always encodes to the same bytes.
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      request.SerializeToCodedStream(&coded);
    }
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() ||
        std::fflush(stdout) != 0) {
      std::perror("tensorctl: writing stdout");
      return kExitFailure;
    }
    return 0;
  }
  std::fprintf(stderr, "tensorctl: no case named \"%s\" in %s\n", flags.case_name.c_str(),
               flags.paths[0].c_str());
  return kExitUsage;
}

// "CODE: message", as the commands below print an error.
std::string StatusLine(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

int Health(const Flags& flags) {
  ClientOptions options;
  options.deadline = kHealthDeadline;
  options.skip_unhealthy_replicas = false;
  options.security = flags.security;
  Client client(flags.target, options);
  absl::StatusOr<std::string> status = client.CheckHealth(flags.health_service);
  if (!status.ok()) {
    std::printf("%s\n", StatusLine(status.status()).c_str());
    return kExitFailure;
  }
  std::printf("%s\n", status->c_str());
  return *status == "SERVING" ? 0 : kExitFailure;
}

// shm-register, shm-unregister, shm-status: prints the region(s) as JSON-ish
// lines, or the error; exits 1 on an error.
int SharedMemoryCommand(const Flags& flags) {
  ClientOptions options;
  options.security = flags.security;
  Client client(flags.target, options);
  absl::Status status;
  if (flags.command == "shm-register") {
    absl::StatusOr<v1::SharedMemoryRegion> region =
        client.RegisterSharedMemory(flags.region, flags.key, flags.byte_size);
    status = region.status();
    if (region.ok()) {
      std::printf("registered %s: key %s, %lld bytes\n", region->region().c_str(),
                  region->key().c_str(), static_cast<long long>(region->byte_size()));
    }
  } else if (flags.command == "shm-unregister") {
    status = client.UnregisterSharedMemory(flags.region);
    if (status.ok()) std::printf("unregistered %s\n", flags.region.c_str());
  } else {
    absl::StatusOr<v1::SharedMemoryStatusResponse> regions =
        client.SharedMemoryStatus(flags.region);
    status = regions.status();
    if (regions.ok()) {
      for (const v1::SharedMemoryRegion& region : regions->regions()) {
        std::printf("%s: key %s, %lld bytes, in use by %d\n", region.region().c_str(),
                    region.key().c_str(), static_cast<long long>(region.byte_size()),
                    region.in_use());
      }
      std::printf("mapped: %lld bytes\n", static_cast<long long>(regions->mapped_bytes()));
    }
  }
  if (!status.ok()) {
    std::printf("%s\n", StatusLine(status).c_str());
    return kExitFailure;
  }
  return 0;
}

// put, fetch, release, handles (see the top of this file); `cases` are put's.
int HandleCommand(const Flags& flags, const std::vector<LoadedCase>& cases) {
  ClientOptions options;
  options.security = flags.security;
  Client client(flags.target, options);
  absl::Status status;
  if (flags.command == "put") {
    const PutOptions put{.backend = flags.backend, .ttl_seconds = flags.ttl_seconds};
    for (const LoadedCase& loaded : cases) {
      if (!loaded.parsed.ok()) {
        status = loaded.parsed.status();
        std::printf("%s invalid case: %s\n", loaded.name.c_str(),
                    std::string(status.message()).c_str());
        continue;
      }
      std::map<std::string, v1::Tensor> inputs(loaded.parsed->request.inputs().begin(),
                                               loaded.parsed->request.inputs().end());
      for (auto& [name, tensor] : inputs) {
        const std::string label = absl::StrCat(loaded.name, ":", name);
        absl::StatusOr<v1::TensorHandle> handle = client.Put(HostTensorFromProto(tensor), put);
        if (handle.ok()) {
          std::printf("%s %s %s\n", label.c_str(), handle->id().c_str(),
                      HandleToJson(*handle).c_str());
        } else {
          status = handle.status();
          std::printf("%s %s\n", label.c_str(), StatusLine(status).c_str());
        }
      }
    }
    return status.ok() ? 0 : kExitFailure;
  }
  if (flags.command == "fetch") {
    absl::StatusOr<HostTensor> tensor = client.Fetch(flags.paths[0], flags.strides);
    absl::StatusOr<std::string> json = tensor.ok() ? TensorToJson(*tensor) : tensor.status();
    status = json.status();
    if (json.ok()) std::printf("%s\n", json->c_str());
  } else if (flags.command == "release") {
    status = client.Release(flags.paths);
    if (status.ok()) {
      for (const std::string& id : flags.paths) std::printf("released %s\n", id.c_str());
    }
  } else {
    absl::StatusOr<std::vector<v1::TensorHandle>> handles = client.ListAllHandles();
    status = handles.status();
    if (handles.ok()) {
      for (const v1::TensorHandle& handle : *handles) {
        std::printf("%s\n", HandleToJson(handle).c_str());
      }
    }
  }
  if (!status.ok()) {
    std::printf("%s\n", StatusLine(status).c_str());
    return kExitFailure;
  }
  return 0;
}

int Main(int argc, char** argv) {
  // Asked for, usage and version go to stdout and exit 0, whatever else is given.
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      std::printf("%s", std::string(kUsage).c_str());
      return 0;
    }
    if (arg == "--version") {
      std::printf("tensorctl %s\n", std::string(Version()).c_str());
      return 0;
    }
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "tensorctl: %s\n%s", std::string(flags.status().message()).c_str(),
                 std::string(kUsage).c_str());
    return kExitUsage;
  }
  if (flags->command == "health") return Health(*flags);
  if (IsSharedMemoryCommand(flags->command)) return SharedMemoryCommand(*flags);
  if (IsHandleIdCommand(flags->command)) return HandleCommand(*flags, {});
  absl::StatusOr<std::vector<LoadedCase>> cases = LoadAll(flags->paths);
  if (!cases.ok()) {
    std::fprintf(stderr, "tensorctl: %s\n", std::string(cases.status().message()).c_str());
    return kExitUsage;
  }
  if (flags->command == "encode") return Encode(*flags, *cases);
  if (flags->command == "put") return HandleCommand(*flags, *cases);
  return RunCases(*flags, *cases);
}

}  // namespace
}  // namespace tensorop::client

int main(int argc, char** argv) { return tensorop::client::Main(argc, argv); }
