// Handles against sending tensors each time, measured in one run against one
// tensord (BENCHMARKS.md, "Handles"):
//
//   bidi:     100 small slices (one 1 KiB row each) of one 1 MiB uint8 tensor
//             through one RunBidi stream: the tensor inline in every request,
//             against Put once (timed) and named by its handle.
//   sequence: float32 [8192, 1024] (32 MiB): Slice (rows reversed) ->
//             StridedSlice (every other row) -> ScatterElements (rows
//             permuted; its indices are an input too) -> Split in 2, both
//             outputs fetched: each step a Run carrying its inputs and
//             answering its outputs, against the input and indices Put once
//             and every step's output kept (4 Runs, 2 Fetches).
//   chain:    the same 4 ops put once and chained: the input and indices Put,
//             one RunChain (intermediates stay on the server) streaming both
//             halves back, against the separate Runs above.
//   resident: (--resident) RunChain alone, both halves kept on the server,
//             its input and indices resident on the CPU against on the
//             OpenCL device (the GPU figure of issue 16; needs a device).
//
// Rounds alternate between the ways; each way's median round is reported,
// and their ratio (time sending / time with handles).
//
//   handles_bench --target=127.0.0.1:50051 [--rounds=5] [--resident]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/client.h"
#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tensorop/v1/tensorop.pb.h"

namespace {

using tensorop::v1::TensorOp;
namespace v1 = tensorop::v1;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Fail(const std::string& what, const grpc::Status& status) {
  std::fprintf(stderr, "handles_bench: %s: %d %s\n", what.c_str(), status.error_code(),
               status.error_message().c_str());
  std::exit(1);
}

void Check(const std::string& what, const grpc::Status& status) {
  if (!status.ok()) Fail(what, status);
}

v1::Tensor Inline(v1::DType dtype, std::vector<int64_t> sizes, std::string data) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  tensor.mutable_sizes()->Assign(sizes.begin(), sizes.end());
  tensor.set_data(std::move(data));
  return tensor;
}

v1::Tensor ByHandle(const std::string& id) {
  v1::Tensor tensor;
  tensor.mutable_handle()->set_id(id);
  return tensor;
}

std::string Put(TensorOp::Stub& stub, const v1::Tensor& tensor, v1::Backend backend = v1::AUTO) {
  grpc::ClientContext context;
  v1::TensorHandle handle;
  auto writer = stub.Put(&context, &handle);
  v1::PutPart part;
  part.mutable_header()->set_dtype(tensor.dtype());
  *part.mutable_header()->mutable_sizes() = tensor.sizes();
  part.mutable_header()->set_backend(backend);
  writer->Write(part);
  constexpr size_t kChunk = size_t{1} << 20;
  for (size_t at = 0; at < tensor.data().size(); at += kChunk) {
    part.set_chunk(tensor.data().substr(at, kChunk));
    writer->Write(part);
  }
  writer->WritesDone();
  Check("Put", writer->Finish());
  return handle.id();
}

size_t Fetch(TensorOp::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::FetchRequest request;
  request.set_id(id);
  auto reader = stub.Fetch(&context, request);
  v1::ResultPart part;
  size_t bytes = 0;
  while (reader->Read(&part)) bytes += part.chunk().size();
  Check("Fetch", reader->Finish());
  return bytes;
}

void Release(TensorOp::Stub& stub, const std::vector<std::string>& ids) {
  grpc::ClientContext context;
  v1::ReleaseRequest request;
  for (const std::string& id : ids) request.add_ids(id);
  v1::ReleaseResponse response;
  Check("Release", stub.Release(&context, request, &response));
}

v1::RunResponse Run(TensorOp::Stub& stub, const v1::RunRequest& request) {
  grpc::ClientContext context;
  v1::RunResponse response;
  Check("Run " + request.id(), stub.Run(&context, request, &response));
  return response;
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ------------------------------------------------------------------- bidi

constexpr int64_t kRows = 1024;
constexpr int64_t kCols = 1024;
constexpr int kOps = 100;

v1::RunRequest RowSlice(int i, v1::Tensor input) {
  v1::RunRequest request;
  request.set_id(std::to_string(i));
  request.set_backend(v1::CPU);
  v1::SliceAttrs* slice = request.mutable_slice();
  for (int64_t value : {int64_t{i} * 7 % kRows, int64_t{0}}) slice->add_offsets(value);
  for (int64_t value : {int64_t{1}, kCols}) slice->add_window_sizes(value);
  for (int64_t value : {1, 1}) slice->add_window_strides(value);
  v1::OutputDesc* output = request.add_outputs();
  for (int64_t value : {int64_t{1}, kCols}) output->add_sizes(value);
  (*request.mutable_inputs())["input"] = std::move(input);
  return request;
}

// One RunBidi stream of kOps requests made by `make(i)`; answers read as
// they come (a thread beside the writes).
double RunBidiStream(TensorOp::Stub& stub, const std::function<v1::RunRequest(int)>& make) {
  grpc::ClientContext context;
  const Clock::time_point start = Clock::now();
  auto stream = stub.RunBidi(&context);
  int answered = 0;
  std::thread reader([&] {
    v1::RunResponse response;
    while (stream->Read(&response)) {
      if (response.status().code() != 0) {
        std::fprintf(stderr, "handles_bench: bidi answer: %s\n",
                     response.status().message().c_str());
        std::exit(1);
      }
      ++answered;
    }
  });
  for (int i = 0; i < kOps; ++i) stream->Write(make(i));
  stream->WritesDone();
  reader.join();
  Check("RunBidi", stream->Finish());
  if (answered != kOps) {
    std::fprintf(stderr, "handles_bench: %d answers of %d\n", answered, kOps);
    std::exit(1);
  }
  return SecondsSince(start);
}

// --------------------------------------------------------------- sequence

constexpr int64_t kSeqRows = 8192;
constexpr int64_t kSeqCols = 1024;

struct Steps {
  v1::RunRequest reverse, every_other, permute, split;
};

// The four requests, inputs left for the caller (`input`, `indices`).
Steps SequenceSteps() {
  Steps steps;
  steps.reverse.set_id("reverse");
  v1::SliceAttrs* slice = steps.reverse.mutable_slice();
  for (int64_t value : {int64_t{0}, int64_t{0}}) slice->add_offsets(value);
  for (int64_t value : {kSeqRows, kSeqCols}) slice->add_window_sizes(value);
  for (int64_t value : {-1, 1}) slice->add_window_strides(value);
  v1::OutputDesc* reversed = steps.reverse.add_outputs();
  for (int64_t value : {kSeqRows, kSeqCols}) reversed->add_sizes(value);

  steps.every_other.set_id("every_other");
  v1::StridedSliceAttrs* strided = steps.every_other.mutable_strided_slice();
  for (int64_t value : {int64_t{0}, int64_t{0}}) strided->add_begin(value);
  for (int64_t value : {kSeqRows, kSeqCols}) strided->add_end(value);
  for (int64_t value : {2, 1}) strided->add_stride(value);

  steps.permute.set_id("permute");
  steps.permute.mutable_scatter_elements()->set_axis(0);

  steps.split.set_id("split");
  steps.split.mutable_split()->set_axis(0);
  for (int i = 0; i < 2; ++i) {
    v1::OutputDesc* half = steps.split.add_outputs();
    for (int64_t value : {kSeqRows / 4, kSeqCols}) half->add_sizes(value);
  }
  for (v1::RunRequest* request :
       {&steps.reverse, &steps.every_other, &steps.permute, &steps.split}) {
    request->set_backend(v1::CPU);
  }
  return steps;
}

// int32 [kSeqRows / 2, kSeqCols]: row r goes to row perm[r].
std::string PermutedRowIndices() {
  std::vector<int32_t> perm(kSeqRows / 2);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  std::vector<int32_t> indices(static_cast<size_t>(kSeqRows / 2 * kSeqCols));
  for (size_t r = 0; r < perm.size(); ++r) {
    std::fill_n(indices.begin() + static_cast<std::ptrdiff_t>(r * kSeqCols), kSeqCols, perm[r]);
  }
  return std::string(reinterpret_cast<const char*>(indices.data()), indices.size() * 4);
}

// Every step a Run carrying its inputs; the outputs come back and go again.
double SequenceSending(TensorOp::Stub& stub, const v1::Tensor& input, const v1::Tensor& indices) {
  Steps steps = SequenceSteps();
  const Clock::time_point start = Clock::now();
  (*steps.reverse.mutable_inputs())["input"] = input;
  v1::RunResponse reversed = Run(stub, steps.reverse);
  (*steps.every_other.mutable_inputs())["input"] = std::move(*reversed.mutable_outputs(0));
  v1::RunResponse halved = Run(stub, steps.every_other);
  (*steps.permute.mutable_inputs())["input"] = halved.outputs(0);
  (*steps.permute.mutable_inputs())["updates"] = std::move(*halved.mutable_outputs(0));
  (*steps.permute.mutable_inputs())["indices"] = indices;
  v1::RunResponse permuted = Run(stub, steps.permute);
  (*steps.split.mutable_inputs())["input"] = std::move(*permuted.mutable_outputs(0));
  v1::RunResponse halves = Run(stub, steps.split);
  if (halves.outputs_size() != 2) {
    std::fprintf(stderr, "handles_bench: split answered %d outputs\n", halves.outputs_size());
    std::exit(1);
  }
  return SecondsSince(start);
}

// The input and indices Put once, every output kept, the two halves fetched.
double SequenceWithHandles(TensorOp::Stub& stub, const v1::Tensor& input,
                           const v1::Tensor& indices) {
  Steps steps = SequenceSteps();
  const Clock::time_point start = Clock::now();
  std::vector<std::string> made = {Put(stub, input), Put(stub, indices)};
  auto kept = [&](v1::RunRequest& request) {
    if (request.outputs_size() == 0) request.add_outputs();
    for (v1::OutputDesc& output : *request.mutable_outputs()) output.set_keep(true);
    v1::RunResponse response = Run(stub, request);
    std::vector<std::string> ids;
    for (const v1::Tensor& output : response.outputs()) ids.push_back(output.handle().id());
    made.insert(made.end(), ids.begin(), ids.end());
    return ids;
  };
  (*steps.reverse.mutable_inputs())["input"] = ByHandle(made[0]);
  const std::string reversed = kept(steps.reverse)[0];
  (*steps.every_other.mutable_inputs())["input"] = ByHandle(reversed);
  const std::string halved = kept(steps.every_other)[0];
  (*steps.permute.mutable_inputs())["input"] = ByHandle(halved);
  (*steps.permute.mutable_inputs())["updates"] = ByHandle(halved);
  (*steps.permute.mutable_inputs())["indices"] = ByHandle(made[1]);
  const std::string permuted = kept(steps.permute)[0];
  (*steps.split.mutable_inputs())["input"] = ByHandle(permuted);
  const std::vector<std::string> halves = kept(steps.split);
  const size_t bytes = Fetch(stub, halves[0]) + Fetch(stub, halves[1]);
  Release(stub, made);
  if (bytes != static_cast<size_t>(kSeqRows / 2 * kSeqCols * 4)) {
    std::fprintf(stderr, "handles_bench: fetched %zu bytes\n", bytes);
    std::exit(1);
  }
  return SecondsSince(start);
}

// The four steps as one RunChain on the handles `input` and `indices`, on
// `backend`, answering both halves (kept on the server with `keep`).
v1::RunChainRequest SequenceChain(const std::string& input, const std::string& indices,
                                  v1::Backend backend, bool keep) {
  Steps steps = SequenceSteps();
  v1::RunChainRequest chain;
  chain.set_id("sequence");
  chain.set_backend(backend);
  auto add_step = [&](const v1::RunRequest& request) -> v1::ChainStep& {
    return *chain.add_steps() = tensorop::client::ChainStepOf(request);
  };
  auto from_step = [](v1::ChainStep& step, const std::string& name, int from) {
    (*step.mutable_inputs())[name].mutable_step()->set_step(from);
  };
  *(*add_step(steps.reverse).mutable_inputs())["input"].mutable_tensor() = ByHandle(input);
  from_step(add_step(steps.every_other), "input", 0);
  v1::ChainStep& permute = add_step(steps.permute);
  from_step(permute, "input", 1);
  from_step(permute, "updates", 1);
  *(*permute.mutable_inputs())["indices"].mutable_tensor() = ByHandle(indices);
  from_step(add_step(steps.split), "input", 2);
  for (int half = 0; half < 2; ++half) {
    v1::ChainResult& result = *chain.add_results();
    result.set_step(3);
    result.set_output(half);
    result.set_keep(keep);
  }
  return chain;
}

// Runs `chain`: the data bytes answered, and the ids of the results kept.
size_t RunChain(TensorOp::Stub& stub, const v1::RunChainRequest& chain,
                std::vector<std::string>* kept) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = stub.RunChain(&context, chain);
  size_t bytes = 0;
  v1::ResultPart part;
  while (reader->Read(&part)) {
    bytes += part.chunk().size();
    if (part.has_header() && part.header().has_handle()) {
      kept->push_back(part.header().handle().id());
    }
  }
  Check("RunChain", reader->Finish());
  return bytes;
}

// The input and indices Put once, the four steps one RunChain whose
// intermediates stay on the server, both halves streamed back as its results.
double SequenceChained(TensorOp::Stub& stub, const v1::Tensor& input, const v1::Tensor& indices) {
  const Clock::time_point start = Clock::now();
  const std::vector<std::string> made = {Put(stub, input), Put(stub, indices)};
  std::vector<std::string> kept;
  const size_t bytes = RunChain(stub, SequenceChain(made[0], made[1], v1::CPU, false), &kept);
  Release(stub, made);
  if (bytes != static_cast<size_t>(kSeqRows / 2 * kSeqCols * 4)) {
    std::fprintf(stderr, "handles_bench: the chain answered %zu bytes\n", bytes);
    std::exit(1);
  }
  return SecondsSince(start);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// RunChain alone (no Put, no Fetch: the results stay) with the input and
// indices resident on `backend`: the median of `rounds` calls.
double ResidentChain(TensorOp::Stub& stub, const v1::Tensor& input, const v1::Tensor& indices,
                     v1::Backend backend, int rounds) {
  const std::vector<std::string> made = {Put(stub, input, backend), Put(stub, indices, backend)};
  const v1::RunChainRequest chain = SequenceChain(made[0], made[1], backend, /*keep=*/true);
  std::vector<double> times;
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up
    std::vector<std::string> kept;
    const Clock::time_point start = Clock::now();
    RunChain(stub, chain, &kept);
    if (round > 0) times.push_back(SecondsSince(start));
    Release(stub, kept);
  }
  Release(stub, made);
  return Median(std::move(times));
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50051";
  int rounds = 5;
  bool measure_resident = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--target=", 0) == 0) target = arg.substr(9);
    if (arg.rfind("--rounds=", 0) == 0) rounds = std::max(1, std::stoi(arg.substr(9)));
    if (arg == "--resident") measure_resident = true;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto stub = TensorOp::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));

  // bidi
  std::string matrix(static_cast<size_t>(kRows * kCols), '\0');
  for (size_t i = 0; i < matrix.size(); ++i) matrix[i] = static_cast<char>(i % 251);
  const v1::Tensor one_mib = Inline(v1::UINT8, {kRows, kCols}, matrix);
  std::vector<double> sending, resident;
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up
    const double send = RunBidiStream(*stub, [&](int i) { return RowSlice(i, one_mib); });
    const Clock::time_point start = Clock::now();
    const std::string id = Put(*stub, one_mib);
    RunBidiStream(*stub, [&](int i) { return RowSlice(i, ByHandle(id)); });
    Release(*stub, {id});
    const double held = SecondsSince(start);
    if (round > 0) {
      sending.push_back(send);
      resident.push_back(held);
    }
  }
  std::printf(
      "bidi: %d slices of a 1 MiB tensor, median of %d rounds: sent each time %.1f ms, put "
      "once %.1f ms, ratio %.2f\n",
      kOps, rounds, Median(sending) * 1e3, Median(resident) * 1e3,
      Median(sending) / Median(resident));

  // sequence
  std::vector<float> values(static_cast<size_t>(kSeqRows * kSeqCols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 100003);
  const v1::Tensor input = Inline(
      v1::FLOAT32, {kSeqRows, kSeqCols},
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  const v1::Tensor indices = Inline(v1::INT32, {kSeqRows / 2, kSeqCols}, PermutedRowIndices());
  sending.clear();
  resident.clear();
  std::vector<double> chained;
  for (int round = 0; round < rounds + 1; ++round) {
    const double send = SequenceSending(*stub, input, indices);
    const double held = SequenceWithHandles(*stub, input, indices);
    const double chain = SequenceChained(*stub, input, indices);
    if (round > 0) {
      sending.push_back(send);
      resident.push_back(held);
      chained.push_back(chain);
    }
  }
  std::printf(
      "sequence: 4 ops on float32 [8192, 1024], median of %d rounds: separate Runs %.1f ms, "
      "handles (2 Puts, 4 kept Runs, 2 Fetches) %.1f ms, ratio %.2f\n",
      rounds, Median(sending) * 1e3, Median(resident) * 1e3, Median(sending) / Median(resident));
  std::printf(
      "chain: the same 4 ops, median of %d rounds: separate Runs %.1f ms, put once and chained "
      "(2 Puts, 1 RunChain answering both halves) %.1f ms, ratio %.2f\n",
      rounds, Median(sending) * 1e3, Median(chained) * 1e3, Median(sending) / Median(chained));

  // --resident: the chain alone, its tensors resident on oneTBB against on
  // the OpenCL device (a GPU's figure; the server needs a device).
  if (measure_resident) {
    const double on_cpu = ResidentChain(*stub, input, indices, v1::CPU, rounds);
    const double on_device = ResidentChain(*stub, input, indices, v1::OPENCL, rounds);
    std::printf(
        "resident: RunChain alone (results kept), median of %d rounds: resident on the CPU "
        "%.2f ms, on the OpenCL device %.2f ms, ratio %.2f\n",
        rounds, on_cpu * 1e3, on_device * 1e3, on_cpu / on_device);
  }
  return 0;
}
