// The bare baseline of bench/bulk/run.sh: a gRPC server on the callback API
// that speaks tensorop.v1.TensorOp's wire format without parsing a request or
// doing any work, so tensord can be measured against the limit of the RPC path
// on the same machine. Every answer is serialized once at startup and sent as
// shared slices (no copy per call):
//
//   Run         answers the pre-serialized RunResponse (one uint8 output) of
//               the largest size in --unary_bytes not above the request's
//               length (the request is never parsed; its length picks), else
//               the smallest.
//   RunStream   reads the request, answers a header and data in ResultPart
//               chunks of --part_bytes: as many bytes as the largest size in
//               --unary_bytes not above the request's length (a RunStream of
//               Run's request), else --stream_bytes (a small request whose
//               result is large).
//   RunChunked  reads and drops every part until the client half-closes, then
//               answers like RunStream with --chunked_result_bytes of data.
//
// It prints "bare listening on HOST:PORT" once it listens (--address=HOST:0
// lets the kernel pick the port). Like tensord, it hands what malloc keeps of
// freed blocks back to the system (malloc_trim) once no call is open after a
// busy spell, so both servers start each round of the bench from the same state.
#include <malloc.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "server/memory/memory_budget.h"
#include "tensorop/v1/tensorop.pb.h"

namespace {

using tensorop::v1::ResultPart;
using tensorop::v1::RunResponse;

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());  // copied once, here
  return grpc::ByteBuffer(&slice, 1);
}

// A RunResponse with one packed uint8 output of `bytes` bytes, as tensord
// answers a 1-D uint8 Slice.
grpc::ByteBuffer UnaryAnswer(int64_t bytes) {
  RunResponse response;
  response.set_id("bulk");
  tensorop::v1::Tensor* tensor = response.add_outputs();
  tensor->set_dtype(tensorop::v1::UINT8);
  tensor->add_sizes(bytes);
  tensor->add_strides(1);
  tensor->mutable_data()->assign(static_cast<size_t>(bytes), '\x01');
  response.set_backend("cpu");
  return ToByteBuffer(response.SerializeAsString());
}

// A streamed result's serialized ResultParts.
using Parts = std::vector<grpc::ByteBuffer>;

// The parts of a streamed result of `bytes` bytes in chunks of `part_bytes`.
Parts StreamAnswer(int64_t bytes, int64_t part_bytes) {
  Parts parts;
  ResultPart header;
  header.mutable_header()->set_index(0);
  header.mutable_header()->set_dtype(tensorop::v1::UINT8);
  header.mutable_header()->add_sizes(bytes);
  header.mutable_header()->add_strides(1);
  header.mutable_header()->set_byte_length(bytes);
  header.mutable_header()->set_backend("cpu");
  parts.push_back(ToByteBuffer(header.SerializeAsString()));
  ResultPart chunk;
  chunk.set_chunk(std::string(static_cast<size_t>(std::min(bytes, part_bytes)), '\x01'));
  const grpc::ByteBuffer full = ToByteBuffer(chunk.SerializeAsString());
  for (int64_t offset = 0; offset < bytes; offset += part_bytes) {
    const int64_t length = std::min(part_bytes, bytes - offset);
    if (length == part_bytes) {
      parts.push_back(full);  // shares the slice
    } else {
      chunk.set_chunk(std::string(static_cast<size_t>(length), '\x01'));
      parts.push_back(ToByteBuffer(chunk.SerializeAsString()));
    }
  }
  return parts;
}

// The answer for the largest payload of `answers` (ascending) not above
// `request_bytes`, else `fallback`.
template <typename Answer>
const Answer& ForRequest(const std::vector<std::pair<int64_t, Answer>>& answers,
                         size_t request_bytes, const Answer& fallback) {
  const Answer* best = &fallback;
  for (const auto& [bytes, answer] : answers) {
    if (static_cast<size_t>(bytes) <= request_bytes) best = &answer;
  }
  return *best;
}

struct Answers {
  // By payload bytes, ascending (--unary_bytes).
  std::vector<std::pair<int64_t, grpc::ByteBuffer>> unary;
  std::vector<std::pair<int64_t, Parts>> unary_streamed;
  Parts stream;
  Parts chunked;
};

std::atomic<int64_t> calls_open{0};
std::atomic<int64_t> calls_started{0};

// tensord's idle trim (server/process/server.cc, Server::RunTicker), by the same rule
// (IdleTrim, header only): calls started stand for the bytes ever reserved.
void TrimWhenIdle() {
  tensorop::server::IdleTrim idle_trim(0);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (idle_trim.Tick(calls_started.load(), calls_open.load() > 0)) malloc_trim(0);
  }
}

class Reactor final : public grpc::ServerGenericBidiReactor {
 public:
  Reactor(grpc::GenericCallbackServerContext* context, const Answers& answers) : answers_(answers) {
    calls_open.fetch_add(1);
    calls_started.fetch_add(1);
    const std::string& method = context->method();
    if (method == "/tensorop.v1.TensorOp/Run") {
      kind_ = Kind::kUnary;
    } else if (method == "/tensorop.v1.TensorOp/RunStream") {
      kind_ = Kind::kStream;
    } else if (method == "/tensorop.v1.TensorOp/RunChunked") {
      kind_ = Kind::kChunked;
    } else {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "bare: " + method));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    switch (kind_) {
      case Kind::kUnary:
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bare: no request"));
          return;
        }
        out_ = ForRequest(answers_.unary, in_.Length(), answers_.unary.front().second);
        in_.Clear();
        StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
        return;
      case Kind::kStream:
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bare: no request"));
          return;
        }
        parts_ = &ForRequest(answers_.unary_streamed, in_.Length(), answers_.stream);
        in_.Clear();
        OnWriteDone(true);
        return;
      case Kind::kChunked:
        in_.Clear();
        if (ok) {
          StartRead(&in_);
          return;
        }
        parts_ = &answers_.chunked;
        OnWriteDone(true);
        return;
    }
  }

  void OnWriteDone(bool ok) override {
    if (kind_ == Kind::kUnary) return;
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "bare: the client stopped receiving"));
      return;
    }
    if (next_ == parts_->size()) {
      Finish(grpc::Status::OK);
      return;
    }
    out_ = (*parts_)[next_++];
    StartWrite(&out_);
  }

  void OnDone() override {
    calls_open.fetch_sub(1);
    delete this;
  }

 private:
  enum class Kind { kUnary, kStream, kChunked };
  const Answers& answers_;
  Kind kind_ = Kind::kUnary;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  const Parts* parts_ = nullptr;
  size_t next_ = 0;
};

class BareService final : public grpc::CallbackGenericService {
 public:
  explicit BareService(Answers answers) : answers_(std::move(answers)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new Reactor(context, answers_);
  }

 private:
  const Answers answers_;
};

// "--name=value" → value, or nullptr.
const char* Flag(const char* arg, const char* name) {
  const size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) == 0 && arg[length] == '=') return arg + length + 1;
  return nullptr;
}

int64_t ParseBytes(const char* text, const char* flag) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 1) {
    std::fprintf(stderr, "bare: %s=%s is not a positive byte count\n", flag, text);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked before gRPC starts its threads, so every thread inherits the mask
  // and SIGTERM reaches sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::string address = "127.0.0.1:0";
  std::vector<int64_t> unary_bytes = {int64_t{1} << 20, int64_t{32} << 20};
  int64_t stream_bytes = int64_t{256} << 20;
  int64_t part_bytes = int64_t{1} << 20;
  int64_t chunked_result_bytes = 4096;
  int64_t max_message_bytes = int64_t{64} << 20;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (const char* v = Flag(arg, "--address")) {
      address = v;
    } else if (const char* v = Flag(arg, "--unary_bytes")) {
      unary_bytes.clear();
      std::string list = v;
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        unary_bytes.push_back(
            ParseBytes(list.substr(start, comma - start).c_str(), "--unary_bytes"));
        start = comma + 1;
      }
    } else if (const char* v = Flag(arg, "--stream_bytes")) {
      stream_bytes = ParseBytes(v, "--stream_bytes");
    } else if (const char* v = Flag(arg, "--part_bytes")) {
      part_bytes = ParseBytes(v, "--part_bytes");
    } else if (const char* v = Flag(arg, "--chunked_result_bytes")) {
      chunked_result_bytes = ParseBytes(v, "--chunked_result_bytes");
    } else if (const char* v = Flag(arg, "--max_message_bytes")) {
      max_message_bytes = ParseBytes(v, "--max_message_bytes");
    } else {
      std::fprintf(stderr, "bare: unknown argument %s\n", arg);
      return 2;
    }
  }
  std::sort(unary_bytes.begin(), unary_bytes.end());

  Answers answers;
  for (int64_t bytes : unary_bytes) {
    answers.unary.emplace_back(bytes, UnaryAnswer(bytes));
    answers.unary_streamed.emplace_back(bytes, StreamAnswer(bytes, part_bytes));
  }
  answers.stream = StreamAnswer(stream_bytes, part_bytes);
  answers.chunked = StreamAnswer(chunked_result_bytes, part_bytes);
  BareService service(std::move(answers));

  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message_bytes));
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "bare: cannot listen on %s\n", address.c_str());
    return 1;
  }
  const std::string host = address.substr(0, address.rfind(':'));
  std::printf("bare listening on %s:%d\n", host.c_str(), port);
  std::fflush(stdout);

  std::thread(TrimWhenIdle).detach();
  int signal = 0;
  sigwait(&signals, &signal);
  server->Shutdown();
  return 0;
}
