// RunChain against a real tensord: a chain's results byte-equal to its steps
// run one by one, on both backends; kept results; intermediates freed; the
// whole chain checked before any step runs; errors naming steps[i].
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/tensord_client.h"
#include "tests/support/grpc_matchers.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

constexpr int64_t kRows = 8;
constexpr int64_t kCols = 6;

std::vector<float> Counting(int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  std::iota(values.begin(), values.end(), 1.0F);
  return values;
}

// The rows of [kRows, 3] in the order 3, 0, 6, 1, 7, 2, 5, 4 (row r of the
// output comes from the row whose index lists r).
std::vector<int64_t> PermutedRows() {
  const std::vector<int64_t> order = {1, 3, 5, 0, 7, 6, 2, 4};
  std::vector<int64_t> indices;
  for (int64_t row : order) indices.insert(indices.end(), 3, row);
  return indices;
}

// The four ops of issue 16's chain, each as a request of its own on `input`
// (and for scatter, `updates`): Slice with the rows reversed, StridedSlice of
// every other column, ScatterElements permuting the rows, Split in 2.
v1::RunRequest ReverseRows(v1::Tensor input) {
  return SliceRequest("reverse", std::move(input), {0, 0}, {kRows, kCols}, {-1, 1}, {kRows, kCols});
}
v1::RunRequest EveryOtherColumn(v1::Tensor input) {
  v1::RunRequest request;
  request.set_id("columns");
  v1::StridedSliceAttrs* attrs = request.mutable_strided_slice();
  for (int64_t value : {0, 0}) attrs->add_begin(value);
  for (int64_t value : {kRows, kCols}) attrs->add_end(value);
  for (int64_t value : {1, 2}) attrs->add_stride(value);
  (*request.mutable_inputs())["input"] = std::move(input);
  return request;
}
v1::RunRequest PermuteRows(v1::Tensor input, v1::Tensor updates) {
  v1::RunRequest request;
  request.set_id("permute");
  request.mutable_scatter_elements()->set_axis(0);
  (*request.mutable_inputs())["input"] = std::move(input);
  (*request.mutable_inputs())["indices"] = MakeTensor(v1::INT64, {kRows, 3}, Pack(PermutedRows()));
  (*request.mutable_inputs())["updates"] = std::move(updates);
  return request;
}
v1::RunRequest SplitInTwo(v1::Tensor input) {
  v1::RunRequest request;
  request.set_id("split");
  request.mutable_split()->set_axis(0);
  (*request.mutable_inputs())["input"] = std::move(input);
  for (int i = 0; i < 2; ++i) {
    v1::OutputDesc* output = request.add_outputs();
    for (int64_t size : {kRows / 2, int64_t{3}}) output->add_sizes(size);
  }
  return request;
}

// Makes input `name` of `step` read output `output` of steps[from].
void ReadStep(v1::ChainStep& step, const std::string& name, int from, int output = 0) {
  v1::StepOutput* source = (*step.mutable_inputs())[name].mutable_step();
  source->set_step(from);
  source->set_output(output);
}

v1::ChainResult Result(int step, int output, bool keep = false) {
  v1::ChainResult result;
  result.set_step(step);
  result.set_output(output);
  result.set_keep(keep);
  return result;
}

// The four ops as a chain on the bytes of `input`, answering both halves.
v1::RunChainRequest FourStepChain(const v1::Tensor& input, v1::Backend backend) {
  v1::RunChainRequest chain;
  chain.set_id("chain");
  chain.set_backend(backend);
  *chain.add_steps() = client::ChainStepOf(ReverseRows(input));
  *chain.add_steps() = client::ChainStepOf(EveryOtherColumn(v1::Tensor()));
  ReadStep(*chain.mutable_steps(1), "input", 0);
  *chain.add_steps() = client::ChainStepOf(PermuteRows(v1::Tensor(), v1::Tensor()));
  ReadStep(*chain.mutable_steps(2), "input", 1);
  ReadStep(*chain.mutable_steps(2), "updates", 1);
  *chain.add_steps() = client::ChainStepOf(SplitInTwo(v1::Tensor()));
  ReadStep(*chain.mutable_steps(3), "input", 2);
  *chain.add_results() = Result(3, 0);
  *chain.add_results() = Result(3, 1);
  return chain;
}

// What a chain answered: per result, its header and bytes.
struct ChainAnswer {
  grpc::Status status;
  std::vector<v1::OutputHeader> headers;
  std::vector<std::string> data;
};

class ChainTest : public ::testing::Test {
 protected:
  // No OpenCL staging reserved at startup: the budget counts what calls hold.
  explicit ChainTest(std::vector<std::string> flags = {"--opencl_staging_bytes=0"})
      : server_(std::move(flags)), stub_(v1::TensorOp::NewStub(Connect(server_.target()))) {}
  // Handles left would hold the server for its grace period on the way out.
  ~ChainTest() override { ReleaseEveryHandle(*stub_); }

  ChainAnswer RunChain(const v1::RunChainRequest& chain) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = stub_->RunChain(&context, chain);
    ChainAnswer answer;
    v1::ResultPart part;
    while (reader->Read(&part)) {
      if (part.has_header()) {
        EXPECT_EQ(part.header().index(), static_cast<int>(answer.headers.size()));
        answer.headers.push_back(part.header());
        answer.data.emplace_back();
      } else if (!answer.data.empty()) {
        answer.data.back() += part.chunk();
      }
    }
    answer.status = reader->Finish();
    return answer;
  }

  // The outputs of `request` run alone on `backend`, as tensors with bytes.
  std::vector<v1::Tensor> RunAlone(v1::RunRequest request, v1::Backend backend) {
    request.set_backend(backend);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::RunResponse response;
    EXPECT_THAT(stub_->Run(&context, request, &response), GrpcOk()) << request.id();
    return {response.outputs().begin(), response.outputs().end()};
  }

  TensordProcess server_;
  std::unique_ptr<v1::TensorOp::Stub> stub_;
};

class ChainBackendTest : public ChainTest, public ::testing::WithParamInterface<v1::Backend> {};

TEST_P(ChainBackendTest, AChainGivesTheBytesOfItsStepsRunOneByOne) {
  const v1::Backend backend = GetParam();
  const v1::Tensor input = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(kRows * kCols)));
  const v1::Tensor reversed = RunAlone(ReverseRows(input), backend).at(0);
  const v1::Tensor columns = RunAlone(EveryOtherColumn(reversed), backend).at(0);
  const v1::Tensor permuted = RunAlone(PermuteRows(columns, columns), backend).at(0);
  const std::vector<v1::Tensor> halves = RunAlone(SplitInTwo(permuted), backend);
  ASSERT_EQ(halves.size(), 2u);

  const ChainAnswer answer = RunChain(FourStepChain(input, backend));
  ASSERT_THAT(answer.status, GrpcOk());
  ASSERT_EQ(answer.headers.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(answer.headers[i].sizes(), ElementsAre(4, 3));
    EXPECT_THAT(answer.headers[i].strides(), ElementsAre(3, 1));
    EXPECT_EQ(answer.data[i], halves[i].data()) << "result " << i;
    EXPECT_THAT(answer.headers[i].backend(), StartsWith(backend == v1::CPU ? "cpu" : "opencl:"));
  }
  // Row 0 of the result is row 3 of the permuted input: reversed row 4, its
  // columns 0, 2 and 4 (values 25, 27, 29).
  EXPECT_EQ(Unpack<float>(answer.data[0]).at(0), 25.0F);
  EXPECT_EQ(Unpack<float>(answer.data[0]).at(2), 29.0F);
  // Nothing stays behind: every intermediate and answer buffer was freed.
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", 0), 0);
}

// A new axis, the rows of a [4, 3] tensor reversed, and column 1 (axis 2
// shrunk): [1, 4].
v1::RunRequest NewAxisReversedColumn(v1::Tensor input) {
  v1::RunRequest request;
  request.set_id("column");
  v1::StridedSliceAttrs* attrs = request.mutable_strided_slice();
  for (int64_t value : {0, 0, 1}) attrs->add_begin(value);
  for (int64_t value : {0, 0, 2}) attrs->add_end(value);
  for (int64_t value : {1, -1, 1}) attrs->add_stride(value);
  for (int64_t value : {0, 1, 0}) attrs->add_begin_mask(value);
  for (int64_t value : {0, 1, 0}) attrs->add_end_mask(value);
  for (int64_t value : {1, 0, 0}) attrs->add_new_axis_mask(value);
  for (int64_t value : {0, 0, 1}) attrs->add_shrink_axis_mask(value);
  (*request.mutable_inputs())["input"] = std::move(input);
  return request;
}

// Window steps only: reversed rows, every other column, a split, then a new
// axis with the rows reversed again and one column: one copy, from `input`,
// whatever its layout. Answers the last step and, when `split_too`, the
// split's first half.
v1::RunChainRequest WindowChain(const v1::Tensor& input, v1::Backend backend, bool split_too) {
  v1::RunChainRequest chain;
  chain.set_id("windows");
  chain.set_backend(backend);
  *chain.add_steps() = client::ChainStepOf(ReverseRows(input));
  *chain.add_steps() = client::ChainStepOf(EveryOtherColumn(v1::Tensor()));
  ReadStep(*chain.mutable_steps(1), "input", 0);
  *chain.add_steps() = client::ChainStepOf(SplitInTwo(v1::Tensor()));
  ReadStep(*chain.mutable_steps(2), "input", 1);
  *chain.add_steps() = client::ChainStepOf(NewAxisReversedColumn(v1::Tensor()));
  ReadStep(*chain.mutable_steps(3), "input", 2, 1);
  *chain.add_results() = Result(3, 0);
  if (split_too) *chain.add_results() = Result(2, 0);
  return chain;
}

TEST_P(ChainBackendTest, WindowStepsAreViewsWithTheBytesOfTheStepsRunOneByOne) {
  const v1::Backend backend = GetParam();
  // Padded rows, a broadcast row (stride 0), and packed.
  for (const v1::Tensor& input :
       {MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting((kRows - 1) * 8 + kCols)), {8, 1}),
        MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(kCols)), {0, 1}),
        MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(kRows * kCols)))}) {
    const v1::Tensor reversed = RunAlone(ReverseRows(input), backend).at(0);
    const v1::Tensor columns = RunAlone(EveryOtherColumn(reversed), backend).at(0);
    const std::vector<v1::Tensor> halves = RunAlone(SplitInTwo(columns), backend);
    ASSERT_EQ(halves.size(), 2u);
    const v1::Tensor column = RunAlone(NewAxisReversedColumn(halves[1]), backend).at(0);
    ASSERT_THAT(column.sizes(), ElementsAre(1, 4));

    // Steps 0-2 do not run: step 3 copies once from the input.
    const int64_t fused = MetricValue(server_, "tensorop_chain_steps_fused_total");
    const ChainAnswer alone = RunChain(WindowChain(input, backend, /*split_too=*/false));
    ASSERT_THAT(alone.status, GrpcOk());
    ASSERT_EQ(alone.headers.size(), 1u);
    EXPECT_THAT(alone.headers[0].sizes(), ElementsAre(1, 4));
    EXPECT_EQ(alone.data[0], column.data());
    EXPECT_EQ(MetricValue(server_, "tensorop_chain_steps_fused_total"), fused + 3);

    // The split answered too: it runs, copying through steps 0 and 1 fused;
    // step 3 reads its bytes.
    const ChainAnswer both = RunChain(WindowChain(input, backend, /*split_too=*/true));
    ASSERT_THAT(both.status, GrpcOk());
    ASSERT_EQ(both.headers.size(), 2u);
    EXPECT_EQ(both.data[0], column.data());
    EXPECT_EQ(both.data[1], halves[0].data());
    EXPECT_EQ(MetricValue(server_, "tensorop_chain_steps_fused_total"), fused + 5);
  }
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", 0), 0);
}

TEST_F(ChainTest, ContiguousResultsOfViewsOnAHandleAreItsBytesNotACopy) {
  const v1::Tensor bytes = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(kRows * kCols)));
  v1::TensorHandle input;
  ASSERT_THAT(PutTensor(*stub_, bytes, &input), GrpcOk());
  v1::Tensor by_handle;
  by_handle.mutable_handle()->set_id(input.id());
  // Rows 2..6 whole, then rows 1..3 of those: rows 3..5, one run of the input.
  const auto rows = [](v1::Tensor from, int64_t first, int64_t count) {
    return client::ChainStepOf(
        SliceRequest("rows", std::move(from), {first, 0}, {count, kCols}, {1, 1}, {count, kCols}));
  };
  v1::RunChainRequest chain;
  chain.set_id("lent");
  chain.set_backend(v1::AUTO);
  *chain.add_steps() = rows(by_handle, 2, 5);
  *chain.add_steps() = rows(v1::Tensor(), 1, 3);
  ReadStep(*chain.mutable_steps(1), "input", 0);
  *chain.add_results() = Result(1, 0);
  const int64_t lent = MetricValue(server_, "tensorop_chain_results_lent_total");
  const ChainAnswer answer = RunChain(chain);
  ASSERT_THAT(answer.status, GrpcOk());
  const std::vector<float> all = Counting(kRows * kCols);
  EXPECT_EQ(Unpack<float>(answer.data[0]),
            std::vector<float>(all.begin() + 3 * kCols, all.begin() + 6 * kCols));
  EXPECT_THAT(answer.headers[0].backend(), StartsWith("cpu"));
  EXPECT_EQ(MetricValue(server_, "tensorop_chain_results_lent_total"), lent + 1);

  // Every other column is not one run: copied, with the same bytes as before.
  *chain.mutable_steps(1) = client::ChainStepOf(EveryOtherColumn(v1::Tensor()));
  ReadStep(*chain.mutable_steps(1), "input", 0);
  const ChainAnswer copied = RunChain(chain);
  ASSERT_THAT(copied.status, GrpcOk());
  ASSERT_EQ(Unpack<float>(copied.data[0]).size(), 5u * 3u);
  EXPECT_EQ(Unpack<float>(copied.data[0]).at(0), all.at(2 * kCols));
  EXPECT_EQ(Unpack<float>(copied.data[0]).at(1), all.at(2 * kCols + 2));
  EXPECT_EQ(MetricValue(server_, "tensorop_chain_results_lent_total"), lent + 1);
}

// A window after a step that makes new bytes (join here) reads that step's
// output; when its answer is one run of it, the answer is those bytes, lent
// (the output's reservation moves with them), not a copy. A window that is
// not one run is copied as before. Nothing stays reserved.
TEST_F(ChainTest, AContiguousWindowOfAnEarlierOutputIsItsBytesNotACopy) {
  const std::vector<float> all = Counting(kRows * kCols);
  const std::vector<float> top(all.begin(), all.begin() + 3 * kCols);
  const std::vector<float> rest(all.begin() + 3 * kCols, all.end());
  v1::ChainStep join;
  join.mutable_join()->set_axis(0);
  *(*join.mutable_inputs())["inputs_0"].mutable_tensor() =
      MakeTensor(v1::FLOAT32, {3, kCols}, Pack(top));
  *(*join.mutable_inputs())["inputs_1"].mutable_tensor() =
      MakeTensor(v1::FLOAT32, {kRows - 3, kCols}, Pack(rest));
  v1::RunChainRequest chain;
  chain.set_id("lent from a step");
  chain.set_backend(v1::CPU);
  *chain.add_steps() = join;
  // Rows 2..4 of the joined rows: across the two inputs, one run of the output.
  *chain.add_steps() = client::ChainStepOf(
      SliceRequest("rows", v1::Tensor(), {2, 0}, {3, kCols}, {1, 1}, {3, kCols}));
  ReadStep(*chain.mutable_steps(1), "input", 0);
  *chain.add_results() = Result(1, 0);
  const int64_t lent = MetricValue(server_, "tensorop_chain_results_lent_total");
  const ChainAnswer answer = RunChain(chain);
  ASSERT_THAT(answer.status, GrpcOk());
  EXPECT_EQ(Unpack<float>(answer.data[0]),
            std::vector<float>(all.begin() + 2 * kCols, all.begin() + 5 * kCols));
  EXPECT_EQ(MetricValue(server_, "tensorop_chain_results_lent_total"), lent + 1);

  *chain.mutable_steps(1) = client::ChainStepOf(EveryOtherColumn(v1::Tensor()));
  ReadStep(*chain.mutable_steps(1), "input", 0);
  const ChainAnswer copied = RunChain(chain);
  ASSERT_THAT(copied.status, GrpcOk());
  ASSERT_EQ(Unpack<float>(copied.data[0]).size(), 8u * 3u);
  EXPECT_EQ(Unpack<float>(copied.data[0]).at(1), all.at(2));
  EXPECT_EQ(Unpack<float>(copied.data[0]).at(4), all.at(kCols + 2));
  EXPECT_EQ(MetricValue(server_, "tensorop_chain_results_lent_total"), lent + 1);
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", 0), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, ChainBackendTest, ::testing::Values(v1::CPU, v1::OPENCL),
                         [](const ::testing::TestParamInfo<v1::Backend>& info) {
                           return info.param == v1::CPU ? "Cpu" : "OpenCl";
                         });

TEST_F(ChainTest, KeptResultsStayAndReadHandlesInPlace) {
  v1::TensorHandle input;
  ASSERT_THAT(
      PutTensor(*stub_, MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48))), &input),
      GrpcOk());
  v1::Tensor by_handle;
  by_handle.mutable_handle()->set_id(input.id());
  v1::RunChainRequest chain = FourStepChain(by_handle, v1::CPU);
  // The permuted rows kept, one half as bytes with padded strides.
  chain.mutable_results(0)->add_strides(4);
  chain.mutable_results(0)->add_strides(1);
  *chain.add_results() = Result(2, 0, /*keep=*/true);

  const ChainAnswer answer = RunChain(chain);
  ASSERT_THAT(answer.status, GrpcOk());
  ASSERT_EQ(answer.headers.size(), 3u);
  EXPECT_THAT(answer.headers[0].strides(), ElementsAre(4, 1));
  EXPECT_EQ(answer.data[0].size(), (3 * 4 + 3) * sizeof(float));
  EXPECT_EQ(Unpack<float>(answer.data[0]).at(3), 0.0F);  // padding
  const v1::TensorHandle& kept = answer.headers[2].handle();
  EXPECT_THAT(kept.id(), MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(answer.headers[2].byte_length(), 0);
  EXPECT_TRUE(answer.data[2].empty());
  EXPECT_THAT(kept.sizes(), ElementsAre(kRows, 3));

  // The kept rows are the split's input: both halves together.
  v1::FetchRequest fetch;
  fetch.set_id(kept.id());
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = stub_->Fetch(&context, fetch);
  std::string fetched;
  v1::ResultPart part;
  while (reader->Read(&part)) fetched += part.chunk();
  ASSERT_THAT(reader->Finish(), GrpcOk());
  const std::vector<float> rows = Unpack<float>(fetched);
  ASSERT_EQ(rows.size(), 24u);
  EXPECT_EQ(rows[0], 25.0F);
  EXPECT_EQ(Unpack<float>(answer.data[1]), std::vector<float>(rows.begin() + 12, rows.end()));
  // Held: the put input and the kept result, nothing else.
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_resident_bytes{backend=\"cpu\"}"), 48 * 4 + 24 * 4);
  // Their bytes and each one's bookkeeping.
  constexpr int64_t kHeld = 48 * 4 + 24 * 4 + 2 * 1024;
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", kHeld), kHeld);
}

TEST_F(ChainTest, AChainOnADeviceHandleRunsThereAndKeepsItsResultsThere) {
  const v1::Tensor bytes = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48)));
  const ChainAnswer on_cpu = RunChain(FourStepChain(bytes, v1::CPU));
  ASSERT_THAT(on_cpu.status, GrpcOk());
  v1::TensorHandle input;
  ASSERT_THAT(PutTensor(*stub_, bytes, &input, 0, int64_t{1} << 20, v1::OPENCL), GrpcOk());
  v1::Tensor by_handle;
  by_handle.mutable_handle()->set_id(input.id());
  // AUTO: the input's device. The permuted rows are kept and the split reads them.
  v1::RunChainRequest chain = FourStepChain(by_handle, v1::AUTO);
  *chain.add_results() = Result(2, 0, /*keep=*/true);
  const ChainAnswer answer = RunChain(chain);
  ASSERT_THAT(answer.status, GrpcOk());
  ASSERT_EQ(answer.headers.size(), 3u);
  EXPECT_THAT(answer.headers[0].backend(), StartsWith("opencl:"));
  EXPECT_EQ(answer.data[0], on_cpu.data[0]);
  EXPECT_EQ(answer.data[1], on_cpu.data[1]);
  EXPECT_EQ(answer.headers[2].handle().backend(), "opencl");
  // Its intermediates were kept there only until their last use.
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"opencl\"}"), 2);
  EXPECT_EQ(MetricValue(server_, "tensorop_handle_copies_total"), 0);
}

TEST_F(ChainTest, AChainOnADeviceUploadsNothingBetweenItsSteps) {
  v1::TensorHandle input;
  ASSERT_THAT(PutTensor(*stub_, MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48))), &input,
                        0, int64_t{1} << 20, v1::OPENCL),
              GrpcOk());
  v1::TensorHandle indices;
  ASSERT_THAT(PutTensor(*stub_, MakeTensor(v1::INT64, {kRows, 3}, Pack(PermutedRows())), &indices,
                        0, int64_t{1} << 20, v1::OPENCL),
              GrpcOk());
  const std::string uploaded = "tensorop_opencl_uploaded_bytes_total{device=\"";
  auto uploads = [&] {
    // The one device's counter, whatever its name.
    httplib::Client http("127.0.0.1", server_.metrics_port());
    const std::string body = http.Get("/metrics")->body;
    const size_t at = body.find("\n" + uploaded);
    return at == std::string::npos ? -1 : std::stoll(body.substr(body.find("} ", at) + 2));
  };
  const int64_t before = uploads();
  ASSERT_GE(before, 0);
  v1::Tensor by_handle;
  by_handle.mutable_handle()->set_id(input.id());
  v1::RunChainRequest chain = FourStepChain(by_handle, v1::AUTO);
  v1::ChainInput& indices_input = (*chain.mutable_steps(2)->mutable_inputs())["indices"];
  indices_input.Clear();
  indices_input.mutable_tensor()->mutable_handle()->set_id(indices.id());
  for (v1::ChainResult& result : *chain.mutable_results()) result.set_keep(true);
  const ChainAnswer answer = RunChain(chain);
  ASSERT_THAT(answer.status, GrpcOk());
  EXPECT_EQ(uploads(), before);  // inputs, indices and intermediates all read in place
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"opencl\"}"), 4);  // 2 put, 2 kept
}

TEST_F(ChainTest, TheWholeChainIsCheckedBeforeAnyStepRuns) {
  const v1::Tensor input = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48)));
  // Step 0's result would be kept; step 3 is wrong: nothing runs, nothing stays.
  v1::RunChainRequest chain = FourStepChain(input, v1::CPU);
  *chain.add_results() = Result(0, 0, /*keep=*/true);
  chain.mutable_steps(3)->mutable_outputs(1)->set_sizes(0, 5);
  EXPECT_THAT(RunChain(chain).status,
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, StartsWith("steps[3].outputs")));
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 0);

  chain = FourStepChain(input, v1::CPU);
  chain.mutable_steps(0)->mutable_slice()->set_window_strides(1, 0);
  EXPECT_THAT(RunChain(chain).status,
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "steps[0].slice.window_strides[1] must not be 0"));
}

TEST_F(ChainTest, IndicesAStepComputesAreCheckedWhenTheReadingStepRuns) {
  // Step 0 slices the indices out of a tensor holding an index past the axis;
  // step 1 scatters with them. Step 0's kept result goes with the failure.
  const v1::Tensor input = MakeTensor(v1::FLOAT32, {kRows, 3}, Pack(Counting(24)));
  std::vector<int64_t> indices = PermutedRows();
  indices[4] = kRows;
  v1::RunChainRequest chain;
  *chain.add_steps() =
      client::ChainStepOf(SliceRequest("indices", MakeTensor(v1::INT64, {kRows, 3}, Pack(indices)),
                                       {0, 0}, {kRows, 3}, {1, 1}, {kRows, 3}));
  *chain.add_steps() = client::ChainStepOf(PermuteRows(input, input));
  ReadStep(*chain.mutable_steps(1), "indices", 0);
  *chain.add_results() = Result(0, 0, /*keep=*/true);
  *chain.add_results() = Result(1, 0);
  EXPECT_THAT(RunChain(chain).status,
              GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT,
                           "steps[1].indices[1, 1] = 8 is outside [-8, 8) for input.sizes[0] = 8 "
                           "(scatter_elements.axis = 0)"));
  EXPECT_EQ(MetricValue(server_, "tensorop_handles{backend=\"cpu\"}"), 0);
  EXPECT_EQ(MetricValueOnceItIs(server_, "tensorop_memory_reserved_bytes", 0), 0);
}

TEST_F(ChainTest, BadReferencesAndResultsAreNamed) {
  const v1::Tensor input = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48)));
  struct Case {
    std::function<void(v1::RunChainRequest&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::RunChainRequest& chain) { ReadStep(*chain.mutable_steps(0), "input", 1); },
       "steps[0].inputs[\"input\"].step.step is 1; steps[0] has no earlier step to read"},
      {[](v1::RunChainRequest& chain) { ReadStep(*chain.mutable_steps(2), "input", 2); },
       "steps[2].inputs[\"input\"].step.step is 2; it must name an earlier step, in [0, 1]"},
      {[](v1::RunChainRequest& chain) { ReadStep(*chain.mutable_steps(3), "input", 2, 1); },
       "steps[3].inputs[\"input\"].step.output is 1; steps[2] has 1 outputs"},
      {[](v1::RunChainRequest& chain) {
         (*chain.mutable_steps(1)->mutable_inputs())["input"].Clear();
       },
       "steps[1].inputs[\"input\"] has neither tensor nor step"},
      {[](v1::RunChainRequest& chain) { *chain.add_results() = Result(3, 0); },
       "results[2] names steps[3] output 0, as results[0] does"},
      {[](v1::RunChainRequest& chain) { *chain.add_results() = Result(4, 0); },
       "results[2].step is 4; the chain has 4 steps"},
      {[](v1::RunChainRequest& chain) { chain.clear_results(); },
       "results is empty: name the step outputs to answer with or keep"},
      {[](v1::RunChainRequest& chain) {
         chain.mutable_steps(3)->mutable_outputs(0)->set_keep(true);
       },
       "steps[3].outputs[0].keep is set: a chain keeps what results keep"},
      {[](v1::RunChainRequest& chain) {
         chain.mutable_steps(3)->mutable_outputs(0)->add_strides(3);
         chain.mutable_steps(3)->mutable_outputs(0)->add_strides(1);
         chain.mutable_results(0)->add_strides(4);
         chain.mutable_results(0)->add_strides(1);
       },
       "results[0].strides are [4, 1] and steps[3].outputs[0].strides are [3, 1]: give them in "
       "one place"},
  };
  for (const Case& c : cases) {
    v1::RunChainRequest chain = FourStepChain(input, v1::CPU);
    c.change(chain);
    EXPECT_THAT(RunChain(chain).status,
                GrpcStatusIs(grpc::StatusCode::INVALID_ARGUMENT, c.message));
  }
  // The server still serves.
  EXPECT_THAT(RunChain(FourStepChain(input, v1::CPU)).status, GrpcOk());
}

class ShortChainTest : public ChainTest {
 protected:
  ShortChainTest() : ChainTest({"--opencl_staging_bytes=0", "--max_chain_steps=3"}) {}
};

TEST_F(ShortChainTest, ChainsOverMaxChainStepsAreRefused) {
  const v1::Tensor input = MakeTensor(v1::FLOAT32, {kRows, kCols}, Pack(Counting(48)));
  EXPECT_THAT(RunChain(FourStepChain(input, v1::CPU)).status,
              GrpcStatusIs(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "steps has 4 entries, more than the server's limit of 3 "
                           "(--max_chain_steps)"));
}

}  // namespace
}  // namespace tensorop::testing
