// The surfaces added after the first hostile-client work — the v2 HTTP front
// end, shared memory, handles, operators whose output outgrows their input —
// attacked as a client on the network would
// (issue 36), against a real tensord: each attack gets its documented status,
// the server survives, its memory stays within the budget, and a normal call
// is answered during and after.
//
// One file a little past the project's ~600 lines: the attacks are one issue's
// findings and the operators' that followed, numbered and read in order, with
// the budget-only tensord they share.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/shared_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tests/integration/hostile_checks.h"
#include "tests/integration/normal_answer.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/proc_status.h"
#include "tests/support/tensord_process.h"
#include "tests/support/test_pki.h"

namespace tensorop::testing {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;

std::unique_ptr<v1::TensorOp::Stub> Stub(const TensordProcess& server) {
  return v1::TensorOp::NewStub(Connect(server.target()));
}

// 1. One HTTP request crashed the server: nlohmann's dump() recursing
// through 200000 levels of a value quoted into the error message.
TEST(HostileSurfacesTest, DeeplyNestedJsonIsA400AndTheServerServes) {
  TensordProcess server({"--backends=cpu"});
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string input = R"({"inputs":[{"name":"input","datatype":"UINT8",)";
  for (const std::string& body :
       {input + R"("shape":[)" + deep + "]}]}",
        input + R"("shape":[1],"parameters":{"p":)" + deep + "}}]}",
        input + R"("shape":[1],"parameters":{"binary_data_size":)" + deep + "}}]}",
        input + R"("shape":[1],"data":[{"a":)" + deep + "}]}]}"}) {
    const std::string answer =
        RawHttpExchange(server.http_port(), Post("/v2/models/slice/infer", body));
    EXPECT_THAT(answer, HasSubstr("HTTP/1.1 400 Bad Request"));
    EXPECT_THAT(answer, HasSubstr("slice: the request nests arrays and objects more than 64 deep"));
  }
  // The register body is at most 64 KiB: 30000 levels fit in it.
  const std::string register_body =
      R"({"key":"k","byte_size":)" + std::string(30000, '[') + std::string(30000, ']') + "}";
  const std::string registered = RawHttpExchange(
      server.http_port(), Post("/v2/systemsharedmemory/region/r/register", register_body));
  EXPECT_THAT(registered, HasSubstr("HTTP/1.1 400 Bad Request"));
  EXPECT_THAT(registered,
              HasSubstr(R"(register shared memory region \"r\" nests arrays and objects more )"
                        "than 64 deep"));
  ASSERT_TRUE(Alive(server));
  ExpectNormalAnswer(server);
  ExpectHttpInferAnswers(server);
}

// 2. A client shrinking the object under a Run killed the server (SIGBUS in
// the copy kernel). Now the Run fails, the region with it, and the server
// goes on. The truncation races the Run: each try either finds the object
// already short when the Run pins it, faults inside the copy, or comes too
// late; the test tries until the copy was hit.
TEST(HostileSurfacesTest, ShrinkingAnObjectUnderARunFailsTheRunNotTheServer) {
  TensordProcess server({"--backends=cpu"});
  auto stub = Stub(server);
  constexpr int64_t kSide = 8192;  // uint8 [8192, 8192]: 64 MiB in
  constexpr int64_t kOutCols = (kSide + 2) / 3;
  int faulted = 0, short_at_pin = 0, too_late = 0;
  for (int attempt = 0; attempt < 40 && faulted == 0; ++attempt) {
    const std::string suffix = absl::StrCat(getpid(), "-", attempt);
    auto in = client::SharedMemoryRegion::Create("tensorop-shrink-in-" + suffix, kSide * kSide);
    auto out =
        client::SharedMemoryRegion::Create("tensorop-shrink-out-" + suffix, kSide * kOutCols);
    ASSERT_TRUE(in.ok() && out.ok());
    for (const auto& [name, region] : {std::pair{"in", in->get()}, std::pair{"out", out->get()}}) {
      grpc::ClientContext context;
      v1::RegisterSharedMemoryRequest request;
      request.set_region(name);
      request.set_key(region->key());
      v1::RegisterSharedMemoryResponse response;
      ASSERT_THAT(stub->RegisterSharedMemory(&context, request, &response), GrpcOk());
    }
    v1::RunRequest run;
    run.set_id("shrinking");
    run.set_backend(v1::CPU);
    for (int64_t v : {0, 0}) run.mutable_slice()->add_offsets(v);
    for (int64_t v : {kSide, kSide}) run.mutable_slice()->add_window_sizes(v);
    for (int64_t v : {1, 3}) run.mutable_slice()->add_window_strides(v);
    v1::Tensor& input = (*run.mutable_inputs())["input"];
    input.set_dtype(v1::UINT8);
    input.add_sizes(kSide);
    input.add_sizes(kSide);
    input.mutable_shared_memory()->set_region("in");
    input.mutable_shared_memory()->set_byte_length(kSide * kSide);
    v1::OutputDesc* output = run.add_outputs();
    output->add_sizes(kSide);
    output->add_sizes(kOutCols);
    output->mutable_shared_memory()->set_region("out");
    output->mutable_shared_memory()->set_byte_length(kSide * kOutCols);

    std::thread shrink([&, attempt] {
      std::this_thread::sleep_for(std::chrono::microseconds(500 * (attempt % 20)));
      ASSERT_EQ(truncate(("/dev/shm/" + (*in)->key()).c_str(), 0), 0);
    });
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::RunResponse response;
    const grpc::Status status = stub->Run(&context, run, &response);
    shrink.join();
    if (status.ok()) {
      ++too_late;
    } else {
      ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
          << status.error_message();
      if (absl::StrContains(status.error_message(), "is now smaller than")) {
        ++short_at_pin;
      } else {
        EXPECT_EQ(status.error_message(),
                  absl::StrCat("shared memory object \"", (*in)->key(),
                               "\" of region \"in\" shrank while a request used it; unregister "
                               "the region and register it again"));
        ++faulted;
        // The region stays refused until it is registered again.
        grpc::ClientContext again;
        v1::RunResponse ignored;
        EXPECT_THAT(stub->Run(&again, run, &ignored),
                    GrpcStatusIs(grpc::StatusCode::FAILED_PRECONDITION, HasSubstr("shrank")));
      }
    }
    ASSERT_TRUE(Alive(server)) << "after attempt " << attempt;
    for (const char* name : {"in", "out"}) {
      grpc::ClientContext unregister;
      v1::UnregisterSharedMemoryRequest request;
      request.set_region(name);
      v1::UnregisterSharedMemoryResponse response;
      ASSERT_THAT(stub->UnregisterSharedMemory(&unregister, request, &response), GrpcOk());
    }
  }
  EXPECT_GE(faulted, 1) << short_at_pin << " tries found the object short at pin, " << too_late
                        << " came too late";
  ExpectNormalAnswer(server);
}

// 3. About 2 KB of headers locked the budget: each announced body was
// reserved 3x before a byte of it came. Now a body holds what has arrived.
TEST(HostileSurfacesTest, AnnouncedBodiesHoldNothingUntilTheyArrive) {
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=268435456"});
  std::vector<int> idle;
  for (int i = 0; i < 28; ++i) {
    const int fd = ConnectHttp(server.http_port());
    ASSERT_GE(fd, 0);
    const std::string head = absl::StrCat(
        "POST /v2/models/slice/infer HTTP/1.1\r\nContent-Length: ", 64 * kMiB, "\r\n\r\n");
    ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(head.size()));
    idle.push_back(fd);
  }
  // Each holds at most the room for its next read (64 KiB), not 3 x 64 MiB.
  constexpr int64_t kLookAhead = 64 * 1024 + 4096;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(MetricValue(server, "tensorop_memory_reserved_bytes"), 28 * kLookAhead);
  // One more that sends 8 MiB of its 64 MiB: it holds about that (its
  // buffer doubles as it grows).
  const int partial = ConnectHttp(server.http_port());
  const std::string head = absl::StrCat(
      "POST /v2/models/slice/infer HTTP/1.1\r\nContent-Length: ", 64 * kMiB, "\r\n\r\n");
  const std::string eight(8 * kMiB, ' ');
  ASSERT_EQ(::send(partial, head.data(), head.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(head.size()));
  ASSERT_EQ(::send(partial, eight.data(), eight.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(eight.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int64_t reserved = MetricValue(server, "tensorop_memory_reserved_bytes");
  EXPECT_GE(reserved, 8 * kMiB);
  EXPECT_LE(reserved, 16 * kMiB + 29 * kLookAhead);
  ExpectNormalAnswer(server);
  ExpectHttpInferAnswers(server);
  for (int fd : idle) ::close(fd);
  ::close(partial);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// 4. The front end and httplib read framing differently (two Content-Lengths,
// Transfer-Encoding after a bare line feed): six short connections held every
// HTTP worker for 30 s. Now such heads are refused before httplib sees them.
TEST(HostileSurfacesTest, AmbiguousFramingIsRefusedAndTheWorkersStayFree) {
  TensordProcess server({"--backends=cpu"});
  const std::string path = "POST /v2/models/slice/infer HTTP/1.1\r\n";
  const std::pair<std::string, std::string> attacks[] = {
      {path + "Content-Length: 1000000\r\nContent-Length: 2\r\n\r\n{}",
       "more than one Content-Length header"},
      {path + "Content-Length: 2\r\nX: y\nTransfer-Encoding: chunked\r\n\r\n{}",
       "a bare line feed at byte"},
      {path + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
       "the request has both Content-Length and Transfer-Encoding"},
  };
  for (int round = 0; round < 2; ++round) {
    for (const auto& [request, why] : attacks) {
      const std::string answer = RawHttpExchange(server.http_port(), request);
      EXPECT_THAT(answer, HasSubstr("HTTP/1.1 400 Bad Request")) << request;
      EXPECT_THAT(answer, HasSubstr(why));
    }
  }
  httplib::Client client("127.0.0.1", server.http_port());
  client.set_read_timeout(1, 0);
  httplib::Result ready = client.Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  ExpectHttpInferAnswers(server);
}

// 5. Nested JSON took about twice what was reserved for it (16 bytes per
// byte of body; nested arrays take about 28). Now the parse reserves what
// its values take as they grow: of three 6 MiB bodies at once, those that do
// not fit are refused, and the server stays within its budget.
TEST(HostileSurfacesTest, NestedJsonBodiesStayWithinTheBudget) {
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=268435456"});
  const int64_t baseline = ResidentBytes(server.pid());
  // Under AddressSanitizer (no memory bound to check there) a smaller body
  // keeps the slow parse short.
  const int64_t body_bytes = kResidentBoundsHold ? 6 * kMiB : kMiB;
  std::string data = "[[[[0]]]";
  while (static_cast<int64_t>(data.size()) < body_bytes) data += ",[[[0]]]";
  // Parsed whole, then refused for its shape: the parse is what is measured.
  const std::string body =
      R"({"inputs":[{"name":"input","datatype":"UINT8","shape":[1],"data":[)" + data + "]}]}";
  std::vector<std::string> answers(3);
  std::vector<std::thread> senders;
  for (int i = 0; i < 3; ++i) {
    senders.emplace_back([&, i] {
      answers[i] = RawHttpExchange(server.http_port(), Post("/v2/models/slice/infer", body), 120);
    });
  }
  for (std::thread& sender : senders) sender.join();
  int refused = 0;
  for (const std::string& answer : answers) {
    EXPECT_THAT(answer, AnyOf(HasSubstr("HTTP/1.1 400 Bad Request"),
                              HasSubstr("HTTP/1.1 429 Too Many Requests")));
    if (absl::StrContains(answer, " 429 ")) {
      ++refused;
      EXPECT_THAT(answer, HasSubstr("(--max_memory_bytes)"));
    } else {
      EXPECT_THAT(answer, HasSubstr(R"({"error":"slice: )")) << answer.substr(0, 400);
    }
  }
  const int64_t peak = PeakResidentBytes(server.pid());
  if (kResidentBoundsHold) {
    EXPECT_LE(peak - baseline, 256 * kMiB + kRssMargin)
        << refused << " of 3 refused; peak " << peak / kMiB << " MiB, baseline " << baseline / kMiB;
  }
  ExpectNormalAnswer(server);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// A Split of `outputs` one-byte outputs of a broadcast byte, every one kept.
v1::RunRequest SplitKeepingEvery(int outputs) {
  v1::RunRequest request;
  request.set_id("keep-all");
  request.set_backend(v1::CPU);
  request.mutable_split()->set_axis(0);
  (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {outputs}, std::string(1, 'x'), {0});
  for (int i = 0; i < outputs; ++i) {
    v1::OutputDesc* output = request.add_outputs();
    output->add_sizes(1);
    output->set_keep(true);
  }
  return request;
}

// 6. Handles were unbounded in number and their bookkeeping counted nowhere
// (1.2 M one-byte handles: +785 MiB RSS, 65 MiB reserved).
TEST(HostileSurfacesTest, HandlesAreCountedPerClientAndTheirBookkeepingBudgeted) {
  TensordProcess server({"--backends=cpu", "--max_handles_per_client=500"});
  auto stub = Stub(server);
  {
    grpc::ClientContext context;
    v1::RunResponse response;
    ASSERT_THAT(stub->Run(&context, SplitKeepingEvery(400), &response), GrpcOk());
    ASSERT_EQ(response.outputs_size(), 400);
  }
  // Each handle: its byte and 1 KiB of bookkeeping.
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 400 * 1025), 400 * 1025);
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, SplitKeepingEvery(200), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("would give peer:127.0.0.1 501 handles, over "
                                     "--max_handles_per_client=500; release handles first")));
  // What the refused call had kept was given back with it.
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 400 * 1025), 400 * 1025);
  ExpectNormalAnswer(server);
  ReleaseEveryHandle(*stub);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// 7. Handles on a device whose memory is host memory (PoCL's CPU device)
// escaped the budget. The device says what its memory is
// (tensorop_opencl_host_memory); either way the handle is accounted as that.
TEST(HostileSurfacesTest, HandlesOnADeviceInHostMemoryCountInTheBudget) {
  TensordProcess server({"--max_memory_bytes=134217728", "--opencl_staging_bytes=0",
                         "--max_resident_bytes_per_client=0"});
  const int64_t host_memory = FirstMetricValue(server, "tensorop_opencl_host_memory");
  ASSERT_THAT(host_memory, AnyOf(0, 1)) << "the test needs an OpenCL device (PoCL here)";
  auto stub = Stub(server);
  const v1::Tensor tensor = MakeTensor(v1::UINT8, {40 * kMiB}, std::string(40 * kMiB, 'a'));
  v1::TensorHandle first;
  ASSERT_THAT(PutTensor(*stub, tensor, &first, 0, kMiB, v1::OPENCL), GrpcOk());
  EXPECT_EQ(first.backend(), "opencl");
  const int64_t held = host_memory == 1 ? 40 * kMiB + 1024 : 1024;
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", held), held);
  if (host_memory == 1) {
    // 40 MiB held; a Put gathers its bytes in host memory too before they
    // go to the device: a second fits (40 + 2 x 40), a third does not.
    v1::TensorHandle second;
    ASSERT_THAT(PutTensor(*stub, tensor, &second, 0, kMiB, v1::OPENCL), GrpcOk());
    v1::TensorHandle third;
    EXPECT_THAT(
        PutTensor(*stub, tensor, &third, 0, kMiB, v1::OPENCL),
        GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED, HasSubstr("--max_memory_bytes")));
  }
  ExpectNormalAnswer(server);
  ReleaseEveryHandle(*stub);
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// 8. Two Puts announcing half the budget each, then a byte every 2 s, held
// the whole budget. Now a Put holds what it sent. (One client here: together
// they announce its whole quota, half the budget.)
TEST(HostileSurfacesTest, TricklingPutsHoldOnlyWhatTheySent) {
  TensordProcess server({"--backends=cpu", "--max_memory_bytes=268435456"});
  auto stub = Stub(server);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientWriter<v1::PutPart>>> writers;
  std::vector<v1::TensorHandle> handles(2);
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    writers.push_back(stub->Put(contexts.back().get(), &handles[i]));
    v1::PutPart header;
    header.mutable_header()->set_dtype(v1::UINT8);
    header.mutable_header()->add_sizes(64 * kMiB);
    ASSERT_TRUE(writers.back()->Write(header));
  }
  for (int tick = 0; tick < 4; ++tick) {
    v1::PutPart chunk;
    chunk.set_chunk("z");
    for (auto& writer : writers) ASSERT_TRUE(writer->Write(chunk));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    // Two handles' bookkeeping and the bytes sent so far.
    EXPECT_EQ(MetricValue(server, "tensorop_memory_reserved_bytes"), 2 * (1024 + tick + 1));
    ExpectNormalAnswer(server);
  }
  for (auto& context : contexts) context->TryCancel();
  for (auto& writer : writers) {
    EXPECT_THAT(writer->Finish(), GrpcStatusIs(grpc::StatusCode::CANCELLED, HasSubstr("")));
  }
  EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
}

// A tensord whose 32 MiB memory budget is the only limit a large output meets
// (the request and per-client limits far above it), and what each of its
// tests ends on: nothing left reserved, the server still answering, its peak
// resident memory within the budget.
struct BudgetOnlyServer {
  static constexpr int64_t kBudget = 32 * kMiB;
  TensordProcess server{{"--backends=cpu", "--max_memory_bytes=" + std::to_string(kBudget),
                         "--max_request_bytes=68719476736",
                         "--max_resident_bytes_per_client=68719476736"}};
  const int64_t baseline = [this] {
    ExpectNormalAnswer(server);
    return ResidentBytes(server.pid());
  }();

  void ExpectNothingHeld() {
    EXPECT_EQ(MetricValueOnceItIs(server, "tensorop_memory_reserved_bytes", 0), 0);
    ExpectNormalAnswer(server);
    ExpectPeakWithin(server, baseline, kBudget);
  }
};

// RESOURCE_EXHAUSTED naming the memory budget and its flag.
auto RefusedAtTheBudget() {
  return GrpcStatusIs(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      AllOf(HasSubstr("server memory budget exhausted"), HasSubstr("--max_memory_bytes")));
}

// Tile makes its output from nothing: one byte tiled to 2 GiB, streamed back
// and kept, with the request and per-client limits above it. Both are refused
// at the budget before the output is allocated, nothing stays reserved, and
// the server still answers. (Under the default limits the message limit and
// the per-client resident limit refuse them first.)
TEST(HostileSurfacesTest, OneByteTiledToGibibytesIsRefusedAtTheBudget) {
  BudgetOnlyServer budgeted;
  auto stub = Stub(budgeted.server);
  v1::RunRequest request;
  request.set_id("tile");
  request.mutable_tile()->add_repeats(int64_t{1} << 31);
  (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {1}, "x");
  const auto refused = RefusedAtTheBudget();
  {
    grpc::ClientContext context;
    auto reader = stub->RunStream(&context, request);
    v1::ResultPart part;
    while (reader->Read(&part)) {
    }
    EXPECT_THAT(reader->Finish(), refused);
  }
  request.add_outputs()->set_keep(true);
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, request, &response), refused);
  budgeted.ExpectNothingHeld();
}

// Gather and GatherElements make their output from their indices: one byte
// gathered by four bytes of indices broadcast (stride 0) to 2^31 elements. The
// indices' check reads the one value (not 2^31), then each call is refused at
// the budget before its 2 GiB output exists (kept: unkept, the message limit
// would refuse it first), and the server still answers.
TEST(HostileSurfacesTest, OneIndexBroadcastToGibibytesIsRefusedAtTheBudget) {
  BudgetOnlyServer budgeted;
  auto stub = Stub(budgeted.server);
  const auto refused = RefusedAtTheBudget();
  for (bool elements : {false, true}) {
    SCOPED_TRACE(elements ? "gather_elements" : "gather");
    v1::RunRequest request;
    if (elements) {
      request.mutable_gather_elements()->set_axis(0);
    } else {
      request.mutable_gather()->set_axis(0);
    }
    (*request.mutable_inputs())["input"] = MakeTensor(v1::UINT8, {1}, "x");
    (*request.mutable_inputs())["indices"] =
        MakeTensor(v1::UINT32, {int64_t{1} << 31}, std::string(4, '\0'), {0});
    request.add_outputs()->set_keep(true);
    grpc::ClientContext context;
    v1::RunResponse response;
    EXPECT_THAT(stub->Run(&context, request, &response), refused);
  }
  budgeted.ExpectNothingHeld();
}

// Join's surface: its inputs are as many as the caller names. 4096 inputs of
// one byte each, broadcast to 2^19 elements (the most a join takes), would make
// a 2 GiB output: refused at the budget before it exists, nothing left
// reserved. 5000 inputs are refused by count alone, 100 000 before their parse,
// and the server answers.
TEST(HostileSurfacesTest, JoinsOfManyBroadcastInputsAreRefusedAtTheirLimits) {
  BudgetOnlyServer budgeted;
  auto stub = Stub(budgeted.server);
  const auto join_of = [](int count) {
    v1::RunRequest request;
    request.mutable_join()->set_axis(0);
    for (int k = 0; k < count; ++k) {
      (*request.mutable_inputs())["inputs_" + std::to_string(k)] =
          MakeTensor(v1::UINT8, {int64_t{1} << 19}, "x", {0});
    }
    request.add_outputs()->set_keep(true);
    return request;
  };
  grpc::ClientContext context;
  v1::RunResponse response;
  EXPECT_THAT(stub->Run(&context, join_of(4096), &response), RefusedAtTheBudget());
  grpc::ClientContext more_context;
  EXPECT_THAT(stub->Run(&more_context, join_of(5000), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "inputs has 5000 entries; join takes at most 4096"));
  // 100 000 inputs (3 MB on the wire) would take some 100 MB parsed: refused
  // before the parse.
  grpc::ClientContext many_context;
  EXPECT_THAT(stub->Run(&many_context, join_of(100000), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           AllOf(HasSubstr("parsing a 3088897-byte request"),
                                 HasSubstr("--max_memory_bytes"))));
  budgeted.ExpectNothingHeld();
}

// Pad makes its output from a border: one byte padded to 4 GiB - 2 elements is
// within the element limit and refused at the budget; a megabyte of digits as
// the value is refused unread; reflections wider than the input in six
// dimensions are refused by their copies' count before a plan is made. The
// server still answers and nothing stays reserved.
TEST(HostileSurfacesTest, PadsOfHugeBordersLongValuesAndManyRunsAreRefusedAtTheirLimits) {
  BudgetOnlyServer budgeted;
  auto stub = Stub(budgeted.server);
  const auto pad_of = [](std::vector<int64_t> sizes, std::vector<int64_t> start,
                         std::vector<int64_t> end, const std::string& mode,
                         const std::string& value) {
    v1::RunRequest request;
    v1::PadAttrs& pad = *request.mutable_pad();
    pad.mutable_start_padding()->Assign(start.begin(), start.end());
    pad.mutable_end_padding()->Assign(end.begin(), end.end());
    pad.set_mode(mode);
    pad.set_value(value);
    int64_t elements = 1;
    for (int64_t size : sizes) elements *= size;
    (*request.mutable_inputs())["input"] =
        MakeTensor(v1::UINT8, sizes, std::string(static_cast<size_t>(elements), 'x'));
    request.add_outputs()->set_keep(true);
    return request;
  };
  v1::RunResponse response;
  grpc::ClientContext border_context;
  EXPECT_THAT(
      stub->Run(&border_context, pad_of({1}, {(int64_t{1} << 32) - 2}, {0}, "", "7"), &response),
      RefusedAtTheBudget());
  grpc::ClientContext value_context;
  EXPECT_THAT(
      stub->Run(&value_context, pad_of({2}, {1}, {1}, "", std::string(1 << 20, '9')), &response),
      GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                   "pad.value has 1048576 characters; at most 1024 are read"));
  grpc::ClientContext runs_context;
  const std::vector<int64_t> fours(6, 4), ones(6, 1), wide(6, 12);
  EXPECT_THAT(stub->Run(&runs_context, pad_of(fours, ones, wide, "reflect", ""), &response),
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           HasSubstr("pad in reflect mode takes 15625 copies here")));
  budgeted.ExpectNothingHeld();
}

// 9. With tokens, bob listed alice's region, read it, wrote it and
// unregistered it. Now regions belong to their identity, as handles do.
TEST(HostileSurfacesTest, WithTokensARegionIsInvisibleToOtherIdentities) {
  TestPki pki;  // tokens go over TLS only
  pki.MakeCa("ca", "test ca");
  pki.MakeServerCert("server", "ca");
  pki.Replace("tokens", "alice:alice-token-1234567890\nbob:bob-token-1234567890\n");
  TensordProcess server({"--backends=cpu", "--tls_cert_file=" + pki.Path("server.crt"),
                         "--tls_key_file=" + pki.Path("server.key"),
                         "--auth_token_file=" + pki.Path("tokens"), "--http_address=127.0.0.1:0"});
  auto stub_of = [&](const std::string& who) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pki.Read("ca.crt");
    return v1::TensorOp::NewStub(grpc::CreateChannel(
        server.target(), grpc::CompositeChannelCredentials(
                             grpc::SslCredentials(options),
                             grpc::AccessTokenCredentials(who + "-token-1234567890"))));
  };
  auto alice = stub_of("alice");
  auto bob = stub_of("bob");
  auto secret = client::SharedMemoryRegion::Create(absl::StrCat("tensorop-alice-", getpid()), 64);
  ASSERT_TRUE(secret.ok());
  std::memcpy((*secret)->bytes().data(), "alice-secret", 12);
  {
    grpc::ClientContext context;
    v1::RegisterSharedMemoryRequest request;
    request.set_region("secret");
    request.set_key((*secret)->key());
    v1::RegisterSharedMemoryResponse response;
    ASSERT_THAT(alice->RegisterSharedMemory(&context, request, &response), GrpcOk());
  }
  {  // bob's status does not list it; named, it is NOT_FOUND
    grpc::ClientContext context;
    v1::SharedMemoryStatusResponse status;
    ASSERT_THAT(bob->SharedMemoryStatus(&context, v1::SharedMemoryStatusRequest(), &status),
                GrpcOk());
    EXPECT_EQ(status.regions_size(), 0);
    grpc::ClientContext named;
    v1::SharedMemoryStatusRequest request;
    request.set_region("secret");
    EXPECT_THAT(
        bob->SharedMemoryStatus(&named, request, &status),
        GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("\"secret\" is not registered")));
  }
  {  // bob cannot read it into a Run
    v1::RunRequest run = DocSliceRequest("bob-reads");
    v1::Tensor& input = (*run.mutable_inputs())["input"];
    input.clear_data();
    input.mutable_shared_memory()->set_region("secret");
    input.mutable_shared_memory()->set_byte_length(64);
    grpc::ClientContext context;
    v1::RunResponse response;
    EXPECT_THAT(bob->Run(&context, run, &response),
                GrpcStatusIs(grpc::StatusCode::NOT_FOUND,
                             HasSubstr("shared memory region \"secret\" is not registered")));
  }
  {  // nor unregister it, nor map its object under a name of his own
    grpc::ClientContext context;
    v1::UnregisterSharedMemoryRequest request;
    request.set_region("secret");
    v1::UnregisterSharedMemoryResponse response;
    EXPECT_THAT(bob->UnregisterSharedMemory(&context, request, &response),
                GrpcStatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("\"secret\"")));
    grpc::ClientContext mine;
    v1::RegisterSharedMemoryRequest steal;
    steal.set_region("mine");
    steal.set_key((*secret)->key());
    v1::RegisterSharedMemoryResponse registered;
    EXPECT_THAT(bob->RegisterSharedMemory(&mine, steal, &registered),
                GrpcStatusIs(grpc::StatusCode::PERMISSION_DENIED,
                             HasSubstr("is mapped for another identity")));
  }
  {  // the v2 HTTP API answers bob the same
    httplib::SSLClient client("localhost", server.http_port());
    client.set_ca_cert_path(pki.Path("ca.crt").c_str());
    client.enable_server_certificate_verification(true);
    client.set_bearer_token_auth("bob-token-1234567890");
    httplib::Result status = client.Get("/v2/systemsharedmemory/status");
    ASSERT_TRUE(status) << httplib::to_string(status.error());
    EXPECT_EQ(status->status, 200);
    EXPECT_EQ(status->body, "[]");
  }
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*secret)->bytes().data()), 12),
            "alice-secret");
  {  // alice still has it
    grpc::ClientContext context;
    v1::SharedMemoryStatusResponse status;
    ASSERT_THAT(alice->SharedMemoryStatus(&context, v1::SharedMemoryStatusRequest(), &status),
                GrpcOk());
    ASSERT_EQ(status.regions_size(), 1);
    EXPECT_EQ(status.regions(0).key(), (*secret)->key());
    grpc::ClientContext unregister;
    v1::UnregisterSharedMemoryRequest request;
    request.set_region("secret");
    v1::UnregisterSharedMemoryResponse response;
    EXPECT_THAT(alice->UnregisterSharedMemory(&unregister, request, &response), GrpcOk());
  }
}

}  // namespace
}  // namespace tensorop::testing
