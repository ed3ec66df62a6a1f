// The request pipeline (server/pipeline/pipeline.h) without a gRPC server: parsing
// against the memory budget, plan + execute on the CPU backend into an inline
// answer and into streamed result parts, and the limits that refuse a request
// before any work.
#include "server/pipeline/pipeline.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/memory/received_bytes.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "tests/server/pipeline/pipeline_fixture.h"
#include "tests/support/set_ints.h"
#include "tests/support/status_matchers.h"

namespace tensorop::server {
namespace {

using ::tensorop::testing::SetInts;
using ::tensorop::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

grpc::ByteBuffer Serialized(const v1::RunRequest& request) {
  grpc::ByteBuffer bytes;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<v1::RunRequest>::Serialize(request, &bytes, &own).ok());
  return bytes;
}

grpc::ByteBuffer RawBytes(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

TEST_F(PipelineTest, ParseRequestParsesAndReservesTheRequestAndItsOutputs) {
  const v1::RunRequest sent = TwoByThreeSliceRequest();
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunRequest parsed;
  ASSERT_OK(ParseRequest(Serialized(sent), "Run", reservation, &parsed));
  EXPECT_EQ(parsed.id(), "slice-1");
  EXPECT_EQ(parsed.inputs().at("input").data(), sent.inputs().at("input").data());
  // At least the fixed overheads: the request's and one output's.
  EXPECT_GE(reservation.bytes(), kRequestOverheadBytes + kOutputOverheadBytes);
  EXPECT_EQ(budget_.reserved(), reservation.bytes());
}

TEST_F(PipelineTest, ParseRequestRefusesBytesThatAreNoRunRequest) {
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunRequest parsed;
  // Field 1 (id) declared 5 bytes long with 1 byte present.
  EXPECT_THAT(ParseRequest(RawBytes(std::string("\x0a\x05", 2) + "a"), "RunBidi: message 3",
                           reservation, &parsed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RunBidi: message 3: ")));
  EXPECT_EQ(budget_.reserved(), 0);
}

TEST_F(PipelineTest, ParseRequestOverTheBudgetNamesTheFlagBeforeParsing) {
  MemoryBudget small(1024);
  MemoryBudget::Reservation reservation = small.Empty();
  v1::RunRequest parsed;
  const grpc::ByteBuffer bytes = Serialized(TwoByThreeSliceRequest());
  EXPECT_THAT(
      ParseRequest(bytes, "Run", reservation, &parsed),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr(absl::StrCat("Run: parsing a ", bytes.Length(), "-byte request")),
                     HasSubstr("--max_memory_bytes"))));
  EXPECT_EQ(parsed.id(), "");  // refused before parsing
  EXPECT_EQ(small.reserved(), 0);
}

TEST_F(PipelineTest, LargeInputsAreTakenOutOfTheRequestIntoBuffersOfTheirOwn) {
  // A 2 MiB int32 input (every value its index), sliced to its last row.
  constexpr int32_t kRows = 512, kCols = 1024;
  std::vector<int32_t> values(static_cast<size_t>(kRows) * kCols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>(i);
  v1::RunRequest sent = TwoByThreeSliceRequest();
  v1::Tensor& input = (*sent.mutable_inputs())["input"];
  SetInts(input.mutable_sizes(), {kRows, kCols});
  input.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  SetInts(sent.mutable_slice()->mutable_offsets(), {kRows - 1, 0});
  SetInts(sent.mutable_slice()->mutable_window_sizes(), {1, kCols});
  SetInts(sent.mutable_outputs(0)->mutable_sizes(), {1, kCols});
  BufferPool pool(int64_t{64} << 20, &budget_);
  MemoryBudget::Reservation reservation = budget_.Empty();
  grpc::ByteBuffer bytes = Serialized(sent);
  ReceivedBytes as_received(&bytes, reservation.Sibling());
  ASSERT_OK(as_received.Reserve("Run"));
  v1::RunRequest parsed;
  InputBuffers inputs;
  ASSERT_OK(ParseRequestAndInputs(as_received, "Run", reservation, &pool, &parsed, &inputs));
  EXPECT_EQ(bytes.Length(), 0u);  // the received bytes are let go
  EXPECT_EQ(as_received.reserved(), 0);
  EXPECT_EQ(parsed.inputs().at("input").data(), "");
  EXPECT_THAT(parsed.inputs().at("input").sizes(), ElementsAre(kRows, kCols));
  ASSERT_EQ(inputs.count("input"), 1u);
  EXPECT_EQ(InputBytes(inputs), kRows * kCols * 4);
  EXPECT_TRUE(inputs.at("input").bytes().size() == input.data().size() &&
              std::memcmp(inputs.at("input").bytes().data(), input.data().data(),
                          input.data().size()) == 0);
  // The input's buffer holds the reservation of its bytes; the request's
  // holds its other fields, the received bytes given back.
  EXPECT_EQ(inputs.at("input").reserved(), kRows * kCols * 4);
  EXPECT_LT(reservation.bytes(), int64_t{1} << 20);
  const UploadedInputs uploaded = Spans(inputs);
  Placement placement = CpuPlacement();
  v1::RunResponse response;
  ASSERT_OK(OnWorker([&] {
    CallContext call = Call(parsed, placement, reservation);
    call.uploaded = &uploaded;
    return Execute(call, IntoResponse{.response = &response});
  }));
  ASSERT_EQ(response.outputs_size(), 1);
  std::vector<int32_t> last_row(values.end() - kCols, values.end());
  EXPECT_EQ(response.outputs(0).data(),
            std::string(reinterpret_cast<const char*>(last_row.data()), last_row.size() * 4));
  // A small request keeps its data in the message.
  grpc::ByteBuffer small = Serialized(TwoByThreeSliceRequest());
  v1::RunRequest small_parsed;
  InputBuffers none;
  ReceivedBytes small_received(&small, reservation.Sibling());
  ASSERT_OK(ParseRequestAndInputs(small_received, "Run", reservation, &pool, &small_parsed, &none));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(small_parsed.inputs().at("input").data(),
            TwoByThreeSliceRequest().inputs().at("input").data());
}

// A [512, 4096] uint8 input (2 MiB, byte i is i % 251) sliced to rows
// [first, first + rows) stepping `step`.
v1::RunRequest RowsRequest(int64_t first, int64_t rows, int64_t step) {
  constexpr int64_t kRows = 512, kCols = 4096;
  v1::RunRequest request = TwoByThreeSliceRequest();
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  SetInts(input.mutable_sizes(), {kRows, kCols});
  std::string bytes(static_cast<size_t>(kRows * kCols), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  input.set_data(std::move(bytes));
  SetInts(request.mutable_slice()->mutable_offsets(), {first, 0});
  SetInts(request.mutable_slice()->mutable_window_sizes(), {rows, kCols});
  SetInts(request.mutable_slice()->mutable_window_strides(), {step, 1});
  SetInts(request.mutable_outputs(0)->mutable_sizes(), {rows, kCols});
  return request;
}

TEST_F(PipelineTest, ALargeRequestWithFewOtherFieldsIsParsedLightlyWhereItArrived) {
  const v1::RunRequest sent = RowsRequest(100, 200, 1);
  grpc::ByteBuffer bytes = Serialized(sent);
  MemoryBudget::Reservation reservation = budget_.Empty();
  ReceivedBytes as_received(&bytes, reservation.Sibling());
  ASSERT_OK(as_received.Reserve("Run"));
  ReceivedRun run;
  ASSERT_OK_AND_ASSIGN(const bool parsed,
                       ParseReceivedRunIfLight(as_received, "Run", reservation, 16 << 10, &run));
  EXPECT_TRUE(parsed);
  EXPECT_EQ(bytes.Length(), 0u);  // held by the view now
  ASSERT_TRUE(run.received.view.has_value());
  EXPECT_EQ(run.request.id(), "slice-1");
  EXPECT_EQ(run.request.inputs().at("input").data(), "");
  EXPECT_EQ(run.data_bytes, 512 * 4096);
  // The input's bytes stay reserved, in the view's cover; the received ones
  // around them are not.
  EXPECT_EQ(run.received.cover.bytes(), run.data_bytes);
  EXPECT_LT(reservation.bytes(), int64_t{1} << 20);

  // Rows 100..299 in order are bytes the request carried: answered with them,
  // and no plan is left for a worker.
  Placement placement = CpuPlacement();
  const int64_t reserved = reservation.bytes();
  const int64_t budget_reserved = budget_.reserved();
  std::unique_ptr<PlannedRun> planned;
  absl::StatusOr<std::optional<OutputBuffers>> answer =
      AnswerWithItsBytes(run, placement, reservation, &planned);
  ASSERT_OK(answer.status());
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ(planned, nullptr);
  ASSERT_EQ((*answer)->forwarded.size(), 1u);
  std::string answered;
  for (const grpc::Slice& slice : (*answer)->forwarded[0]) {
    answered.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_TRUE(answered == sent.inputs().at("input").data().substr(100 * 4096, 200 * 4096));
  EXPECT_EQ(placement.label, "cpu");
  // The slices it keeps are reserved once: it takes over the view's cover of
  // them, the budget growing by the answer's other fields only.
  const int64_t taken_over = 512 * 4096 - run.received.cover.bytes();
  EXPECT_GE(taken_over, 200 * 4096);
  EXPECT_GT(reservation.bytes(), reserved + taken_over);
  EXPECT_LT(reservation.bytes(), reserved + taken_over + 4096);
  EXPECT_LT(budget_.reserved(), budget_reserved + 4096);
  run.Free();  // the view's cover of the rest goes
  EXPECT_EQ(run.received.cover.bytes(), 0);
  EXPECT_EQ(budget_.reserved(), budget_reserved - 512 * 4096 + (reservation.bytes() - reserved));
}

// A large request's data is reserved once, as received: parsing it reserves
// only its other fields, and an answer forwarding it takes over its cover. So
// the budget need not hold the data twice, but for a copy of it into buffers
// of its own, which it must.
TEST_F(PipelineTest, ALargeRequestsDataIsReservedOnceWhileItIsParsedAndAnswered) {
  const v1::RunRequest sent = RowsRequest(100, 200, 1);
  const int64_t received = static_cast<int64_t>(Serialized(sent).Length());
  const int64_t data_bytes = 512 * 4096;
  // The received bytes, and 128 KiB for the fields besides the data.
  MemoryBudget tight(received + (int64_t{128} << 10));
  BufferPool pool(int64_t{64} << 20, &tight);
  for (const bool in_reaction : {false, true}) {
    SCOPED_TRACE(in_reaction ? "in the reaction" : "on a worker");
    grpc::ByteBuffer bytes = Serialized(sent);
    MemoryBudget::Reservation reservation = tight.Empty();
    ReceivedBytes as_received(&bytes, reservation.Sibling());
    ASSERT_OK(as_received.Reserve("Run"));
    ReceivedRun run;
    if (in_reaction) {
      ASSERT_OK_AND_ASSIGN(const bool parsed, ParseReceivedRunIfLight(as_received, "Run",
                                                                      reservation, 16 << 10, &run));
      ASSERT_TRUE(parsed);
    } else {
      ASSERT_OK(ParseReceivedRun(as_received, "Run", reservation, &pool, &run));
    }
    ASSERT_TRUE(run.received.view.has_value());
    EXPECT_EQ(run.data_bytes, data_bytes);
    EXPECT_EQ(run.received.cover.bytes(), data_bytes);
    EXPECT_LE(tight.reserved(), received + (int64_t{128} << 10));
    // Answered with those bytes in the same room: the answer takes over
    // their cover.
    Placement placement = CpuPlacement();
    ASSERT_OK_AND_ASSIGN(std::optional<OutputBuffers> answer,
                         AnswerWithItsBytes(run, placement, reservation));
    ASSERT_TRUE(answer.has_value());
    run.Free();
  }
  grpc::ByteBuffer bytes = Serialized(sent);
  MemoryBudget::Reservation reservation = tight.Empty();
  ReceivedBytes as_received(&bytes, reservation.Sibling());
  ASSERT_OK(as_received.Reserve("Run"));
  v1::RunRequest parsed;
  InputBuffers inputs;
  EXPECT_THAT(
      ParseRequestAndInputs(as_received, "Run", reservation, &pool, &parsed, &inputs),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr(absl::StrCat("Run: the ", data_bytes, " bytes of input \"input\""))));
}

TEST_F(PipelineTest, OutputsThatNeedAKernelAreNotAnsweredWithTheReceivedBytes) {
  const v1::RunRequest sent = RowsRequest(299, 200, -1);  // backwards
  grpc::ByteBuffer bytes = Serialized(sent);
  MemoryBudget::Reservation reservation = budget_.Empty();
  ReceivedBytes as_received(&bytes, reservation.Sibling());
  ReceivedRun run;
  ASSERT_OK_AND_ASSIGN(const bool parsed,
                       ParseReceivedRunIfLight(as_received, "Run", reservation, 16 << 10, &run));
  ASSERT_TRUE(parsed);
  Placement placement = CpuPlacement();
  const int64_t reserved = reservation.bytes();
  std::unique_ptr<PlannedRun> planned;
  absl::StatusOr<std::optional<OutputBuffers>> answer =
      AnswerWithItsBytes(run, placement, reservation, &planned);
  ASSERT_OK(answer.status());
  EXPECT_FALSE(answer->has_value());
  EXPECT_EQ(reservation.bytes(), reserved);
  // The plan it made is what a worker runs, not planned again: the window's
  // rows 299..498 backwards, byte-exact.
  ASSERT_NE(planned, nullptr);
  absl::StatusOr<OutputBuffers> outputs = absl::InternalError("not run");
  ASSERT_OK(OnWorker([&] {
    CallContext call = Call(run.request, placement, reservation);
    call.uploaded = &run.uploaded;
    call.planned = planned.get();
    outputs = Execute(call, IntoAnswerBuffers{"hint"});
    return outputs.status();
  }));
  ASSERT_EQ(outputs->buffers.size(), 1u);
  const std::string& input = sent.inputs().at("input").data();
  std::string expected;
  for (int row = 498; row >= 299; --row) expected += input.substr(row * 4096, 4096);
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(outputs->buffers[0].get()),
                          expected.size()) == expected);
  // A bad request is refused with the validator's words.
  SetInts(run.request.mutable_slice()->mutable_window_strides(), {0, 1});
  EXPECT_THAT(AnswerWithItsBytes(run, placement, reservation),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("window_strides")));
}

TEST_F(PipelineTest, RequestsThatAreNotLightToParseAreLeftAsTheyArrived) {
  v1::RunRequest many_fields = RowsRequest(0, 1, 1);
  // 20 KiB besides the data (an unknown field: ids are at most 256 bytes)
  many_fields.GetReflection()
      ->MutableUnknownFields(&many_fields)
      ->AddLengthDelimited(1000, std::string(20 << 10, 'i'));
  v1::RunRequest scatter = RowsRequest(0, 1, 1);
  scatter.mutable_scatter_elements()->set_axis(0);  // its indices are read to plan it
  for (const v1::RunRequest& request : {many_fields, scatter, TwoByThreeSliceRequest()}) {
    grpc::ByteBuffer bytes = Serialized(request);
    const size_t length = bytes.Length();
    MemoryBudget::Reservation reservation = budget_.Empty();
    ReceivedBytes as_received(&bytes, reservation.Sibling());
    ASSERT_OK(as_received.Reserve("Run"));
    ReceivedRun run;
    ASSERT_OK_AND_ASSIGN(const bool parsed,
                         ParseReceivedRunIfLight(as_received, "Run", reservation, 16 << 10, &run));
    EXPECT_FALSE(parsed) << length;
    EXPECT_EQ(bytes.Length(), length);
    EXPECT_EQ(as_received.reserved(), static_cast<int64_t>(length));
    EXPECT_EQ(reservation.bytes(), 0);
    EXPECT_FALSE(run.received.view.has_value());
    EXPECT_EQ(run.request.ByteSizeLong(), 0u);
  }
}

TEST_F(PipelineTest, ExecuteInlineAnswerSlicesOnTheCpuWithExactBytes) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunResponse response;
  ASSERT_OK(OnWorker([&] {
    return Execute(Call(request, placement, reservation),
                   IntoResponse{.response = &response, .too_big_hint = "hint"});
  }));
  EXPECT_EQ(placement.label, "cpu");
  ASSERT_EQ(response.outputs_size(), 1);
  const v1::Tensor& output = response.outputs(0);
  EXPECT_EQ(output.dtype(), v1::INT32);
  EXPECT_THAT(output.sizes(), ElementsAre(2, 2));
  EXPECT_THAT(output.strides(), ElementsAre(2, 1));
  EXPECT_EQ(output.data(), Int32Bytes({1, 2, 4, 5}));
  EXPECT_EQ(ResponseDataBytes(response), 16);
  // The output and the answer's serialized copy are reserved.
  EXPECT_GE(reservation.bytes(), 16);
}

TEST_F(PipelineTest, ExecuteInlineAnswerOverTheMessageLimitIsRefusedBeforeAnyWork) {
  options_.max_message_bytes = 32;
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunResponse response;
  const absl::Status status = OnWorker([&] {
    return Execute(Call(request, placement, reservation),
                   IntoResponse{.response = &response,
                                .with_status = true,
                                .too_big_hint = "use RunStream or RunChunked for large results"});
  });
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("(16 of output data), more than the server's message "
                                       "limit of 32 bytes (--max_message_bytes); use RunStream "
                                       "or RunChunked for large results"),
                             HasSubstr("the answer would take "))));
  EXPECT_EQ(response.outputs_size(), 0);
  EXPECT_EQ(reservation.bytes(), 0);  // refused before the outputs were reserved
}

TEST_F(PipelineTest, ExecuteInlineAnswerOverTheBudgetNamesTheRequestsOutputs) {
  MemoryBudget small(16);
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = small.Empty();
  v1::RunResponse response;
  EXPECT_THAT(OnWorker([&] {
                return Execute(Call(request, placement, reservation),
                               IntoResponse{.response = &response, .too_big_hint = "hint"});
              }),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("the outputs of request \"slice-1\""),
                             HasSubstr("--max_memory_bytes"))));
  EXPECT_EQ(response.outputs_size(), 0);
}

TEST_F(PipelineTest, ExecuteInlineAnswerReportsTheValidatorsError) {
  v1::RunRequest request = TwoByThreeSliceRequest();
  request.mutable_slice()->set_offsets(1, 2);  // 2 + 2 > 3
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunResponse response;
  EXPECT_THAT(OnWorker([&] {
                return Execute(Call(request, placement, reservation),
                               IntoResponse{.response = &response, .too_big_hint = "hint"});
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("offsets[1]")));
  EXPECT_EQ(response.outputs_size(), 0);
}

TEST_F(PipelineTest, OnlyTinyCopiesOnTheCpuArePlannedToRunWhereTheyAreRead) {
  const Placement cpu = CpuPlacement();
  const auto tiny = [&](const v1::RunRequest& request, const Placement& placement) {
    return PlanIfTiny(request, options_, scheduler_, placement, NeverStop, nullptr) != nullptr;
  };
  EXPECT_TRUE(tiny(TwoByThreeSliceRequest(), cpu));
  Placement opencl = cpu;
  opencl.device = Device::kOpenCl;
  EXPECT_FALSE(tiny(TwoByThreeSliceRequest(), opencl));

  // The bound is on the input data and on what the plan writes: one int32
  // broadcast down a column of 4096 rows is 16 KiB out, of 4097 one more.
  const auto column = [](int64_t rows) {
    v1::RunRequest request = TwoByThreeSliceRequest();
    v1::Tensor& input = (*request.mutable_inputs())["input"];
    SetInts(input.mutable_sizes(), {rows, 1});
    SetInts(input.mutable_strides(), {0, 1});
    input.set_data(Int32Bytes({7}));
    v1::SliceAttrs* slice = request.mutable_slice();
    SetInts(slice->mutable_offsets(), {0, 0});
    SetInts(slice->mutable_window_sizes(), {rows, 1});
    SetInts(request.mutable_outputs(0)->mutable_sizes(), {rows, 1});
    return request;
  };
  ASSERT_EQ(kTinyRequestBytes, 4096 * 4);
  EXPECT_TRUE(tiny(column(4096), cpu));
  EXPECT_FALSE(tiny(column(4097), cpu));
  v1::RunRequest long_input = TwoByThreeSliceRequest();
  SetInts((*long_input.mutable_inputs())["input"].mutable_sizes(), {2, 2049});
  (*long_input.mutable_inputs())["input"].set_data(std::string(2 * 2049 * 4, '\0'));
  EXPECT_FALSE(tiny(long_input, cpu));  // 16392 bytes in, 16 out

  // Inputs and outputs elsewhere pin handles and regions: a worker's.
  v1::RunRequest from_region = TwoByThreeSliceRequest();
  (*from_region.mutable_inputs())["input"].mutable_shared_memory()->set_region("r");
  EXPECT_FALSE(tiny(from_region, cpu));
  v1::RunRequest from_handle = TwoByThreeSliceRequest();
  (*from_handle.mutable_inputs())["input"].mutable_handle()->set_id("h");
  EXPECT_FALSE(tiny(from_handle, cpu));
  v1::RunRequest kept = TwoByThreeSliceRequest();
  kept.mutable_outputs(0)->set_keep(true);
  EXPECT_FALSE(tiny(kept, cpu));

  // A scatter, and a request that does not plan (its worker says why).
  v1::RunRequest scatter;
  scatter.mutable_scatter_elements()->set_axis(0);
  for (const char* name : {"input", "indices", "updates"}) {
    v1::Tensor& tensor = (*scatter.mutable_inputs())[name];
    tensor.set_dtype(v1::INT32);
    SetInts(tensor.mutable_sizes(), {1});
    tensor.set_data(Int32Bytes({0}));
  }
  ASSERT_TRUE(PlanRun(scatter, options_, NeverStop, nullptr, nullptr).ok());
  EXPECT_FALSE(tiny(scatter, cpu));
  v1::RunRequest bad = TwoByThreeSliceRequest();
  bad.mutable_slice()->set_window_strides(0, 0);
  EXPECT_FALSE(tiny(bad, cpu));
}

TEST_F(PipelineTest, AStoppedCallIsNotStarted) {
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  v1::RunResponse response;
  const StopCheck cancelled = [] { return absl::CancelledError("the client cancelled the call"); };
  EXPECT_THAT(OnWorker([&] {
                return Execute(Call(request, placement, reservation, cancelled),
                               IntoResponse{.response = &response, .too_big_hint = "hint"});
              }),
              StatusIs(absl::StatusCode::kCancelled, "the client cancelled the call"));
  EXPECT_EQ(reservation.bytes(), 0);
}

TEST_F(PipelineTest, ExecuteIntoPartsCutsTheOutputIntoAHeaderAndChunks) {
  options_.chunk_bytes = 6;
  const v1::RunRequest request = TwoByThreeSliceRequest();
  Placement placement = CpuPlacement();
  MemoryBudget::Reservation reservation = budget_.Empty();
  CallRecord record;
  std::optional<ResultParts> parts;
  ASSERT_OK(OnWorker([&]() -> absl::Status {
    absl::StatusOr<ResultParts> made =
        Execute(Call(request, placement, reservation), IntoParts{.record = &record});
    if (!made.ok()) return made.status();
    parts.emplace(*std::move(made));
    return absl::OkStatus();
  }));
  EXPECT_EQ(record.backend, "cpu");
  EXPECT_EQ(parts->total_bytes(), 16);
  // The output's buffer holds its 16 bytes itself; the call, the part's room.
  EXPECT_EQ(reservation.bytes(), options_.chunk_bytes + kPartOverheadBytes);
  EXPECT_EQ(budget_.reserved(), reservation.bytes() + 16);
  std::vector<v1::ResultPart> read;
  for (;;) {
    grpc::ByteBuffer buffer;
    absl::StatusOr<ResultParts::Step> step = parts->SerializeNext(&buffer);
    ASSERT_OK(step.status());
    ASSERT_NE(*step, ResultParts::Step::kWait);  // computed whole before the first part
    if (*step == ResultParts::Step::kEnd) break;
    v1::ResultPart part;
    ASSERT_TRUE(grpc::SerializationTraits<v1::ResultPart>::Deserialize(&buffer, &part).ok());
    read.push_back(std::move(part));
  }
  ASSERT_EQ(read.size(), 4u);  // the header, then 6 + 6 + 4 bytes
  ASSERT_TRUE(read[0].has_header());
  EXPECT_EQ(read[0].header().index(), 0);
  EXPECT_EQ(read[0].header().dtype(), v1::INT32);
  EXPECT_THAT(read[0].header().sizes(), ElementsAre(2, 2));
  EXPECT_EQ(read[0].header().byte_length(), 16);
  EXPECT_EQ(read[0].header().backend(), "cpu");
  const std::string expected = Int32Bytes({1, 2, 4, 5});
  EXPECT_EQ(read[1].chunk(), expected.substr(0, 6));
  EXPECT_EQ(read[2].chunk(), expected.substr(6, 6));
  EXPECT_EQ(read[3].chunk(), expected.substr(12, 4));
  // Its last slice freed, the buffer gave its bytes back.
  EXPECT_EQ(budget_.reserved(), reservation.bytes());
}

TEST_F(PipelineTest, WriteFailureSaysWhyTheStreamEnded) {
  EXPECT_THAT(WriteFailure(NeverStop),
              StatusIs(absl::StatusCode::kCancelled, "the client stopped receiving"));
  EXPECT_THAT(WriteFailure([] { return absl::DeadlineExceededError("late"); }),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "late"));
}

TEST(PipelineBytesTest, TotalBytesSumsEveryBuffer) {
  Layout a;
  a.dtype = DType::kInt32;
  a.buffer_elements = 3;
  Layout b;
  b.dtype = DType::kInt64;
  b.buffer_elements = 2;
  EXPECT_EQ(TotalBytes({a, b}), 28);
  EXPECT_EQ(TotalBytes({}), 0);
}

}  // namespace
}  // namespace tensorop::server
