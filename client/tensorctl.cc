// tensorctl: runs conformance cases against a tensord. Its commands, flags and
// usage texts are in client/tensorctl_flags.h (`tensorctl --help`, `tensorctl
// COMMAND --help`); here, one short function per command.
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
// ADDR (--target, default localhost:50051) is one address, a comma-separated
// list of replicas' IP addresses, a gRPC target such as dns:///NAME:PORT, or a
// Unix socket (unix:///run/tensord/tensord.sock); calls go round-robin over the
// replicas (client/channel.h).
//
// run prints one JSON line per case (its outputs, or the error the server
// answered) and exits 1 when the server cannot be reached (UNAVAILABLE) or a
// case cannot be read; conformance prints each failure and a summary line and
// exits 1 on any failure; encode writes one case's RunRequest as binary
// protobuf (for `ghz -B`); health prints the gRPC health status of the server
// (or of one of its services) and exits 0 only for SERVING (the container's
// HEALTHCHECK).
//
// What tensorctl itself finds wrong goes to stderr as one "tensorctl: ..."
// line, never as if the server had answered: a usage error (exit 2, with "did
// you mean" and the --help to read), a case file it cannot read (exit 2) or a
// case in it it cannot parse ("tensorctl: FILE: case NAME: why"; run and put
// go on with the others and exit 1), a server it cannot reach ("tensorctl:
// cannot connect to ADDR: why", exit 1: every command but health and encode
// asks the server's health once, within kConnectDeadline, before its calls).
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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/case_compare.h"
#include "client/case_format.h"
#include "client/channel.h"
#include "client/client.h"
#include "client/shared_memory.h"
#include "client/status_macros.h"
#include "client/tensorctl_flags.h"
#include "core/version.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace tensorop::client {
namespace {

// A health check answers at once or not at all; Docker's HEALTHCHECK gives 3 s.
constexpr absl::Duration kHealthDeadline = absl::Seconds(2);

// How long the first contact may take before tensorctl says it cannot connect:
// a refused connection fails at once, an address that drops packets takes this.
constexpr absl::Duration kConnectDeadline = absl::Seconds(5);

// "tensorctl: FILE: case NAME: why", for a case tensorctl cannot parse.
void PrintInvalidCase(const LoadedCase& loaded) {
  std::fprintf(stderr, "tensorctl: %s: case %s: %s\n", loaded.file.c_str(), loaded.name.c_str(),
               std::string(loaded.parsed.status().message()).c_str());
}

// Whether the server answers at all: one health check of the whole server,
// without client-side health checking (a draining server counts as reached).
// Any answer counts (SERVING or not, UNAUTHENTICATED, UNIMPLEMENTED: the calls
// after it say what they meet); UNAVAILABLE and DEADLINE_EXCEEDED, as the
// check's error, do not.
absl::Status CheckReachable(const Flags& flags) {
  ClientOptions options;
  options.deadline = kConnectDeadline;
  options.skip_unhealthy_replicas = false;
  options.security = flags.security;
  Client client(flags.target, options);
  const absl::StatusOr<std::string> health = client.CheckHealth("");
  if (health.status().code() == absl::StatusCode::kUnavailable) return health.status();
  if (health.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat("no answer within ", absl::FormatDuration(kConnectDeadline)));
  }
  return absl::OkStatus();
}

// CheckReachable, printing "tensorctl: cannot connect to ADDR: why" when not.
bool Reachable(const Flags& flags) {
  const absl::Status reached = CheckReachable(flags);
  if (reached.ok()) return true;
  std::fprintf(stderr, "tensorctl: cannot connect to %s: %s\n", flags.target.c_str(),
               std::string(reached.message()).c_str());
  return false;
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
  const bool conformance = flags.command == "conformance";
  // run tells a case it cannot parse on stderr, before any call; conformance
  // counts it as a failure, in its place.
  bool invalid = false;
  bool any_valid = false;
  for (const LoadedCase& loaded : cases) {
    any_valid |= loaded.parsed.ok();
    if (!loaded.parsed.ok() && !conformance) {
      PrintInvalidCase(loaded);
      invalid = true;
    }
  }
  if (any_valid && !Reachable(flags)) return kExitFailure;
  ProgressLine progress;
  ClientOptions options;
  options.progress = [&progress](const Progress& p) { progress.Update(p); };
  options.security = flags.security;
  Client client(flags.target, options);
  int passed = 0;
  int failed = 0;
  bool unreachable = false;
  for (const LoadedCase& loaded : cases) {
    absl::StatusOr<Result> result;
    std::optional<std::string> mismatch;
    if (!loaded.parsed.ok()) {
      if (!conformance) continue;
      mismatch = absl::StrCat("invalid case: ", loaded.parsed.status().message());
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
  return unreachable || invalid ? kExitFailure : 0;
}

int Encode(const Flags& flags, const std::vector<LoadedCase>& cases) {
  for (const LoadedCase& loaded : cases) {
    if (loaded.name != flags.case_name) continue;
    if (!loaded.parsed.ok()) {
      PrintInvalidCase(loaded);
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
    // A case tensorctl cannot parse is told on stderr, before any call.
    bool any_valid = false;
    for (const LoadedCase& loaded : cases) {
      any_valid |= loaded.parsed.ok();
      if (!loaded.parsed.ok()) {
        PrintInvalidCase(loaded);
        status = loaded.parsed.status();
      }
    }
    if (any_valid && !Reachable(flags)) return kExitFailure;
    const PutOptions put{.backend = flags.backend, .ttl_seconds = flags.ttl_seconds};
    for (const LoadedCase& loaded : cases) {
      if (!loaded.parsed.ok()) continue;
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
  // Asked for, usage and version go to stdout and exit 0, whatever else is
  // given: the usage of the command named (tensorctl run --help, tensorctl
  // help run), else every command's.
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      std::optional<std::string> usage;
      for (int j = 1; j < argc && !usage.has_value(); ++j) usage = CommandUsage(argv[j]);
      std::printf("%s", usage.value_or(Usage()).c_str());
      return 0;
    }
    if (arg == "--version") {
      std::printf("tensorctl %s\n", std::string(Version()).c_str());
      return 0;
    }
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "tensorctl: %s (%s)\n", std::string(flags.status().message()).c_str(),
                 HelpHint(argc, argv).c_str());
    return kExitUsage;
  }
  if (flags->command == "health") return Health(*flags);
  if (IsSharedMemoryCommand(flags->command) || IsHandleIdCommand(flags->command)) {
    if (!Reachable(*flags)) return kExitFailure;
    return IsSharedMemoryCommand(flags->command) ? SharedMemoryCommand(*flags)
                                                 : HandleCommand(*flags, {});
  }
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
