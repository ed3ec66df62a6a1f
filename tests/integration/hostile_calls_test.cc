// The third attack (issue 42) on what a call carries and what the cheap calls
// cost, against a real tensord: client ids bounded at the edge in every call
// style (never stored per kept output, copied per chain step or quoted whole),
// RunBidi's error answers held in the budget until read, Release and
// ListHandles bounded on gRPC's threads. Each test asserts the attacker's
// documented status, the server alive, its peak memory within the budget, and
// a normal call answered during and after.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/hostile_checks.h"
#include "tests/integration/normal_answer.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/inference_requests.h"
#include "tests/support/proc_status.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Every refusal of an over-long id is about this long, never the id's size.
constexpr size_t kMaxRefusalBytes = 200;

auto IdRefusal(const std::string& field, int64_t bytes) {
  return GrpcStatusIs(
      grpc::StatusCode::INVALID_ARGUMENT,
      AllOf(HasSubstr(absl::StrCat(field, " is ", bytes, " bytes; ids are at most 256 bytes")),
            SizeIs(::testing::Le(kMaxRefusalBytes))));
}

// A Split of a [n] uint8 input into n one-byte outputs, each kept.
v1::RunRequest KeepEveryByte(const std::string& id, int n) {
  v1::RunRequest request;
  request.set_id(id);
  request.mutable_split()->set_axis(0);
  (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {n}, std::string(n, '\x07'));
  for (int i = 0; i < n; ++i) {
    v1::OutputDesc* output = request.add_outputs();
    output->add_sizes(1);
    output->set_keep(true);
  }
  return request;
}

// Ids of many MiB in Run, RunStream, RunChunked, RunChain, ModelInfer and an
// HTTP infer: each refused at the edge with a message naming the field, its
// length and the limit, not the id; nothing kept; the memory within the
// budget. An id at the limit still works, on every kept output.
TEST(HostileCallsTest, LongIdsAreRefusedAtTheEdgeInEveryCallStyle) {
  const int64_t budget = 256 * kMiB;
  TensordProcess server({"--max_memory_bytes=" + std::to_string(budget), "--backends=cpu",
                         "--max_message_bytes=" + std::to_string(64 * kMiB),
                         "--http_address=127.0.0.1:0"});
  ExpectNormalAnswer(server);
  const int64_t baseline = ResidentBytes(server.pid());
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  const std::string long_id(4 * kMiB, 'i');
  {  // Run: a split kept as 256 views of one input
    grpc::ClientContext context;
    v1::RunResponse response;
    EXPECT_THAT(stub->Run(&context, KeepEveryByte(long_id, 256), &response),
                IdRefusal("id", 4 * kMiB));
    EXPECT_EQ(MetricValue(server, "tensorop_handles{backend=\"cpu\"}"), 0);
  }
  {  // at the limit: answered, its id echoed
    grpc::ClientContext context;
    v1::RunResponse response;
    const std::string id(256, 'k');
    ASSERT_THAT(stub->Run(&context, KeepEveryByte(id, 256), &response), GrpcOk());
    EXPECT_EQ(response.id(), id);
    EXPECT_EQ(response.outputs_size(), 256);
    ReleaseEveryHandle(*stub);
  }
  {  // RunStream
    grpc::ClientContext context;
    v1::RunRequest request = DocSliceRequest(std::string(24 * kMiB, 's'));
    auto reader = stub->RunStream(&context, request);
    v1::ResultPart part;
    EXPECT_FALSE(reader->Read(&part));
    EXPECT_THAT(reader->Finish(), IdRefusal("id", 24 * kMiB));
  }
  {  // RunChunked: the request part's id
    grpc::ClientContext context;
    auto stream = stub->RunChunked(&context);
    v1::RequestPart part;
    *part.mutable_request() = DocSliceRequest(std::string(8 * kMiB, 'c'));
    stream->Write(part);
    stream->WritesDone();
    v1::ResultPart result;
    while (stream->Read(&result)) {
    }
    EXPECT_THAT(stream->Finish(), IdRefusal("request.id", 8 * kMiB));
  }
  {  // RunChain: 64 window steps under one 16 MiB id
    v1::RunChainRequest chain;
    chain.set_id(std::string(16 * kMiB, 'h'));
    const v1::RunRequest slice = DocSliceRequest("");
    for (int i = 0; i < 64; ++i) {
      v1::ChainStep* step = chain.add_steps();
      *step->mutable_slice() = slice.slice();
      *(*step->mutable_inputs())["input"].mutable_tensor() = slice.inputs().at("input");
      *step->add_outputs() = slice.outputs(0);
    }
    v1::ChainResult* result = chain.add_results();
    result->set_step(63);
    grpc::ClientContext context;
    auto reader = stub->RunChain(&context, chain);
    v1::ResultPart part;
    EXPECT_FALSE(reader->Read(&part));
    EXPECT_THAT(reader->Finish(), IdRefusal("id", 16 * kMiB));
  }
  {  // v2 ModelInfer
    inference::ModelInferRequest infer;
    infer.set_model_name("slice");
    infer.set_id(std::string(8 * kMiB, 'v'));
    AddRaw(infer, "input", "UINT8", {4}, Bytes<uint8_t>({1, 2, 3, 4}));
    AddRaw(infer, "offsets", "INT64", {1}, Bytes<int64_t>({0}));
    AddRaw(infer, "window_sizes", "INT64", {1}, Bytes<int64_t>({4}));
    AddRaw(infer, "window_strides", "INT64", {1}, Bytes<int64_t>({1}));
    grpc::ClientContext context;
    RawCall call(Connect(server.target()), "/inference.GRPCInferenceService/ModelInfer", &context);
    call.Write(infer.SerializeAsString());
    call.WritesDone();
    EXPECT_FALSE(call.Read().has_value());
    EXPECT_THAT(call.Finish(), IdRefusal("ModelInfer: id", 8 * kMiB));
  }
  {  // HTTP: 1 MiB of \x01 (\u0001 in JSON: a 6 MiB body), six times that in an echo
    std::string escaped;
    for (int64_t i = 0; i < kMiB; ++i) escaped += "\\u0001";
    const std::string body =
        absl::StrCat(R"({"id":")", escaped, R"(","inputs":[)",
                     R"({"name":"input","shape":[4],"datatype":"UINT8","data":[1,2,3,4]},)",
                     R"({"name":"offsets","shape":[1],"datatype":"INT64","data":[0]},)",
                     R"({"name":"window_sizes","shape":[1],"datatype":"INT64","data":[4]},)",
                     R"({"name":"window_strides","shape":[1],"datatype":"INT64","data":[1]}]})");
    httplib::Client client("127.0.0.1", server.http_port());
    client.set_read_timeout(30, 0);
    httplib::Result answer = client.Post("/v2/models/slice/infer", body, "application/json");
    ASSERT_TRUE(answer) << httplib::to_string(answer.error());
    EXPECT_EQ(answer->status, 400);
    EXPECT_THAT(answer->body, HasSubstr(absl::StrCat("slice: \\\"id\\\" is ", kMiB,
                                                     " bytes; ids are at most 256 bytes")));
    EXPECT_LE(answer->body.size(), kMaxRefusalBytes);
  }
  EXPECT_TRUE(Alive(server));
  ExpectNormalAnswer(server);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
  ExpectPeakWithin(server, baseline, budget);
}

// RunBidi: requests with ids over the limit are answered one by one, without
// the id (it cannot be echoed), and the stream goes on; the error answers the
// client has not read yet are held in the budget, and given back once read.
TEST(HostileCallsTest, BidiErrorAnswersAreReservedUntilReadAndTheStreamGoesOn) {
  const int64_t budget = 256 * kMiB;
  TensordProcess server({"--max_memory_bytes=" + std::to_string(budget), "--backends=cpu",
                         "--idle_timeout_seconds=30"});
  ExpectNormalAnswer(server);
  const int64_t baseline = ResidentBytes(server.pid());
  // Enough refusals that their answers (about 60 bytes each) overflow the
  // client's 1 KiB window and wait in the server.
  constexpr int kLongIds = 48;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Answers are not read until all are sent: a small window holds them in
  // the server.
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto channel =
      grpc::CreateCustomChannel(server.target(), grpc::InsecureChannelCredentials(), args);
  grpc::ClientContext context;
  RawCall call(channel, "/tensorop.v1.TensorOp/RunBidi", &context);
  for (int i = 0; i < kLongIds; ++i) {
    ASSERT_TRUE(call.Write(DocSliceRequest(std::string(kMiB, 'a' + i % 26)).SerializeAsString()));
  }
  // The answers wait for the client: held in the budget meanwhile.
  int64_t reserved = 0;
  for (int attempt = 0; attempt < 200 && reserved <= 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reserved = MetricValue(server, "tensorop_memory_reserved_bytes");
  }
  EXPECT_GT(reserved, 0) << "the unread error answers are not reserved";
  ExpectNormalAnswer(server);
  ASSERT_TRUE(call.Write(DocSliceRequest("fine").SerializeAsString()));
  ASSERT_TRUE(call.WritesDone());
  int refused = 0;
  int answered = 0;
  while (std::optional<std::string> bytes = call.Read()) {
    v1::RunResponse response;
    ASSERT_TRUE(response.ParseFromString(*bytes));
    if (response.status().code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ++refused;
      EXPECT_EQ(response.id(), "");
      EXPECT_THAT(response.status().message(),
                  HasSubstr(absl::StrCat("id is ", kMiB, " bytes; ids are at most 256 bytes")));
    } else {
      ++answered;
      EXPECT_EQ(response.status().code(), 0) << response.status().message();
      EXPECT_EQ(response.id(), "fine");
    }
  }
  EXPECT_THAT(call.Finish(), GrpcOk());
  EXPECT_EQ(refused, kLongIds);
  EXPECT_EQ(answered, 1);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
  EXPECT_TRUE(Alive(server));
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// Release: two 60 MB requests of 20M one-byte ids are refused before they are
// parsed (the raw unary methods take at most 128 KiB), more than 1000 ids a
// call are refused, 1000 are released; others are served throughout.
TEST(HostileCallsTest, HugeReleasesAreRefusedUnparsedAndOthersAreServed) {
  const int64_t budget = 256 * kMiB;
  TensordProcess server({"--max_memory_bytes=" + std::to_string(budget), "--backends=cpu",
                         "--max_message_bytes=" + std::to_string(128 * kMiB)});
  ExpectNormalAnswer(server);
  const int64_t baseline = ResidentBytes(server.pid());
  std::string flood;
  constexpr int64_t kIds = 20'000'000;
  flood.reserve(3 * kIds);
  for (int64_t i = 0; i < kIds; ++i) flood.append("\x0a\x01z", 3);
  std::vector<grpc::Status> statuses(2);
  std::vector<std::thread> attackers;
  for (grpc::Status& status : statuses) {
    attackers.emplace_back([&] {
      grpc::ClientContext context;
      RawCall call(Connect(server.target()), "/tensorop.v1.TensorOp/Release", &context);
      call.Write(flood);
      call.WritesDone();
      while (call.Read().has_value()) {
      }
      status = call.Finish();
    });
  }
  ExpectNormalAnswer(server);
  for (std::thread& attacker : attackers) attacker.join();
  for (const grpc::Status& status : statuses) {
    EXPECT_THAT(status, GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                     HasSubstr(absl::StrCat("Release: a ", 3 * kIds,
                                                            "-byte request; this method takes at "
                                                            "most 131072 bytes"))));
  }
  auto stub = v1::TensorOp::NewStub(Connect(server.target()));
  v1::RunResponse kept;
  {
    grpc::ClientContext context;
    ASSERT_THAT(stub->Run(&context, KeepEveryByte("kept", 1000), &kept), GrpcOk());
  }
  v1::ReleaseRequest release;
  for (const v1::Tensor& output : kept.outputs()) release.add_ids(output.handle().id());
  release.add_ids("one too many");
  {
    grpc::ClientContext context;
    v1::ReleaseResponse response;
    EXPECT_THAT(stub->Release(&context, release, &response),
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                             HasSubstr("ids has 1001 entries; Release takes at most 1000 ids")));
  }
  release.mutable_ids()->RemoveLast();
  {
    grpc::ClientContext context;
    v1::ReleaseResponse response;
    EXPECT_THAT(stub->Release(&context, release, &response), GrpcOk());
  }
  EXPECT_EQ(MetricValue(server, "tensorop_handles{backend=\"cpu\"}"), 0);
  EXPECT_TRUE(Alive(server));
  ExpectNormalAnswer(server);
  ExpectPeakWithin(server, baseline, budget);
}

// ListHandles costs the caller's page: with alice holding 50000 handles, bob
// (who holds none) paging from 32 threads sees none and takes nothing from
// alice's calls, whose pages list every one of hers in order.
TEST(HostileCallsTest, ListHandlesCostsTheCallersPageNotTheStore) {
  TestPki pki;  // tokens go over TLS only
  pki.MakeCa("ca", "test ca");
  pki.MakeServerCert("server", "ca");
  pki.Replace("tokens", "alice:alice-token-1234567890\nbob:bob-token-1234567890\n");
  const int64_t budget = 512 * kMiB;
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=" + std::to_string(budget),
                         "--tls_cert_file=" + pki.Path("server.crt"),
                         "--tls_key_file=" + pki.Path("server.key"),
                         "--auth_token_file=" + pki.Path("tokens")});
  auto stub_of = [&](const std::string& who) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pki.Read("ca.crt");
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::TensorOp::NewStub(grpc::CreateCustomChannel(
        server.target(),
        grpc::CompositeChannelCredentials(grpc::SslCredentials(options),
                                          grpc::AccessTokenCredentials(who + "-token-1234567890")),
        args));
  };
  auto alice = stub_of("alice");
  const int64_t baseline = ResidentBytes(server.pid());
  constexpr int kCalls = 50;
  constexpr int kPerCall = 1000;
  std::vector<std::string> ids;
  for (int i = 0; i < kCalls; ++i) {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(alice->Run(&context, KeepEveryByte("keep", kPerCall), &response), GrpcOk());
    for (const v1::Tensor& output : response.outputs()) ids.push_back(output.handle().id());
  }
  constexpr int kAttackers = 32;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> bob_pages{0};
  std::atomic<int64_t> bob_failures{0};
  std::mutex first_failure_mu;
  std::string first_failure;  // what the first failed page said
  // Counted down by each attacker after its first page (its connection made,
  // TLS and all), so alice's calls below all happen while every one pages.
  std::latch all_paging(kAttackers);
  std::vector<std::thread> attackers;
  for (int i = 0; i < kAttackers; ++i) {
    attackers.emplace_back([&] {
      auto bob = stub_of("bob");
      v1::ListHandlesRequest request;
      request.set_page_size(1000);
      for (bool first = true; first || !stop.load(); first = false) {
        grpc::ClientContext context;
        // The first page waits out the connection; none claims a speed.
        context.set_wait_for_ready(first);
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::ListHandlesResponse page;
        const grpc::Status status = bob->ListHandles(&context, request, &page);
        if (!status.ok() || page.handles_size() != 0) {
          if (bob_failures.fetch_add(1) == 0) {
            std::lock_guard<std::mutex> lock(first_failure_mu);
            first_failure =
                absl::StrCat(first ? "first " : "", "page: status ", status.error_code(), " \"",
                             status.error_message(), "\", ", page.handles_size(), " handles");
          }
        }
        bob_pages.fetch_add(1);
        if (first) all_paging.count_down();
      }
    });
  }
  all_paging.wait();
  // Alice's small Runs, answered while bob pages. The deadline only guards
  // against a hang: on a starved machine a call may take seconds, and no
  // speed is claimed here.
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::RunResponse response;
    const grpc::Status status = alice->Run(&context, DocSliceRequest("small"), &response);
    EXPECT_THAT(status, GrpcOk());
    if (!status.ok()) break;  // the attackers are still to be joined
    EXPECT_EQ(Unpack<float>(response.outputs(0).data()), (std::vector<float>{2, 4, 10, 12}));
  }
  stop.store(true);
  for (std::thread& attacker : attackers) attacker.join();
  EXPECT_GE(bob_pages.load(), kAttackers);
  EXPECT_EQ(bob_failures.load(), 0) << first_failure << "\n" << server.Log();
  std::vector<std::string> listed;
  v1::ListHandlesRequest request;
  request.set_page_size(1000);
  do {
    grpc::ClientContext context;
    v1::ListHandlesResponse page;
    ASSERT_THAT(alice->ListHandles(&context, request, &page), GrpcOk());
    for (const v1::TensorHandle& handle : page.handles()) listed.push_back(handle.id());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(listed, ids);
  ReleaseEveryHandle(*alice);
  EXPECT_TRUE(Alive(server));
  ExpectPeakWithin(server, baseline, budget);
}

}  // namespace
}  // namespace tensorop::testing
