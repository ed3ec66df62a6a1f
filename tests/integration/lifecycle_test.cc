// A call's life on a real tensord: deadlines, cancellation, shutdown on
// SIGTERM, and the process's own flags.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::_;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

void ExpectStillServing(v1::TensorOp::Stub& stub) {
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub.Run(&context, DocSliceRequest("after"), &response), GrpcOk());
  EXPECT_EQ(response.outputs_size(), 1);
}

TEST(DeadlineTest, OneMillisecondForAHugeResultIsDeadlineExceeded) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  ExpectStillServing(*stub);  // connected: the call itself gets the millisecond
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
  // 1 GiB of output from a 32 KiB upload: far more than 1 ms of work.
  auto reader = stub->RunStream(&context, BroadcastRowsRequest("late", 32768, 32768));
  v1::ResultPart part;
  while (reader->Read(&part)) {
  }
  EXPECT_THAT(reader->Finish(), GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED, _));
  ExpectStillServing(*stub);
}

TEST(DeadlineTest, DeadlinePassingMidResultIsLoggedDeadlineExceeded) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  ExpectStillServing(*stub);
  grpc::ClientContext context;
  // Streaming 1 GiB back takes well over 200 ms, so the deadline passes while
  // the server computes or streams, never before the call reaches it.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  auto reader = stub->RunStream(&context, BroadcastRowsRequest("mid-result", 32768, 32768));
  v1::ResultPart part;
  while (reader->Read(&part)) {
  }
  EXPECT_THAT(reader->Finish(), GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED, _));

  std::string line = AwaitLogLine(server, {"\"id\":\"mid-result\""});
  EXPECT_THAT(line, HasSubstr("\"method\":\"RunStream\""));
  EXPECT_THAT(line, HasSubstr("\"status\":\"DEADLINE_EXCEEDED\"")) << server.Log();
  ExpectStillServing(*stub);
}

TEST(DeadlineTest, DeadlinePassingDuringAnUploadIsLoggedDeadlineExceeded) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  ExpectStillServing(*stub);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  auto stream = stub->RunChunked(&context);
  v1::RequestPart part;
  *part.mutable_request() = DocSliceRequest("upload-late");
  part.mutable_request()->mutable_inputs()->at("input").clear_data();
  ASSERT_TRUE(stream->Write(part));
  // Never half-close: the server waits for the rest until the deadline ends it.
  v1::ResultPart result;
  EXPECT_FALSE(stream->Read(&result));
  EXPECT_THAT(stream->Finish(), GrpcStatusIs(grpc::StatusCode::DEADLINE_EXCEEDED, _));

  std::string line = AwaitLogLine(server, {"\"id\":\"upload-late\""});
  EXPECT_THAT(line, HasSubstr("\"method\":\"RunChunked\""));
  EXPECT_THAT(line, HasSubstr("\"status\":\"DEADLINE_EXCEEDED\"")) << server.Log();
  EXPECT_THAT(line, HasSubstr("deadline exceeded before the request finished"));
}

TEST(CancellationTest, CancelledStreamIsLoggedCancelledAndTheServerGoesOn) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  auto reader = stub->RunStream(&context, BroadcastRowsRequest("cancelled", 16384, 16384));
  v1::ResultPart part;
  // The header comes first (the result may still be computing): the call is
  // now mid-stream.
  ASSERT_TRUE(reader->Read(&part));
  ASSERT_TRUE(part.has_header());
  context.TryCancel();
  while (reader->Read(&part)) {
  }
  EXPECT_THAT(reader->Finish(), GrpcStatusIs(grpc::StatusCode::CANCELLED, _));

  std::string line = AwaitLogLine(server, {"\"id\":\"cancelled\""});
  EXPECT_THAT(line, HasSubstr("\"status\":\"CANCELLED\"")) << server.Log();
  ExpectStillServing(*stub);
}

TEST(ShutdownTest, SigtermLetsTheCallInFlightFinishAndExitsZero) {
  TensordProcess server;
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  constexpr int64_t kRows = 4096, kCols = 16384;  // 64 MiB, streamed
  grpc::ClientContext context;
  auto reader = stub->RunStream(&context, BroadcastRowsRequest("drain", kRows, kCols));
  v1::ResultPart part;
  ASSERT_TRUE(reader->Read(&part));
  ASSERT_TRUE(part.has_header());

  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  int64_t received = 0;
  while (reader->Read(&part)) received += static_cast<int64_t>(part.chunk().size());
  EXPECT_THAT(reader->Finish(), GrpcOk());
  EXPECT_EQ(received, kRows * kCols);

  const int status = server.Signal(0);  // waits: a second SIGTERM would stop it at once
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ShutdownTest, IdleServerExitsZeroOnSigint) {
  TensordProcess server;
  ASSERT_EQ(kill(server.pid(), SIGINT), 0);
  const int status = server.Signal(0);
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Runs tensord with `args` and returns its exit status; for flags that make it
// exit at once.
int ExitStatusWith(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TensordPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv).exit_code;
}

TEST(FlagsTest, InvalidFlagsExitWithStatusTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--no_such_flag=1"},
                                             {"--worker_threads=many"},
                                             {"--worker_threads=0"},
                                             {"--backend=gpu"},
                                             {"--max_tensor_elements=4294967296"},
                                             {"--max_message_bytes=4294967296"},
                                             {"--chunk_bytes=0"},
                                             {"--max_queued_requests=-1"},
                                             {"--shutdown_grace_seconds=-5"},
                                             {"--drain_seconds=-1"},
                                             {"--max_connection_age_seconds=-1"},
                                             {"--max_connection_age_seconds=2147484"},
                                             {"--metrics_address=no-port"},
                                             {"--metrics_address=127.0.0.1:65536"},
                                             {"--echo=maybe"},
                                             {"--address"},
                                             {"stray"}}) {
    EXPECT_EQ(ExitStatusWith(args), 2) << args[0];
  }
}

TEST(FlagsTest, HelpExitsZero) { EXPECT_EQ(ExitStatusWith({"--help"}), 0); }

// A mistyped flag is a usage error naming the flag it is nearest to, given
// with = or before its value; one near none is named alone.
TEST(FlagsTest, AMistypedFlagSaysWhichFlagItMeant) {
  for (const auto& [args, expected] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--adress=127.0.0.1:0"}, "unknown flag --adress; did you mean --address?"},
           {{"--worker_thread", "4"},
            "unknown flag --worker_thread; did you mean --worker_threads?"},
           {{"--max-message-bytes=1024"},
            "unknown flag --max-message-bytes; did you mean --max_message_bytes?"},
           {{"--flagfle=/etc/tensord/tensord.flags"},
            "unknown flag --flagfle; did you mean --flagfile?"},
           {{"--no_such_flag=1"}, "unknown flag --no_such_flag"}}) {
    std::vector<std::string> argv = {TensordPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    const CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 2) << args[0];
    EXPECT_EQ(result.err, "tensord: " + expected + "\n(tensord --help lists the flags)\n");
    EXPECT_EQ(result.out, "");
  }
}

TEST(ShutdownTest, DrainReportsNotServingWhileStillServing) {
  TensordProcess server({"--drain_seconds=2"});
  auto health = grpc::health::v1::Health::NewStub(Connect(server.target()));
  auto check = [&health] {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status =
        health->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
    return status.ok() ? response.status() : grpc::health::v1::HealthCheckResponse::UNKNOWN;
  };
  ASSERT_EQ(check(), grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  auto status = check();
  for (int i = 0; i < 200 && status == grpc::health::v1::HealthCheckResponse::SERVING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    status = check();
  }
  EXPECT_EQ(status, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // Still within the drain: calls are answered.
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  ExpectStillServing(*stub);
  const int exit_status = server.Signal(0);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
}

// A client watching health (gRPC's client-side health checking, which the
// C++ client's service config turns on, keeps one Watch per connection) does
// not hold a stop: its watch is told NOT_SERVING and ended, and the stop does
// not wait out --shutdown_grace_seconds for it.
TEST(ShutdownTest, HealthWatchesAreEndedAndDoNotHoldTheStop) {
  using grpc::health::v1::HealthCheckResponse;
  TensordProcess server({"--drain_seconds=0", "--shutdown_grace_seconds=20"});
  auto health = grpc::health::v1::Health::NewStub(Connect(server.target()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("tensorop.v1.TensorOp");
  auto watch = health->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  std::vector<HealthCheckResponse::ServingStatus> told;
  while (watch->Read(&response)) told.push_back(response.status());
  ASSERT_FALSE(told.empty());
  EXPECT_EQ(told.back(), HealthCheckResponse::NOT_SERVING);
  EXPECT_THAT(watch->Finish(),
              GrpcStatusIs(grpc::StatusCode::UNAVAILABLE, HasSubstr("tensord is stopping")));
  const int exit_status = server.Signal(0);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  EXPECT_THAT(server.Log(), Not(HasSubstr("ran out"))) << "the stop waited out its grace period";
}

// Keeps a handle to read, for the shutdown tests.
v1::TensorHandle PutDocInput(v1::TensorOp::Stub& stub) {
  v1::TensorHandle handle;
  EXPECT_THAT(PutTensor(stub, DocSliceRequest("").inputs().at("input"), &handle), GrpcOk());
  return handle;
}

grpc::Status FetchHandle(v1::TensorOp::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::FetchRequest request;
  request.set_id(id);
  auto reader = stub.Fetch(&context, request);
  v1::ResultPart part;
  while (reader->Read(&part)) {
  }
  return reader->Finish();
}

std::chrono::duration<double> Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::steady_clock::now() - start;
}

// Handles nobody reads do not hold a SIGTERM for --shutdown_grace_seconds
// (30 s by default): the wait for calls on them ends once none came for 3 s.
TEST(ShutdownTest, ForgottenHandlesHoldTheStopOnlyBriefly) {
  TensordProcess server({"--backends=cpu"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  for (int i = 0; i < 14; ++i) PutDocInput(*stub);
  const auto sigterm = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  const int exit_status = server.Signal(0);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  EXPECT_LT(Since(sigterm).count(), 20) << "waited out the grace period";
  const std::string log = server.Log();
  EXPECT_THAT(log, HasSubstr("\"event\":\"draining\",\"detail\":\"14 handles:"));
  EXPECT_THAT(log, HasSubstr("14 handles dropped; handles served until no call used a handle "
                             "for 3s"));
}

// A client still reading its handles keeps the drain going (within the grace
// period), every read answered; once it stops, the stop follows.
TEST(ShutdownTest, HandlesBeingReadKeepTheStopGoingUntilTheReadsEnd) {
  TensordProcess server({"--backends=cpu"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  const v1::TensorHandle handle = PutDocInput(*stub);
  const auto sigterm = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  int fetched = 0;
  while (Since(sigterm).count() < 5) {  // longer than the 3 s a quiet replica waits
    ASSERT_THAT(FetchHandle(*stub, handle.id()), GrpcOk()) << "fetch " << fetched;
    ++fetched;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const int exit_status = server.Signal(0);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << exit_status;
  EXPECT_GE(fetched, 10);
  EXPECT_LT(Since(sigterm).count(), 25) << "waited out the grace period";
  EXPECT_THAT(server.Log(), HasSubstr("1 handles dropped; handles served until no call used a "
                                      "handle for 3s"));
}

// A second signal while the first drains stops tensord at once (status 1),
// logging what it cut short.
TEST(ShutdownTest, ASecondSignalStopsAtOnceSayingWhatItCutShort) {
  TensordProcess server({"--backends=cpu"});
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  const v1::TensorHandle handle = PutDocInput(*stub);
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  // Draining, and kept so by a read.
  ASSERT_THAT(FetchHandle(*stub, handle.id()), GrpcOk());
  ASSERT_THAT(AwaitLogLine(server, {"\"event\":\"draining\""}), HasSubstr("1 handles"));
  const int exit_status = server.Signal(SIGINT);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 1) << exit_status;
  // The Fetch's call may still be closing on the server (its answer reached
  // the client before its reactor's end) when the signal lands: 0 or 1 open.
  EXPECT_THAT(server.Log(),
              ContainsRegex("\"event\":\"stopped\",\"detail\":\"at once, on a second SIGINT: "
                            "[01] calls open, 1 handles dropped"));
}

// Flag files as Kubernetes mounts them from a ConfigMap.
class FlagFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) { return files_.Write(text, "tensord-flags"); }
  TempFiles files_;
};

grpc::Status RunDocSlice(const TensordProcess& server) {
  grpc::ClientContext context;
  v1::RunResponse response;
  return v1::TensorOp::NewStub(Connect(server.target()))
      ->Run(&context, DocSliceRequest("flags"), &response);
}

TEST_F(FlagFileTest, SetsFlagsAndLaterFlagsWin) {
  // The request's input holds 16 elements.
  const std::string path = Write("# limits\n\n  --max_tensor_elements=8  \n--backends=cpu\n");
  TensordProcess limited({"--flagfile=" + path});
  EXPECT_THAT(RunDocSlice(limited),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "input.sizes [1, 1, 4, 4] hold 16 elements; the limit is 8"));
  TensordProcess overridden({"--flagfile=" + path, "--max_tensor_elements=16"});
  EXPECT_THAT(RunDocSlice(overridden), GrpcOk());
}

TEST_F(FlagFileTest, BadFilesAreUsageErrorsNamingTheLine) {
  const std::string unknown = Write("--backends=cpu\n--no_such_flag=1\n");
  CommandResult result = RunCommand({TensordPath(), "--flagfile=" + unknown});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensord: " + unknown + ":2: unknown flag --no_such_flag"));

  const std::string bad_value = Write("--worker_threads=many\n");
  result = RunCommand({TensordPath(), "--flagfile", bad_value});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("tensord: " + bad_value + ":1: --worker_threads=many: "));

  const std::string nested = Write("--flagfile=/etc/other\n");
  result = RunCommand({TensordPath(), "--flagfile=" + nested});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr(nested + ":1: expected one --name=value per line"));

  result = RunCommand({TensordPath(), "--flagfile=/nonexistent/tensord.flags"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err,
              HasSubstr("tensord: --flagfile=/nonexistent/tensord.flags: cannot read the file"));
}

}  // namespace
}  // namespace tensorop::testing
