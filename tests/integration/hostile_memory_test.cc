// Hostile and faulty clients against a real tensord with a small memory budget
// (issue 9, rows 1-7 and 12 of its attack table): each attack ends with its
// documented status, the server's peak resident memory stays within its
// baseline plus --max_memory_bytes (and a margin for gRPC's own buffers), and
// a normal request is answered within a second during and after the attack.
//
// Over 600 lines on purpose: one test per row of RELIABILITY.md's table
// "Attacks (memory, slow clients, edges)", sharing this file's attack harness
// (Attack, AttackerChannel, the budget and RSS checks); the newer surfaces'
// attacks live in hostile_surfaces_test.cc.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "tests/integration/hostile_checks.h"
#include "tests/integration/normal_answer.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/inference_requests.h"
#include "tests/support/proc_status.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::_;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRun[] = "/tensorop.v1.TensorOp/Run";
constexpr char kRunStream[] = "/tensorop.v1.TensorOp/RunStream";
constexpr char kRunBidi[] = "/tensorop.v1.TensorOp/RunBidi";
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kRunChunked[] = "/tensorop.v1.TensorOp/RunChunked";

// A channel of its own connection that reads only what the caller asks for:
// no bandwidth probing, a small per-stream window, so an answer the caller
// does not read stays in the server.
std::shared_ptr<grpc::Channel> AttackerChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  // Connected before its call: the attacks are on memory, and a connection
  // set up on a loaded machine beside a burst of them may fail once (seen
  // once in 30 runs with two busy loops: "failed to connect to all
  // addresses"), which gRPC retries after a backoff, not within the call.
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return channel;
}

// Waits (bounded) until every reservation was given back; returns what is left.
int64_t AwaitReservedZero(const TensordProcess& server) {
  int64_t reserved = -1;
  for (int attempt = 0; attempt < 200; ++attempt) {
    reserved = MetricValue(server, "tensorop_memory_reserved_bytes");
    if (reserved == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return reserved;
}

// Attackers on threads of their own, each ending with a status. An attacker
// that stalls calls AwaitRelease() before it drains its call: a gRPC client
// learns of a cancellation only once it has read what it was sent.
class Attack {
 public:
  Attack(int count, std::function<grpc::Status(int, const Attack&)> attacker) : statuses_(count) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, i, attacker] { statuses_[i] = attacker(i, *this); });
    }
  }
  ~Attack() { Join(); }

  void AwaitRelease() const {
    while (!released_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Releases the attackers and waits for their statuses.
  const std::vector<grpc::Status>& Join() {
    released_.store(true);
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    return statuses_;
  }

 private:
  std::atomic<bool> released_{false};
  std::vector<grpc::Status> statuses_;
  std::vector<std::thread> threads_;
};

// Stalls until the attack is released, then takes what arrived and the status.
grpc::Status DrainAfterRelease(const Attack& attack, RawCall& call) {
  attack.AwaitRelease();
  while (call.Read().has_value()) {
  }
  return call.Finish();
}

int Count(const std::vector<grpc::Status>& statuses, grpc::StatusCode code) {
  int count = 0;
  for (const grpc::Status& status : statuses) count += status.error_code() == code;
  return count;
}

// The flags of every attacked server: a small budget and idle timeout.
std::vector<std::string> Flags(int64_t budget, std::vector<std::string> more = {}) {
  std::vector<std::string> flags = {"--max_memory_bytes=" + std::to_string(budget),
                                    "--idle_timeout_seconds=2", "--worker_threads=2",
                                    "--backends=cpu"};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// Resident memory after startup and one normal request.
int64_t Baseline(const TensordProcess& server) {
  ExpectNormalAnswer(server);
  return ResidentBytes(server.pid());
}

const auto kBudgetRefusal = GrpcStatusIs(
    grpc::StatusCode::RESOURCE_EXHAUSTED,
    AllOf(HasSubstr("server memory budget exhausted"), HasSubstr("--max_memory_bytes")));

// Rows 1 (Run and ModelInfer): while `attack` holds answers it never reads,
// calls past the budget are refused and a normal call is still answered; the
// held calls are cancelled after the idle timeout, every attacker got one of
// the two, and nothing stays reserved.
void ExpectAnswersNeverReadRefusedOrCancelled(const TensordProcess& server,
                                              const std::string& method, Attack& attack,
                                              int64_t baseline, int64_t budget) {
  const std::string method_field = "\"method\":\"" + method + "\"";
  ASSERT_THAT(AwaitLogLine(server, {method_field, "RESOURCE_EXHAUSTED"}),
              HasSubstr("--max_memory_bytes"));
  ExpectNormalAnswer(server);  // during: the held answers leave room
  ASSERT_THAT(AwaitLogLine(server, {method_field, "CANCELLED"}),
              HasSubstr("--idle_timeout_seconds"))
      << "tensord's log:\n"
      << server.Log();
  // Every held call was cancelled before the attackers read anything.
  ASSERT_EQ(AwaitReservedZero(server), 0);
  const std::vector<grpc::Status>& statuses = attack.Join();
  for (const grpc::Status& status : statuses) {
    EXPECT_THAT(status, AnyOf(kBudgetRefusal, GrpcStatusIs(grpc::StatusCode::CANCELLED, _)));
  }
  EXPECT_GE(Count(statuses, grpc::StatusCode::RESOURCE_EXHAUSTED), 1);
  EXPECT_GE(Count(statuses, grpc::StatusCode::CANCELLED), 1);
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// Row 1: unary Runs whose (4 MiB) answers the client never reads. Those the
// budget admits are cancelled after the idle timeout; the rest are refused.
TEST(HostileMemoryTest, UnaryAnswersNeverReadAreRefusedOrCancelled) {
  const int64_t budget = 64 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  const std::string request = BroadcastRowsRequest("unread", 1024, 4096).SerializeAsString();
  Attack attack(20, [&](int, const Attack& self) {
    grpc::ClientContext context;
    RawCall call(AttackerChannel(server.target()), kRun, &context);
    call.Write(request);
    call.WritesDone();
    return DrainAfterRelease(self, call);
  });
  ExpectAnswersNeverReadRefusedOrCancelled(server, "Run", attack, baseline, budget);
}

// Row 1 through the v2 API: ModelInfer calls (the whole of a 4 MiB input
// sliced) whose answers the client never reads, held by the same budget and
// cancelled by the same idle timeout as Run.
// A v2 answer is never larger than its request, so the attack sends what it
// holds: fewer attackers than row 1, as gRPC keeps each 4 MiB request in its
// own buffers before the budget can be asked (outside it: 10 attackers leave
// 40 of kRssMargin's 64 MiB to them; 12 took 48 and passed the bound by
// 0.5 MiB once in six runs). Each admitted call holds about 4 MiB of the
// budget (its request, which its answer forwards): 7 fit, 3 are refused.
TEST(HostileMemoryTest, ModelInferAnswersNeverReadAreRefusedOrCancelled) {
  const int64_t budget = 32 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  inference::ModelInferRequest infer;
  infer.set_model_name("slice");
  AddRaw(infer, "input", "UINT8", {1024, 4096}, std::string(4 * kMiB, '\x5a'));
  AddRaw(infer, "offsets", "INT64", {2}, Bytes<int64_t>({0, 0}));
  AddRaw(infer, "window_sizes", "INT64", {2}, Bytes<int64_t>({1024, 4096}));
  AddRaw(infer, "window_strides", "INT64", {2}, Bytes<int64_t>({1, 1}));
  const std::string request = infer.SerializeAsString();
  Attack attack(10, [&](int, const Attack& self) {
    grpc::ClientContext context;
    RawCall call(AttackerChannel(server.target()), kModelInfer, &context);
    call.Write(request);
    call.WritesDone();
    return DrainAfterRelease(self, call);
  });
  ExpectAnswersNeverReadRefusedOrCancelled(server, "ModelInfer", attack, baseline, budget);
}

// Row 2: RunStreams of a 24-byte-wide stride-0 input giving 32 MiB each, read
// one part and then never again.
TEST(HostileMemoryTest, SlowRunStreamsAreRefusedOrCancelled) {
  const int64_t budget = 96 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  const std::string request = BroadcastRowsRequest("slow", 8192, 4096).SerializeAsString();
  Attack attack(8, [&](int, const Attack& self) {
    grpc::ClientContext context;
    RawCall call(AttackerChannel(server.target()), kRunStream, &context);
    call.Write(request);
    call.WritesDone();
    call.Read();  // one part, then nothing
    return DrainAfterRelease(self, call);
  });
  ASSERT_THAT(AwaitLogLine(server, {"\"method\":\"RunStream\"", "RESOURCE_EXHAUSTED"}),
              HasSubstr("--max_memory_bytes"));
  ExpectNormalAnswer(server);  // during the attack
  ASSERT_THAT(AwaitLogLine(server, {"\"method\":\"RunStream\"", "CANCELLED"}),
              HasSubstr("--idle_timeout_seconds"));
  // Every held call was cancelled before the attackers read anything.
  ASSERT_EQ(AwaitReservedZero(server), 0);
  const std::vector<grpc::Status>& statuses = attack.Join();
  for (const grpc::Status& status : statuses) {
    EXPECT_THAT(status, AnyOf(kBudgetRefusal, GrpcStatusIs(grpc::StatusCode::CANCELLED, _)));
  }
  EXPECT_GE(Count(statuses, grpc::StatusCode::RESOURCE_EXHAUSTED), 1);
  EXPECT_GE(Count(statuses, grpc::StatusCode::CANCELLED), 1);
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

std::string ChunkPart(const std::string& input, std::string data) {
  v1::RequestPart part;
  part.mutable_chunk()->set_input(input);
  part.mutable_chunk()->set_data(std::move(data));
  return part.SerializeAsString();
}

// A RunChunked request part: a uint8 input of `bytes` declared and none sent,
// sliced whole (so every byte is stored: the op reads them all).
std::string ChunkedHeader(const std::string& id, int64_t bytes) {
  v1::RequestPart part;
  *part.mutable_request() =
      SliceRequest(id, MakeTensor(v1::UINT8, {bytes}, ""), {0}, {bytes}, {1}, {bytes});
  return part.SerializeAsString();
}

// Row 3: RunChunked uploads of 24 MiB each, never half-closed. The budget
// refuses the chunks past it; the stalled uploads are cancelled.
TEST(HostileMemoryTest, UploadsNeverHalfClosedAreRefusedOrCancelled) {
  const int64_t budget = 64 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  const std::string chunk = ChunkPart("input", std::string(kMiB, 'x'));
  // One upload after the other (each stays open), so the first ones are
  // admitted whole and the later ones pass the budget.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<RawCall>> calls;
  for (int i = 0; i < 6; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    calls.push_back(std::make_unique<RawCall>(AttackerChannel(server.target()), kRunChunked,
                                              contexts.back().get()));
    calls.back()->Write(ChunkedHeader("upload" + std::to_string(i), 24 * kMiB));
    for (int c = 0; c < 24; ++c) {
      if (!calls.back()->Write(chunk)) break;
    }
  }
  ExpectNormalAnswer(server);  // during the attack
  ASSERT_THAT(AwaitLogLine(server, {"\"method\":\"RunChunked\"", "CANCELLED"}),
              HasSubstr("--idle_timeout_seconds"));
  std::vector<grpc::Status> statuses;
  for (auto& call : calls) {  // never half-closed
    while (call->Read().has_value()) {
    }
    statuses.push_back(call->Finish());
  }
  for (const grpc::Status& status : statuses) {
    EXPECT_THAT(status, AnyOf(kBudgetRefusal, GrpcStatusIs(grpc::StatusCode::CANCELLED, _)));
  }
  EXPECT_GE(Count(statuses, grpc::StatusCode::RESOURCE_EXHAUSTED), 1);
  EXPECT_GE(Count(statuses, grpc::StatusCode::CANCELLED), 1);
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// Row 4: RunBidi streams of requests with 2 MiB answers that are never read.
// Past the budget each request gets its own RESOURCE_EXHAUSTED answer; the
// stalled streams are cancelled.
TEST(HostileMemoryTest, BidiAnswersNeverReadAreRefusedOrCancelled) {
  const int64_t budget = 32 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  const std::string request = BroadcastRowsRequest("bidi", 512, 4096).SerializeAsString();
  Attack attack(4, [&](int, const Attack& self) {
    grpc::ClientContext context;
    RawCall call(AttackerChannel(server.target()), kRunBidi, &context);
    for (int r = 0; r < 16; ++r) {
      if (!call.Write(request)) break;
    }
    call.WritesDone();
    return DrainAfterRelease(self, call);  // the answers are never read
  });
  ASSERT_THAT(AwaitLogLine(server, {"\"method\":\"RunBidi\"", "RESOURCE_EXHAUSTED"}),
              HasSubstr("--max_memory_bytes"));
  ExpectNormalAnswer(server);  // during the attack
  ASSERT_THAT(AwaitLogLine(server, {"\"method\":\"RunBidi\"", "CANCELLED"}),
              HasSubstr("--idle_timeout_seconds"));
  // Every held call was cancelled before the attackers read anything.
  ASSERT_EQ(AwaitReservedZero(server), 0);
  const std::vector<grpc::Status>& statuses = attack.Join();
  // A stream whose every request was refused has only small answers, which
  // fit the client's window: it ends OK.
  for (const grpc::Status& status : statuses) {
    EXPECT_THAT(status, AnyOf(GrpcOk(), GrpcStatusIs(grpc::StatusCode::CANCELLED, _)));
  }
  EXPECT_GE(Count(statuses, grpc::StatusCode::CANCELLED), 1);
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// A RunRequest slicing a uint8 input whose `sizes` field holds `entries`
// entries of 1 (one byte each on the wire), built on the wire directly.
std::string ManySizesRequest(int64_t entries) {
  const std::string header =
      SliceRequest("sizes", MakeTensor(v1::UINT8, {}, ""), {0}, {1}, {1}, {1}).SerializeAsString();
  std::string tensor = "\x08\x0b";  // dtype UINT8
  tensor += WireString(2, std::string(static_cast<size_t>(entries), '\x01'));
  tensor += WireString(4, "x");
  return header + WireString(6, WireString(1, "input") + WireString(2, tensor));
}

// Row 5: `input.sizes` with 60 M entries, 4 at once: each would take about
// 1 GiB parsed, so each is refused before parsing.
TEST(HostileMemoryTest, SixtyMillionSizesAreRefusedBeforeParsing) {
  const int64_t budget = 320 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  const std::string request = ManySizesRequest(60'000'000);
  Attack attack(4, [&](int, const Attack&) {
    grpc::ClientContext context;
    RawCall call(AttackerChannel(server.target()), kRun, &context);
    call.Write(request);
    call.WritesDone();
    while (call.Read().has_value()) {
    }
    return call.Finish();
  });
  ExpectNormalAnswer(server);
  for (const grpc::Status& status : attack.Join()) {
    EXPECT_THAT(status, AllOf(kBudgetRefusal, GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                                           HasSubstr("Run: parsing a 60000"))));
  }
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// Row 6: a Split of a stride-0 input into 12.5 M one-element outputs (62.5 MB
// of output descriptions): refused before parsing, not planned.
TEST(HostileMemoryTest, SplitIntoMillionsOfOutputsIsRefusedBeforeParsing) {
  const int64_t budget = 256 * kMiB;
  TensordProcess server(Flags(budget));
  const int64_t baseline = Baseline(server);
  constexpr int64_t kOutputs = 12'500'000;
  v1::RunRequest header;
  header.set_id("split");
  header.mutable_split()->set_axis(0);
  (*header.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {kOutputs}, "x", {0});
  std::string request = header.SerializeAsString();
  const std::string output = WireString(7, WireString(1, "\x01"));  // outputs { sizes: [1] }
  request.reserve(request.size() + output.size() * kOutputs);
  for (int64_t i = 0; i < kOutputs; ++i) request += output;
  grpc::ClientContext context;
  RawCall call(AttackerChannel(server.target()), kRun, &context);
  call.Write(request);
  call.WritesDone();
  while (call.Read().has_value()) {
  }
  EXPECT_THAT(call.Finish(), kBudgetRefusal);
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"Run\"", "RESOURCE_EXHAUSTED"}),
              HasSubstr("--max_memory_bytes"));
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// Row 7: RunChunked declaring 40 GiB with --max_request_bytes above it: the
// declaration allocates nothing, the chunks are refused once they pass the
// budget, and SIGTERM still stops the server.
TEST(HostileMemoryTest, UploadDeclaringFortyGibIsRefusedAtTheBudget) {
  const int64_t budget = 32 * kMiB;
  TensordProcess server(Flags(budget, {"--max_request_bytes=68719476736"}));
  const int64_t baseline = Baseline(server);
  const std::string chunk = ChunkPart("input", std::string(kMiB, 'x'));
  grpc::ClientContext context;
  RawCall call(AttackerChannel(server.target()), kRunChunked, &context);
  ASSERT_TRUE(call.Write(ChunkedHeader("forty", int64_t{40} << 30)));
  for (int c = 0; c < 64; ++c) {
    if (!call.Write(chunk)) break;
  }
  EXPECT_THAT(call.Finish(),
              AllOf(kBudgetRefusal, GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                                 HasSubstr("input \"input\""))));
  EXPECT_EQ(AwaitReservedZero(server), 0);
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
  const int exit_status = server.Stop();
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
}

// The buffer pool (--buffer_pool_bytes): the large buffers a finished call
// leaves (an upload's input, an output) are kept, reserved in the budget, and
// serve the next calls of their size, which see only their own bytes; the
// kept bytes are all the budget holds between calls, and a server left idle
// frees them.
TEST(HostileMemoryTest, KeptBuffersServeTheNextCallsAndAreFreedWhenIdle) {
  TensordProcess server({"--backends=cpu", "--buffer_pool_bytes=67108864"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  constexpr int64_t kUpload = 8 * kMiB, kOutput = 6 * kMiB;
  for (int call = 0; call < 2; ++call) {
    std::string input(static_cast<size_t>(kUpload), '\0');
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>(i * 7 + call);
    // RunChunked: the whole upload back as a streamed result.
    v1::RunRequest request =
        SliceRequest(absl::StrCat("upload-", call), MakeTensor(v1::UINT8, {kUpload}, ""), {0},
                     {kUpload}, {1}, {kUpload});
    grpc::ClientContext context;
    auto stream = stub->RunChunked(&context);
    v1::RequestPart part;
    *part.mutable_request() = request;
    ASSERT_TRUE(stream->Write(part));
    for (int64_t at = 0; at < kUpload; at += kMiB) {
      part.mutable_chunk()->set_input("input");
      part.mutable_chunk()->set_data(input.substr(static_cast<size_t>(at), kMiB));
      ASSERT_TRUE(stream->Write(part));
    }
    ASSERT_TRUE(stream->WritesDone());
    std::string streamed;
    v1::ResultPart result;
    while (stream->Read(&result)) streamed += result.chunk();
    ASSERT_THAT(stream->Finish(), GrpcOk());
    EXPECT_TRUE(streamed == input) << "call " << call << ": the streamed result differs";
    // Run: a 6 MiB output, the input backwards (in order, the answer would
    // be the received bytes themselves, with no buffer).
    const std::string run_input = input.substr(0, static_cast<size_t>(kOutput));
    grpc::ClientContext run_context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&run_context,
                          SliceRequest(absl::StrCat("run-", call),
                                       MakeTensor(v1::UINT8, {kOutput}, run_input), {0}, {kOutput},
                                       {-1}, {kOutput}),
                          &response),
                GrpcOk());
    ASSERT_EQ(response.outputs_size(), 1);
    EXPECT_TRUE(response.outputs(0).data() == std::string(run_input.rbegin(), run_input.rend()))
        << "call " << call;
  }
  // The second upload, its result and the second Run's output were kept ones.
  EXPECT_GE(MetricValue(server, "tensorop_buffer_pool_reuses_total"), 3);
  const int64_t kept = MetricValue(server, "tensorop_buffer_pool_bytes");
  EXPECT_GE(kept, kUpload + kOutput);
  EXPECT_LE(kept, 64 * kMiB);
  int64_t reserved = -1;
  for (int attempt = 0; attempt < 100 && reserved != kept; ++attempt) {
    reserved = MetricValue(server, "tensorop_memory_reserved_bytes");
    if (reserved != kept) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(reserved, kept);
  // Idle: freed within the pool's 10 s and the ticker's second.
  int64_t left = kept;
  for (int attempt = 0; attempt < 300 && left != 0; ++attempt) {
    left = MetricValue(server, "tensorop_buffer_pool_bytes");
    if (left != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, 0);
  EXPECT_EQ(AwaitReservedZero(server), 0);
}

// The size of the RunResponse the server sends for BroadcastRowsRequest(id,
// rows, 1) (a 1-byte upload): the answer a first, small call showed, grown.
int64_t BroadcastAnswerBytes(const v1::RunResponse& small, int64_t rows) {
  v1::RunResponse response = small;
  v1::Tensor* tensor = response.mutable_outputs(0);
  tensor->set_sizes(0, rows);  // strides [1, 1] whatever the rows
  tensor->set_data(std::string(static_cast<size_t>(rows), '\0'));
  return static_cast<int64_t>(response.ByteSizeLong());
}

// Row 12: with a 1 MiB message limit, a Run whose answer is exactly the limit
// is answered and one a byte over it is refused before it runs, and the log
// says so; in RunBidi [ok, too big, ok] the middle request gets its own error
// and the stream goes on.
TEST(HostileMemoryTest, AnswersAtTheMessageLimitAreExact) {
  const int64_t limit = kMiB;
  TensordProcess server(
      Flags(64 * kMiB, {"--max_message_bytes=" + std::to_string(limit), "--chunk_bytes=65536"}));
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  v1::RunResponse small;
  {
    grpc::ClientContext context;
    ASSERT_THAT(stub->Run(&context, BroadcastRowsRequest("small", 16, 1), &small), GrpcOk());
    small.set_id("exact");  // the same length as "above"
  }
  int64_t fits = limit;
  while (BroadcastAnswerBytes(small, fits) > limit) --fits;
  ASSERT_EQ(BroadcastAnswerBytes(small, fits), limit) << "no width gives exactly the limit";
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, BroadcastRowsRequest("exact", fits, 1), &response), GrpcOk());
    EXPECT_EQ(static_cast<int64_t>(response.ByteSizeLong()), limit);
  }
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    EXPECT_THAT(stub->Run(&context, BroadcastRowsRequest("above", fits + 1, 1), &response),
                GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             AllOf(HasSubstr("the answer would take " + std::to_string(limit + 1) +
                                             " bytes"),
                                   HasSubstr("--max_message_bytes"))));
    EXPECT_THAT(AwaitLogLine(server, {"\"id\":\"above\""}),
                AllOf(HasSubstr("RESOURCE_EXHAUSTED"), Not(HasSubstr("\"status\":\"OK\""))));
  }
  {
    grpc::ClientContext context;
    auto stream = stub->RunBidi(&context);
    ASSERT_TRUE(stream->Write(BroadcastRowsRequest("first", 16, 1)));
    ASSERT_TRUE(stream->Write(BroadcastRowsRequest("too_big", limit, 1)));
    ASSERT_TRUE(stream->Write(BroadcastRowsRequest("third", 16, 1)));
    stream->WritesDone();
    std::map<std::string, v1::RunResponse> answers;
    v1::RunResponse answer;
    while (stream->Read(&answer)) answers[answer.id()] = answer;
    EXPECT_THAT(stream->Finish(), GrpcOk());
    ASSERT_EQ(answers.size(), 3u);
    EXPECT_EQ(answers["first"].status().code(), 0);
    EXPECT_EQ(answers["third"].status().code(), 0);
    EXPECT_EQ(answers["third"].outputs_size(), 1);
    EXPECT_EQ(answers["too_big"].status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(answers["too_big"].status().message(), HasSubstr("--max_message_bytes"));
  }
}

// Item 4: bytes that are no RunRequest, on Run and RunStream, are
// INVALID_ARGUMENT naming the message type (not UNIMPLEMENTED), and logged.
// Every method of both services parses its own bytes: garbage is
// INVALID_ARGUMENT naming the message it is not (gRPC's typed handlers would
// answer UNIMPLEMENTED with an empty message), logged and counted.
TEST(HostileMemoryTest, UnparsableRequestsAreInvalidArgument) {
  TensordProcess server(Flags(64 * kMiB));
  const std::pair<std::string, std::string> methods[] = {
      {"tensorop.v1.TensorOp/Run", "tensorop.v1.RunRequest"},
      {"tensorop.v1.TensorOp/RunStream", "tensorop.v1.RunRequest"},
      {"tensorop.v1.TensorOp/RunBidi", "tensorop.v1.RunRequest"},
      {"tensorop.v1.TensorOp/RunChunked", "tensorop.v1.RequestPart"},
      {"tensorop.v1.TensorOp/RegisterSharedMemory", "tensorop.v1.RegisterSharedMemoryRequest"},
      {"tensorop.v1.TensorOp/UnregisterSharedMemory", "tensorop.v1.UnregisterSharedMemoryRequest"},
      {"tensorop.v1.TensorOp/SharedMemoryStatus", "tensorop.v1.SharedMemoryStatusRequest"},
      {"tensorop.v1.TensorOp/Put", "tensorop.v1.PutPart"},
      {"tensorop.v1.TensorOp/Fetch", "tensorop.v1.FetchRequest"},
      {"tensorop.v1.TensorOp/Release", "tensorop.v1.ReleaseRequest"},
      {"tensorop.v1.TensorOp/ListHandles", "tensorop.v1.ListHandlesRequest"},
      {"tensorop.v1.TensorOp/RunChain", "tensorop.v1.RunChainRequest"},
      {"inference.GRPCInferenceService/ServerLive", "inference.ServerLiveRequest"},
      {"inference.GRPCInferenceService/ServerReady", "inference.ServerReadyRequest"},
      {"inference.GRPCInferenceService/ModelReady", "inference.ModelReadyRequest"},
      {"inference.GRPCInferenceService/ServerMetadata", "inference.ServerMetadataRequest"},
      {"inference.GRPCInferenceService/ModelMetadata", "inference.ModelMetadataRequest"},
      {"inference.GRPCInferenceService/ModelInfer", "inference.ModelInferRequest"},
      {"inference.GRPCInferenceService/ModelStreamInfer", "inference.ModelInferRequest"},
      {"inference.GRPCInferenceService/ModelStatistics", "inference.ModelStatisticsRequest"},
      {"inference.GRPCInferenceService/RepositoryIndex", "inference.RepositoryIndexRequest"},
      {"inference.GRPCInferenceService/SystemSharedMemoryStatus",
       "inference.SystemSharedMemoryStatusRequest"},
      {"inference.GRPCInferenceService/SystemSharedMemoryRegister",
       "inference.SystemSharedMemoryRegisterRequest"},
      {"inference.GRPCInferenceService/SystemSharedMemoryUnregister",
       "inference.SystemSharedMemoryUnregisterRequest"},
      {"inference.GRPCInferenceService/CudaSharedMemoryStatus",
       "inference.CudaSharedMemoryStatusRequest"},
      {"inference.GRPCInferenceService/CudaSharedMemoryRegister",
       "inference.CudaSharedMemoryRegisterRequest"},
      {"inference.GRPCInferenceService/CudaSharedMemoryUnregister",
       "inference.CudaSharedMemoryUnregisterRequest"},
  };
  for (const auto& [method, message] : methods) {
    EXPECT_THAT(RawExchange(Connect(server.target()), "/" + method, {"\xff\xff\xff garbage"}),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr(absl::StrCat("not a valid ", message))))
        << method;
  }
  EXPECT_THAT(AwaitLogLine(server, {"\"method\":\"RunStream\"", "INVALID_ARGUMENT"}),
              HasSubstr("tensorop.v1.RunRequest"));
  ExpectNormalAnswer(server);
}

// The budget and the idle timeout are printed at startup when defaulted, and
// their flags are bounded.
TEST(HostileMemoryTest, TheBudgetIsPrintedAndItsFlagsAreBounded) {
  {
    TensordProcess server({"--backends=cpu"});
    EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"memory_budget\""}),
                AllOf(HasSubstr("(--max_memory_bytes: half of the "),
                      AnyOf(HasSubstr("physical RAM"), HasSubstr("cgroup memory limit"))));
    EXPECT_GT(MetricValue(server, "tensorop_memory_budget_bytes"), 0);
  }
  {
    TensordProcess server({"--backends=cpu", "--max_memory_bytes=12345678"});
    EXPECT_THAT(AwaitLogLine(server, {"\"event\":\"memory_budget\""}),
                HasSubstr("12345678 bytes (--max_memory_bytes)"));
    EXPECT_EQ(MetricValue(server, "tensorop_memory_budget_bytes"), 12345678);
  }
  for (const std::string flag :
       {"--max_memory_bytes=-1", "--idle_timeout_seconds=-1", "--idle_timeout_seconds=86401"}) {
    const CommandResult result = RunCommand({TensordPath(), flag});
    EXPECT_EQ(result.exit_code, 2) << flag;
    EXPECT_THAT(result.err, HasSubstr(flag.substr(0, flag.find('=')))) << flag;
  }
}

}  // namespace
}  // namespace tensorop::testing
