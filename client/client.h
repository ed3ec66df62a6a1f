// tensorop::client::Client: calls tensord's four RPCs and hands back host tensors.
//
//   Client client("127.0.0.1:50051");
//   absl::StatusOr<Result> result = client.Run(request);
//
// Every call returns the server's status with its code and message unchanged, or
// INTERNAL when what the server sent cannot be a valid answer (a truncated stream,
// strides that reach past the data): the outputs of an OK Result are always safe to
// read through their strides.
#ifndef TENSOROP_CLIENT_CLIENT_H_
#define TENSOROP_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/host_tensor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tensorop/v1/tensorop.grpc.pb.h"

namespace tensorop::client {

// How far one transfer has come, in bytes.
struct Progress {
  enum class Direction { kUpload, kDownload };
  Direction direction = Direction::kUpload;
  int64_t done = 0;
  // Uploads: every input's bytes. Downloads: the bytes announced by the output
  // headers received so far, so it grows when a later output's header arrives.
  int64_t total = 0;
};

using ProgressCallback = std::function<void(const Progress&)>;

struct ClientOptions {
  // The largest message the channel sends or receives (gRPC's default receive
  // limit is 4 MiB). Run carries every output inline, so it bounds Run's answers;
  // the streaming calls only need it above the chunk size.
  int max_message_bytes = 64 << 20;
  // RunChunked's default upload chunk.
  int64_t chunk_bytes = 1 << 20;
  // Per call; absl::InfiniteDuration() for none.
  absl::Duration deadline = absl::Minutes(10);
  // Called from the calling thread as RunStream and RunChunked move data.
  ProgressCallback progress;
  // Send calls only to replicas whose health service says SERVING (client-side
  // health checking). Off for a client that asks about health itself: it must
  // reach a NOT_SERVING server to hear it say so.
  bool skip_unhealthy_replicas = true;
  // TLS, mutual TLS and a bearer token (client/channel.h); the files are read
  // when the Client is made, and a bad one makes every call INVALID_ARGUMENT
  // naming it.
  ChannelSecurity security;
};

class Client {
 public:
  // Connects lazily: an unreachable target shows up as UNAVAILABLE from the
  // first call. `target` is one address, a list of replicas or a gRPC target
  // such as dns:///NAME:PORT (client/channel.h: ChannelTarget); requests go
  // round-robin over the replicas and are retried on UNAVAILABLE. A malformed
  // target makes every call INVALID_ARGUMENT with ChannelTarget's message.
  explicit Client(const std::string& target, ClientOptions options = {});
  // Over an existing channel (tests use in-process servers).
  Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // Unary Run: one response with every output inline.
  absl::StatusOr<Result> Run(const v1::RunRequest& request);

  // RunStream: each output arrives as a header and then chunks of its bytes,
  // reassembled here.
  absl::StatusOr<Result> RunStream(const v1::RunRequest& request);

  // RunBidi: sends every request on one stream while reading answers, which come
  // in completion order and are matched back by id. The answer for requests[i] is
  // element i. Ids must be distinct (else every element is INVALID_ARGUMENT and
  // nothing is sent); a request the stream ended without answering gets the
  // stream's status, or INTERNAL if the stream ended OK.
  std::vector<absl::StatusOr<Result>> RunBidi(const std::vector<v1::RunRequest>& requests);

  // RunChunked: sends `request` without its tensors' data, then each input's data
  // in chunks of `chunk_bytes` (0: options.chunk_bytes), so inputs of several GB
  // need no raised message limit; answered like RunStream.
  absl::StatusOr<Result> RunChunked(const v1::RunRequest& request, int64_t chunk_bytes = 0);

  // grpc.health.v1.Health/Check of `service` ("" is the whole server; tensord
  // also answers "tensorop.v1.TensorOp", "tensorop.cpu" and "tensorop.opencl"):
  // the status's name ("SERVING", "NOT_SERVING", ...), or the call's error.
  absl::StatusOr<std::string> CheckHealth(const std::string& service);

  // Shared memory (README "Shared memory"; client/shared_memory.h makes
  // regions): maps the POSIX shared memory object `key` in the server under
  // the name `region` (byte_size 0: the whole object). Requests then reference
  // it with SharedMemoryRef; Run's outputs written into a region come back as
  // layout-only tensors (no data): read them from the region.
  absl::StatusOr<v1::SharedMemoryRegion> RegisterSharedMemory(const std::string& region,
                                                              const std::string& key,
                                                              int64_t byte_size = 0);
  absl::Status UnregisterSharedMemory(const std::string& region);
  // Every region ("" ) or the one named.
  absl::StatusOr<v1::SharedMemoryStatusResponse> SharedMemoryStatus(const std::string& region = "");

 private:
  void Connect(std::shared_ptr<grpc::Channel> channel);
  // Starts a context with the configured deadline; the target's error if it
  // was malformed.
  absl::Status Prepare(grpc::ClientContext& context) const;
  void Report(Progress::Direction direction, int64_t done, int64_t total) const;
  // A failed call's status, explained for this client's transport security.
  absl::Status Failed(const grpc::Status& status) const;
  template <typename Stream>
  absl::StatusOr<Result> ReadResultParts(grpc::ClientContext& context, Stream& stream);

  ClientOptions options_;
  absl::Status target_status_;
  std::unique_ptr<v1::TensorOp::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

// A gRPC status as an absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// A wire status code (google.rpc.Code) as an absl code; UNKNOWN outside 0..16.
absl::StatusCode StatusCodeFromWire(int code);

// A RunResponse's outputs as a Result, each checked with CheckLayout; INTERNAL
// naming the output when the server sent one that cannot be read safely.
// With `request`, outputs it sends to a shared memory region are taken as
// layouts only (their data is in the region).
absl::StatusOr<Result> ResultFromResponse(v1::RunResponse& response,
                                          const v1::RunRequest* request = nullptr);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CLIENT_H_
