// The client side of bench/bulk/run.sh. It sends pre-serialized messages and
// takes answers as raw bytes (nothing is parsed but the final status), so the
// client costs the same against tensord and against the bare baseline.
//
//   bulk_driver encode --bytes=N [--order=forward|reversed]
//       a RunRequest on stdout for ghz -B: a 1-D uint8 Slice of N bytes that
//       copies all of them (N in, N out), in order (tensord answers with the
//       received bytes themselves) or backwards (the kernel copies them)
//   bulk_driver stream --target=HOST:PORT --bytes=N [--calls=K]
//       K RunStream calls whose result is N bytes (a 1 KiB row broadcast to
//       N/1024 rows; N a multiple of 1024)
//   bulk_driver chunked --target=HOST:PORT --bytes=N [--part_bytes=P] [--calls=K]
//                       [--read=head|spread]
//       K RunChunked calls uploading an N-byte uint8 input in P-byte chunks
//       whose result is 4 KiB of it: its first 4 KiB (head), or every
//       (N/4096)th byte (spread: the op reads across all of the input, so
//       tensord stores it all; N a multiple of 4096)
//
// stream and chunked print one JSON line per call:
//   {"seconds":S,"bytes_received":R}
// and exit 1 when a call does not end OK.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "tensorop/v1/tensorop.pb.h"

namespace {

using tensorop::v1::RequestPart;
using tensorop::v1::RunRequest;

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

// A 1-D Slice of `window` elements from 0, every `stride`th (negative:
// backwards).
void SetSlice(RunRequest* request, int64_t window, int64_t stride = 1) {
  const int64_t step = std::abs(stride);
  request->set_id("bulk");
  request->mutable_slice()->add_offsets(0);
  request->mutable_slice()->add_window_sizes(window);
  request->mutable_slice()->add_window_strides(stride);
  request->add_outputs()->add_sizes((window + step - 1) / step);
}

std::string UnaryRequest(int64_t bytes, bool reversed) {
  RunRequest request;
  SetSlice(&request, bytes, reversed ? -1 : 1);
  tensorop::v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(tensorop::v1::UINT8);
  input.add_sizes(bytes);
  std::string data(static_cast<size_t>(bytes), '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  input.set_data(std::move(data));
  return request.SerializeAsString();
}

std::string StreamRequest(int64_t bytes) {
  const int64_t rows = bytes / 1024;
  RunRequest request;
  request.set_id("bulk");
  request.mutable_slice()->add_offsets(0);
  request.mutable_slice()->add_offsets(0);
  request.mutable_slice()->add_window_sizes(rows);
  request.mutable_slice()->add_window_sizes(1024);
  request.mutable_slice()->add_window_strides(1);
  request.mutable_slice()->add_window_strides(1);
  tensorop::v1::OutputDesc* output = request.add_outputs();
  output->add_sizes(rows);
  output->add_sizes(1024);
  tensorop::v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(tensorop::v1::UINT8);
  input.add_sizes(rows);
  input.add_sizes(1024);
  input.add_strides(0);
  input.add_strides(1);
  std::string data(1024, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i);
  input.set_data(std::move(data));
  return request.SerializeAsString();
}

// One call: writes `messages` in order (each may repeat: the list holds
// pointers), half-closes, reads every answer, and reports when it ends.
class Call final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Call(grpc::GenericStub& stub, const std::string& method,
       std::vector<const grpc::ByteBuffer*> messages)
      : messages_(std::move(messages)) {
    stub.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    start_ = std::chrono::steady_clock::now();
    StartRead(&in_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return;  // the call ends; OnDone says how
    WriteNext();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    received_ += static_cast<int64_t>(in_.Length());
    in_.Clear();
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    status_ = status;
    done_ = true;
    cv_.notify_all();
  }

  grpc::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }

  double seconds() const { return seconds_; }
  int64_t received() const { return received_; }

 private:
  void WriteNext() {
    if (next_ == messages_.size()) {
      StartWritesDone();
      return;
    }
    out_ = *messages_[next_++];  // shares the slices
    StartWrite(&out_);
  }

  grpc::ClientContext context_;
  std::vector<const grpc::ByteBuffer*> messages_;
  size_t next_ = 0;
  grpc::ByteBuffer out_;
  grpc::ByteBuffer in_;
  int64_t received_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
  double seconds_ = 0;
};

const char* Flag(const char* arg, const char* name) {
  const size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) == 0 && arg[length] == '=') return arg + length + 1;
  return nullptr;
}

int64_t ParseCount(const char* text, const char* flag) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 1) {
    std::fprintf(stderr, "bulk_driver: %s=%s is not a positive number\n", flag, text);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bulk_driver encode|stream|chunked --flags...\n");
    return 2;
  }
  const std::string mode = argv[1];
  std::string target = "127.0.0.1:50051";
  int64_t bytes = int64_t{1} << 20;
  int64_t part_bytes = int64_t{1} << 20;
  int64_t calls = 1;
  std::string read = "head";
  std::string encode_order = "forward";
  for (int i = 2; i < argc; ++i) {
    if (const char* v = Flag(argv[i], "--target")) {
      target = v;
    } else if (const char* v = Flag(argv[i], "--bytes")) {
      bytes = ParseCount(v, "--bytes");
    } else if (const char* v = Flag(argv[i], "--part_bytes")) {
      part_bytes = ParseCount(v, "--part_bytes");
    } else if (const char* v = Flag(argv[i], "--calls")) {
      calls = ParseCount(v, "--calls");
    } else if (const char* v = Flag(argv[i], "--read")) {
      read = v;
    } else if (const char* v = Flag(argv[i], "--order")) {
      encode_order = v;
    } else {
      std::fprintf(stderr, "bulk_driver: unknown argument %s\n", argv[i]);
      return 2;
    }
  }

  if (mode == "encode") {
    if (encode_order != "forward" && encode_order != "reversed") {
      std::fprintf(stderr, "bulk_driver: encode --order=forward or reversed\n");
      return 2;
    }
    const std::string request = UnaryRequest(bytes, encode_order == "reversed");
    std::cout.write(request.data(), static_cast<std::streamsize>(request.size()));
    return std::cout.good() ? 0 : 1;
  }

  std::string method;
  std::vector<grpc::ByteBuffer> storage;
  std::vector<size_t> order;  // indices into storage, in writing order
  if (mode == "stream") {
    if (bytes % 1024 != 0) {
      std::fprintf(stderr, "bulk_driver: stream --bytes must be a multiple of 1024\n");
      return 2;
    }
    method = "/tensorop.v1.TensorOp/RunStream";
    storage.push_back(ToByteBuffer(StreamRequest(bytes)));
    order.push_back(0);
  } else if (mode == "chunked") {
    if (bytes < 4096) {
      std::fprintf(stderr, "bulk_driver: chunked --bytes must be at least 4096\n");
      return 2;
    }
    if ((read != "head" && read != "spread") || (read == "spread" && bytes % 4096 != 0)) {
      std::fprintf(stderr,
                   "bulk_driver: chunked --read=head, or spread with --bytes a multiple "
                   "of 4096\n");
      return 2;
    }
    method = "/tensorop.v1.TensorOp/RunChunked";
    RequestPart first;
    if (read == "head") {
      SetSlice(first.mutable_request(), 4096);
    } else {
      SetSlice(first.mutable_request(), bytes, bytes / 4096);
    }
    tensorop::v1::Tensor& input = (*first.mutable_request()->mutable_inputs())["input"];
    input.set_dtype(tensorop::v1::UINT8);
    input.add_sizes(bytes);
    storage.push_back(ToByteBuffer(first.SerializeAsString()));
    order.push_back(0);
    RequestPart chunk;
    chunk.mutable_chunk()->set_input("input");
    chunk.mutable_chunk()->set_data(
        std::string(static_cast<size_t>(std::min(bytes, part_bytes)), '\x05'));
    storage.push_back(ToByteBuffer(chunk.SerializeAsString()));
    const int64_t remainder = bytes % part_bytes;
    if (remainder != 0) {
      chunk.mutable_chunk()->set_data(std::string(static_cast<size_t>(remainder), '\x05'));
      storage.push_back(ToByteBuffer(chunk.SerializeAsString()));
    }
    for (int64_t i = 0; i < bytes / part_bytes; ++i) order.push_back(1);
    if (remainder != 0) order.push_back(2);
  } else {
    std::fprintf(stderr, "bulk_driver: unknown mode %s\n", mode.c_str());
    return 2;
  }
  std::vector<const grpc::ByteBuffer*> messages;
  for (size_t index : order) messages.push_back(&storage[index]);

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  grpc::GenericStub stub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  for (int64_t i = 0; i < calls; ++i) {
    auto call = std::make_unique<Call>(stub, method, messages);
    const grpc::Status status = call->Wait();
    if (!status.ok()) {
      std::fprintf(stderr, "bulk_driver: %s call %lld ended %d: %s\n", mode.c_str(),
                   static_cast<long long>(i), static_cast<int>(status.error_code()),
                   status.error_message().c_str());
      return 1;
    }
    std::printf("{\"seconds\":%.6f,\"bytes_received\":%lld}\n", call->seconds(),
                static_cast<long long>(call->received()));
    std::fflush(stdout);
  }
  return 0;
}
