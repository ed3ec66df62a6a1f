#include "server/v2/inference_http.h"

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "server/data/shared_memory.h"
#include "server/memory/memory_budget.h"
#include "server/memory/request_cost.h"
#include "server/pipeline/parse.h"
#include "server/telemetry/request_log.h"
#include "server/v2/inference_http_json.h"
#include "server/v2/inference_models.h"
#include "server/v2/inference_service.h"
#include "server/wire/quoted.h"
#include "server/wire/status_map.h"

namespace tensorop::server {
namespace {

using State = InferenceHttpServer::State;

// The method name in the request log and metrics.
constexpr absl::string_view kMethod = "HttpInfer";
// A whole body holds the waiting room's buffer and the handler's copies.
constexpr int64_t kBodyCopies = 1 + kHandlerBodyCopies;
// A JSON answer takes at most this many bytes (text and nlohmann values) per
// byte of raw output: 16 for a one-byte element's value, 9 for an FP16's text.
constexpr int64_t kJsonAnswerBytesPerByte = 32;
constexpr absl::string_view kBearer = "Bearer ";
constexpr absl::string_view kHealthPrefix = "/v2/health/";
constexpr char kJson[] = "application/json";

// What the waiting room admitted a request with, until it is answered.
// Its ledger checks, once the answer is written and the hold let go, that
// every byte reserved for the request was given back.
struct Hold {
  explicit Hold(MemoryBudget& budget)
      : ledger(budget, "HTTP request"), body(ledger.Empty()), answer(ledger.Empty()) {}
  const MemoryBudget::CallLedger ledger;
  MemoryBudget::Reservation body;    // the body as it arrives, then httplib's copy
  MemoryBudget::Reservation answer;  // an infer's answer, until it is written
  std::string identity;              // CallerIdentity: token name and certificate subject, or empty
};

void Reply(httplib::Response& response, const absl::Status& status) {
  response.status = ToHttpStatus(status.code());
  response.set_content(HttpErrorJson(status), kJson);
}

HttpRefusal Refusal(const absl::Status& status) {
  return HttpRefusal{ToHttpStatus(status.code()), kJson, HttpErrorJson(status)};
}

HttpAdmission Admit(State& state, const HttpRequestHead& head) {
  auto hold = std::make_shared<Hold>(state.engine->budget());
  std::string token_name;
  if (state.options.tokens != nullptr && !absl::StartsWith(head.target, kHealthPrefix)) {
    auto header = head.headers.find("authorization");
    absl::StatusOr<std::string> name =
        CheckHttpBearer(header == head.headers.end() ? nullptr : &header->second,
                        *state.options.tokens, *state.options.auth_counters);
    if (!name.ok()) return HttpAdmission{Refusal(name.status()), nullptr, nullptr};
    token_name = *std::move(name);
  }
  // As gRPC's PeerIdentity: the same caller over either protocol owns the
  // same regions and is logged alike.
  hold->identity = CallerIdentity(token_name, head.peer_certificate_subject);
  const std::string what = absl::StrCat(head.method, " ", head.target, ": a ", head.content_length,
                                        "-byte request body as received");
  // A body that could not be held now is refused from the headers; one that
  // could is held as it arrives, not as its Content-Length announces it, so
  // idle connections that only announced large bodies hold nothing.
  if (head.content_length > 0) {
    absl::Status fits = state.engine->budget().CheckRoom(kBodyCopies * head.content_length, what);
    if (!fits.ok()) return HttpAdmission{Refusal(fits), nullptr, nullptr};
  }
  auto hold_bytes = [body = &hold->body, what](int64_t bytes) {
    absl::Status reserved = body->Resize(bytes, what);
    return reserved.ok() ? HttpRefusal{} : Refusal(reserved);
  };
  return HttpAdmission{{}, hold, std::move(hold_bytes)};
}

// An infer request's body parsed, for `model` (`version`), with what the
// parse takes reserved in `request_bytes` as its values are made; what stays
// reserved after: the parsed request.
absl::StatusOr<HttpInferRequest> ParseHttpInfer(const httplib::Request& http,
                                                const std::string& model,
                                                const std::string& version,
                                                MemoryBudget::Reservation& request_bytes) {
  std::optional<int64_t> header_length;
  if (http.has_header(std::string(kInferenceHeaderContentLength).c_str())) {
    const std::string text =
        http.get_header_value(std::string(kInferenceHeaderContentLength).c_str());
    int64_t value = -1;
    if (!absl::SimpleAtoi(text, &value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(model, ": ", kInferenceHeaderContentLength,
                                                     " \"", text, "\" is not a size"));
    }
    header_length = value;
  }
  const std::string parsing = absl::StrCat(
      kMethod, ": parsing a ", header_length.value_or(static_cast<int64_t>(http.body.size())),
      "-byte JSON request");
  // The request's overhead (kRequestOverheadBytes) as ModelInfer's; the
  // parse itself is reserved as its values are made.
  RETURN_IF_ERROR(ReserveParsing(/*bound=*/0, parsing, request_bytes));
  ASSIGN_OR_RETURN(
      HttpInferRequest parsed,
      ParseHttpInferRequest(model, version, http.body, header_length,
                            [&](int64_t bytes) { return request_bytes.Grow(bytes, parsing); }));
  // The JSON is freed; what stays: the request.
  HoldParsedRequest(static_cast<int64_t>(parsed.request.ByteSizeLong()), request_bytes);
  return parsed;
}

// The stop check of an HTTP inference: the server stopping, or the HTTP API's
// time for one inference (options.infer_deadline, from now) passed.
StopCheck HttpInferStop(const State& state) {
  const auto deadline = std::chrono::steady_clock::now() + state.options.infer_deadline;
  return [&state, deadline, limit = state.options.infer_deadline]() {
    if (state.stopping.load(std::memory_order_relaxed)) {
      return absl::CancelledError("the server is shutting down");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the inference did not finish within the HTTP API's ", limit.count() / 1000, " s"));
    }
    return absl::OkStatus();
  };
}

// `parsed` run on a scheduler worker (the HTTP worker waits for it, bounded by
// `stop`) into its v2 response, the outputs reserved in `execution`. Its
// tensors' contents move into the native request.
absl::StatusOr<inference::ModelInferResponse> ExecuteHttpInfer(
    Engine& engine, HttpInferRequest& parsed, const StopCheck& stop, CallRecord& record,
    MemoryBudget::Reservation& execution) {
  inference::ModelInferResponse response;
  // Shared: the task may still be inside set_value when get() returns.
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> finished = done->get_future();
  RETURN_IF_ERROR(engine.Submit([&, done] {
    done->set_value(Guarded([&]() -> absl::Status {
      RETURN_IF_ERROR(stop());
      ASSIGN_OR_RETURN(v1::RunRequest run, ToRunRequest(parsed.request));
      Redescribe(record, DescribeRequest(kMethod, run));
      v1::RunResponse native_response;
      Placement placement;
      RETURN_IF_ERROR(NameSharedMemoryOutput(
          parsed.request, engine.ExecuteOnWorker(
                              engine.Call(run, placement, stop, execution), record,
                              {.response = &native_response, .too_big_hint = kAnswerTooBigHint})));
      run.Clear();  // the inputs are done with
      ASSIGN_OR_RETURN(response, ToModelInferResponse(parsed.request, native_response));
      return absl::OkStatus();
    }));
  }));
  // The task always sets it: its stop check bounds the wait.
  RETURN_IF_ERROR(finished.get());
  return response;
}

// `response` rendered as the JSON answer to `parsed`, reserved in `answer`
// (first at its most, then at its size).
absl::StatusOr<HttpBody> RenderAnswer(const HttpInferRequest& parsed,
                                      inference::ModelInferResponse& response,
                                      MemoryBudget::Reservation& answer) {
  int64_t raw = 0;
  for (const std::string& bytes : response.raw_output_contents()) {
    raw += static_cast<int64_t>(bytes.size());
  }
  HttpBody body;
  RETURN_IF_ERROR(answer.GrowWhileMaking(
      raw * kJsonAnswerBytesPerByte,
      [&] {
        return absl::StrCat(kMethod, ": the answer to request ", Quoted(parsed.request.id()));
      },
      [&]() -> absl::StatusOr<int64_t> {
        ASSIGN_OR_RETURN(body, RenderHttpInferResponse(parsed, response));
        response.Clear();
        return static_cast<int64_t>(body.body.size());
      }));
  return body;
}

// An inference, on the HTTP worker that read it; the work itself runs on a
// scheduler worker, as gRPC ModelInfer's.
void Infer(State& state, const httplib::Request& http, httplib::Response& out) {
  Engine& engine = *state.engine;
  std::shared_ptr<Hold> hold = std::static_pointer_cast<Hold>(BoundedHttpServer::CurrentHold());
  // Its body stays held (by the waiting room's admission) until the request
  // is answered; the parse, the execution and the answer hold reservations of
  // their own beside it.
  if (hold == nullptr) hold = std::make_shared<Hold>(engine.budget());

  CallRecord record;
  record.method = kMethod;
  record.identity = hold->identity;
  record.trace = JoinTrace(http.get_header_value(std::string(kTraceparentHeader).c_str()));
  if (!record.trace.empty()) {
    out.set_header(std::string(kTraceparentHeader).c_str(), TraceparentOf(record.trace).c_str());
  }
  const std::string model = http.matches[1];
  const std::string version = http.matches.size() > 2 ? std::string(http.matches[2]) : "";
  // A model's name is its operator's; anything else stays out of the log.
  if (CheckModel(model, version).ok()) record.op = model;

  engine.BeginOpenCall();
  HttpBody answered;
  const absl::Status status = Guarded([&]() -> absl::Status {
    MemoryBudget::Reservation request_bytes = hold->body.Sibling();
    ASSIGN_OR_RETURN(HttpInferRequest parsed, ParseHttpInfer(http, model, version, request_bytes));
    MemoryBudget::Reservation execution = hold->body.Sibling();  // the outputs and the response
    ASSIGN_OR_RETURN(inference::ModelInferResponse response,
                     ExecuteHttpInfer(engine, parsed, HttpInferStop(state), record, execution));
    // What stays held until the answer is written: the answer and httplib's
    // body; the request and the execution's bytes go as this returns.
    ASSIGN_OR_RETURN(answered, RenderAnswer(parsed, response, hold->answer));
    return absl::OkStatus();
  });
  engine.RecordOutcome(record, status);
  engine.EndOpenCall();
  if (!status.ok()) {
    Reply(out, status);
    return;
  }
  if (answered.header_length.has_value()) {
    out.set_header(std::string(kInferenceHeaderContentLength).c_str(),
                   std::to_string(*answered.header_length));
  }
  out.status = 200;
  out.body = std::move(answered.body);
  out.set_header("Content-Type", answered.content_type);
  // `hold` (the thread's too) keeps the reservation until the answer is written.
}

// The system shared memory extension, as Triton's HTTP API: the gRPC calls'
// answers (server/v2/inference_service.h) rendered as JSON; small, answered on
// the HTTP worker. A region's name is the path segment {name}.
// The caller of an HTTP request, as SharedMemoryCallerOf for gRPC: its
// CallerIdentity (from the waiting room's admission) and whether it is on this
// host.
SharedMemoryCaller HttpCaller(const httplib::Request& in) {
  std::shared_ptr<Hold> hold = std::static_pointer_cast<Hold>(BoundedHttpServer::CurrentHold());
  return SharedMemoryCaller{.owner = hold != nullptr ? hold->identity : std::string(),
                            .local = IsLoopbackAddress(in.remote_addr)};
}

// The routes as registered with httplib, kept so that a path served for
// other methods is answered 405 with those methods (Allow), not 404.
class RouteTable {
 public:
  explicit RouteTable(httplib::Server& http) : http_(http) {}

  template <typename Handler>
  void Get(const std::string& pattern, Handler handler) {
    http_.Get(pattern, std::move(handler));
    routes_->emplace_back("GET", std::regex(pattern));
  }
  template <typename Handler>
  void Post(const std::string& pattern, Handler handler) {
    http_.Post(pattern, std::move(handler));
    routes_->emplace_back("POST", std::regex(pattern));
  }

  // The methods served at `path`, in registration order ("GET, POST"); empty
  // for a path no route serves. Safe to call from httplib's threads once the
  // routes are registered (read only).
  std::function<std::string(const std::string& path)> MethodsAt() const {
    return [routes = routes_](const std::string& path) {
      std::vector<std::string> methods;
      for (const auto& [method, pattern] : *routes) {
        if (std::regex_match(path, pattern) && absl::c_find(methods, method) == methods.end()) {
          methods.push_back(method);
        }
      }
      return absl::StrJoin(methods, ", ");
    };
  }

 private:
  httplib::Server& http_;
  std::shared_ptr<std::vector<std::pair<std::string, std::regex>>> routes_ =
      std::make_shared<std::vector<std::pair<std::string, std::regex>>>();
};

void SystemSharedMemoryRoutes(State* state, RouteTable& http) {
  constexpr char kRegion[] = "/v2/systemsharedmemory/region/([^/]+)";
  auto region = [](const httplib::Request& in) {
    return in.matches.size() > 1 ? std::string(in.matches[1]) : std::string();
  };
  auto status = [state, region](const httplib::Request& in, httplib::Response& out) {
    inference::SystemSharedMemoryStatusRequest request;
    request.set_name(region(in));
    absl::StatusOr<inference::SystemSharedMemoryStatusResponse> answer =
        SystemSharedMemoryStatusAnswer(state->engine->options().shared_memory, request,
                                       HttpCaller(in));
    if (!answer.ok()) return Reply(out, answer.status());
    out.set_content(SystemSharedMemoryStatusJson(*answer), kJson);
  };
  http.Get("/v2/systemsharedmemory/status", status);
  http.Get(absl::StrCat(kRegion, "/status"), status);
  http.Post(absl::StrCat(kRegion, "/register"), [state, region](const httplib::Request& in,
                                                                httplib::Response& out) {
    absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> request =
        ParseSystemSharedMemoryRegister(region(in), in.body);
    if (!request.ok()) return Reply(out, request.status());
    absl::Status registered = SystemSharedMemoryRegisterAnswer(
                                  state->engine->options().shared_memory, *request, HttpCaller(in))
                                  .status();
    if (!registered.ok()) return Reply(out, registered);
    out.status = 200;
  });
  auto unregister = [state, region](const httplib::Request& in, httplib::Response& out) {
    inference::SystemSharedMemoryUnregisterRequest request;
    request.set_name(region(in));
    absl::Status unregistered = SystemSharedMemoryUnregisterAnswer(
                                    state->engine->options().shared_memory, request, HttpCaller(in))
                                    .status();
    if (!unregistered.ok()) return Reply(out, unregistered);
    out.status = 200;
  };
  http.Post("/v2/systemsharedmemory/unregister", unregister);
  http.Post(absl::StrCat(kRegion, "/unregister"), unregister);
  // CUDA shared memory: UNIMPLEMENTED (501), as the gRPC calls.
  auto cuda = [](absl::string_view method) {
    return [method](const httplib::Request&, httplib::Response& out) {
      Reply(out, CudaSharedMemoryUnimplemented(method));
    };
  };
  constexpr char kCuda[] = "/v2/cudasharedmemory(?:/region/[^/]+)?";
  http.Get(absl::StrCat(kCuda, "/status"), cuda("CudaSharedMemoryStatus"));
  http.Post("/v2/cudasharedmemory/region/[^/]+/register", cuda("CudaSharedMemoryRegister"));
  http.Post(absl::StrCat(kCuda, "/unregister"), cuda("CudaSharedMemoryUnregister"));
}

void Routes(const std::shared_ptr<State>& shared, httplib::Server& server) {
  State* state = shared.get();
  RouteTable http(server);
  http.Get("/v2/health/live",
           [](const httplib::Request&, httplib::Response& out) { out.status = 200; });
  http.Get("/v2/health/ready", [state](const httplib::Request&, httplib::Response& out) {
    out.status = state->ready.load(std::memory_order_acquire) ? 200 : 400;
  });
  http.Get("/v2", [state](const httplib::Request&, httplib::Response& out) {
    out.set_content(
        ServerMetadataJson(ServerMetadataAnswer(
            /*system_shared_memory=*/state->engine->options().shared_memory != nullptr)),
        kJson);
  });
  http.Post("/v2/repository/index", [](const httplib::Request&, httplib::Response& out) {
    out.set_content(RepositoryIndexJson(RepositoryIndexAnswer()), kJson);
  });
  auto stats = [state](const httplib::Request& in, httplib::Response& out) {
    const std::string name = in.matches.size() > 1 ? std::string(in.matches[1]) : "";
    const std::string version = in.matches.size() > 2 ? std::string(in.matches[2]) : "";
    absl::StatusOr<inference::ModelStatisticsResponse> answer =
        ModelStatisticsAnswer(state->metrics, name, version);
    if (!answer.ok()) return Reply(out, answer.status());
    out.set_content(ModelStatisticsJson(*answer), kJson);
  };
  http.Get("/v2/models/stats", stats);
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/stats)", stats);
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)", [state](const httplib::Request& in,
                                                                        httplib::Response& out) {
    absl::Status known = CheckModel(std::string(in.matches[1]), std::string(in.matches[2]));
    if (!known.ok()) return Reply(out, known);
    out.status = state->ready.load(std::memory_order_acquire) ? 200 : 400;
  });
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/config)",
           [](const httplib::Request& in, httplib::Response& out) {
             absl::StatusOr<inference::ModelConfigResponse> config =
                 ModelConfig(std::string(in.matches[1]), std::string(in.matches[2]));
             if (!config.ok()) return Reply(out, config.status());
             out.set_content(ModelConfigJson(config->config()), kJson);
           });
  http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)",
           [](const httplib::Request& in, httplib::Response& out) {
             absl::StatusOr<inference::ModelMetadataResponse> metadata =
                 ModelMetadata(std::string(in.matches[1]), std::string(in.matches[2]));
             if (!metadata.ok()) return Reply(out, metadata.status());
             out.set_content(ModelMetadataJson(*metadata), kJson);
           });
  http.Post(
      R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)",
      [state](const httplib::Request& in, httplib::Response& out) { Infer(*state, in, out); });
  SystemSharedMemoryRoutes(state, http);
  // Unknown routes (httplib answers 404 or 400 with no body): the JSON error;
  // a route served for other methods is 405 with the methods it takes.
  server.set_error_handler(
      [methods_at = http.MethodsAt()](const httplib::Request& in, httplib::Response& out) {
        if (!out.body.empty()) return;
        std::string message;
        if (out.status == 404) {
          if (const std::string allowed = methods_at(in.path); !allowed.empty()) {
            out.status = 405;
            out.set_header("Allow", allowed);
            message = absl::StrCat(in.method, " ", in.path, " is not served; use ", allowed);
          } else {
            message = absl::StrCat("no such route: ", in.method, " ", in.path,
                                   " (the Open Inference Protocol's /v2 routes are served here)");
          }
        } else {
          message = absl::StrCat("the request ", in.method, " ", in.path, " was refused");
        }
        out.set_content(HttpErrorJson(absl::Status(absl::StatusCode::kUnknown, message)), kJson);
      });
}

}  // namespace

absl::StatusOr<std::string> CheckHttpBearer(const std::string* header, const TokenStore& tokens,
                                            AuthCounters& counters) {
  if (header == nullptr || !absl::StartsWith(*header, kBearer)) {
    counters.missing.fetch_add(1, std::memory_order_relaxed);
    return absl::UnauthenticatedError(
        "this server needs a bearer token: send the header \"Authorization: Bearer <token>\"");
  }
  std::optional<std::string> name =
      tokens.Check(absl::StripAsciiWhitespace(absl::string_view(*header).substr(kBearer.size())));
  if (!name.has_value()) {
    counters.invalid.fetch_add(1, std::memory_order_relaxed);
    return absl::UnauthenticatedError(
        "the bearer token is not accepted by this server (not in its --auth_token_file, or "
        "rotated out)");
  }
  return *name;
}

absl::StatusOr<std::unique_ptr<InferenceHttpServer>> InferenceHttpServer::Start(
    const std::string& address, Engine* engine, const Metrics* metrics,
    InferenceHttpOptions options) {
  auto state = std::make_shared<State>();
  state->engine = engine;
  state->metrics = metrics;
  state->options = std::move(options);

  BoundedHttpOptions bounded;
  bounded.max_waiting = 256;
  bounded.request_deadline = state->options.request_deadline;
  bounded.max_header_bytes = 16 << 10;
  bounded.max_body_bytes = state->options.max_body_bytes;
  bounded.max_body_flag = "--max_message_bytes";
  bounded.worker_threads = state->options.worker_threads;
  bounded.queued_requests = 64;
  bounded.write_deadline = state->options.write_deadline;
  bounded.keep_alive_idle = state->options.keep_alive_idle;
  bounded.admit = [raw = state.get()](const HttpRequestHead& head) { return Admit(*raw, head); };
  bounded.render_refusal = [](int status, const std::string& message) {
    return HttpRefusal{status, kJson,
                       HttpErrorJson(absl::Status(absl::StatusCode::kUnknown, message))};
  };
  bounded.make_connection = state->options.make_connection;

  absl::StatusOr<std::unique_ptr<BoundedHttpServer>> http =
      BoundedHttpServer::Start(address, "--http_address", std::move(bounded),
                               [&state](httplib::Server& routes) { Routes(state, routes); });
  if (!http.ok()) return http.status();
  std::unique_ptr<InferenceHttpServer> server(new InferenceHttpServer());
  server->state_ = std::move(state);
  server->http_ = *std::move(http);
  return server;
}

InferenceHttpServer::~InferenceHttpServer() {
  if (state_ != nullptr) state_->stopping.store(true);
  http_.reset();
}

}  // namespace tensorop::server
