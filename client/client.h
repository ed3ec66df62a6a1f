// tensorop::client::Client: calls tensord's RPCs and hands back host tensors.
//
//   Client client("127.0.0.1:50051");
//   absl::StatusOr<Result> result = client.Run(request);
//
// Every call returns the server's status with its code and message unchanged, or
// INTERNAL when what the server sent cannot be a valid answer (a truncated stream,
// strides that reach past the data): the outputs of an OK Result are always safe to
// read through their strides (but for kept outputs, which carry a handle and no
// data).
#ifndef TENSOROP_CLIENT_CLIENT_H_
#define TENSOROP_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
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

// Put's choices (PutHeader).
struct PutOptions {
  // Where the handle's bytes live: AUTO and CPU keep them in host memory,
  // OPENCL on device `device_index` (unset: the least-loaded device).
  v1::Backend backend = v1::AUTO;
  std::optional<int32_t> device_index{};
  // Seconds the handle lives after its last use; 0: the server's
  // --handle_ttl_seconds (longer than its --handle_max_ttl_seconds is clamped).
  int64_t ttl_seconds = 0;
  // Upload chunk; 0: ClientOptions::chunk_bytes (1 MiB unless set).
  int64_t chunk_bytes = 0;
  // The replica to keep it on (another handle's TensorHandle.replica), so
  // that one call can read both; empty: any, as the target balances.
  std::string replica{};
};

// W3C Trace Context: while a TraceScope lives, every call this thread makes
// through a Client carries `traceparent` ("00-<32 hex>-<16 hex>-<2 hex>") in
// its metadata, and tensord logs the call under that trace (its own span, the
// caller's as parent) and answers with its span's traceparent. Scopes nest; as
// OpenTelemetry's context, the current one is per thread.
class TraceScope {
 public:
  explicit TraceScope(std::string traceparent);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  // The innermost scope's traceparent on this thread, or "".
  static const std::string& Current();

 private:
  std::string previous_;
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

  // Shared memory (docs/colocated.md; client/shared_memory.h makes
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

  // Handles (tensors that stay on the server; proto TensorHandle). Requests
  // reference one with an input Tensor whose `handle.id` is set, and keep an
  // output with OutputDesc.keep: Run, RunStream, RunChunked and RunBidi then
  // return that output as a HostTensor with `handle` set and no data.
  //
  // A handle lives on one replica, its `handle.replica`: every call reading
  // handles (an input Tensor's, a chain step's) goes there over a channel of
  // its own (made on first use, with this client's credentials), and the
  // others balance over the target; so set `handle.replica` beside
  // `handle.id` (an empty one, from an older server, goes over the target).
  // A call reading handles of two replicas is INVALID_ARGUMENT naming both
  // inputs, before anything is sent; one whose replica cannot be reached is
  // UNAVAILABLE "replica R holding H... is unreachable: <gRPC's message>".
  //
  // Put: uploads `tensor` (a header, then its bytes in chunks): the handle.
  // A strided tensor's bytes past its layout's extent are not sent.
  absl::StatusOr<v1::TensorHandle> Put(const HostTensor& tensor, const PutOptions& options = {});
  // Fetch: a handle's tensor, packed, or with `strides` (elements) when given,
  // from its replica; by id alone, from whichever replica the target reaches.
  absl::StatusOr<HostTensor> Fetch(const v1::TensorHandle& handle,
                                   absl::Span<const int64_t> strides = {});
  absl::StatusOr<HostTensor> Fetch(const std::string& id, absl::Span<const int64_t> strides = {});
  // Release: frees the handles, each on its replica (a call per replica and
  // per kMaxReleaseIds ids; the first error, after trying every one); by ids
  // alone, on whichever replica the target reaches. Unknown ids are ignored.
  static constexpr size_t kMaxReleaseIds = 1000;  // per call, as the server takes
  absl::Status Release(absl::Span<const v1::TensorHandle> handles);
  absl::Status Release(const std::vector<std::string>& ids);
  // ListHandles: one page of the caller's handles (page_size 0: the server's
  // default of 100), and every page, on whichever replica the target reaches.
  absl::StatusOr<v1::ListHandlesResponse> ListHandles(int page_size = 0,
                                                      const std::string& page_token = "");
  absl::StatusOr<std::vector<v1::TensorHandle>> ListAllHandles();

  // RunChain: steps run in order on the server, intermediates staying there;
  // the results arrive like RunStream's outputs, in `results` order (a kept
  // one with `handle` set and no data).
  absl::StatusOr<Result> RunChain(const v1::RunChainRequest& chain);

 private:
  // Where a call goes: the main channel, balancing over the target, or the
  // one replica holding the handles the call reads.
  struct Route {
    v1::TensorOp::Stub* stub = nullptr;
    grpc::Channel* channel = nullptr;
    std::string replica{};  // empty: the main channel
    std::string holding{};  // " holding 0123abcd...", or empty (Put)
  };
  // Channels to one replica each, made on first use and kept.
  struct ReplicaChannels {
    struct Entry {
      std::shared_ptr<grpc::Channel> channel;
      std::unique_ptr<v1::TensorOp::Stub> stub;
    };
    std::mutex mutex;
    std::map<std::string, Entry, std::less<>> by_address;
  };

  void Connect(std::shared_ptr<grpc::Channel> channel);
  Route MainRoute() const;
  // To `replica` (empty: the main channel) for a call on `handle_id` (empty:
  // none, a Put).
  Route RouteTo(const std::string& replica, absl::string_view handle_id);
  // Where a request goes: the replica of the handles it reads (inputs, or
  // chain steps' tensors); INVALID_ARGUMENT when they live on two.
  absl::StatusOr<Route> RouteFor(const v1::RunRequest& request);
  absl::StatusOr<Route> RouteFor(const v1::RunChainRequest& chain);
  // Starts a context with the configured deadline; the target's error if it
  // was malformed.
  absl::Status Prepare(grpc::ClientContext& context) const;
  void Report(Progress::Direction direction, int64_t done, int64_t total) const;
  // A failed call's status, explained for this client's transport security,
  // and saying which replica could not be reached when the call went to one.
  absl::Status Failed(const grpc::Status& status, const Route& route) const;
  template <typename Stream>
  absl::StatusOr<Result> ReadResultParts(grpc::ClientContext& context, Stream& stream,
                                         const Route& route);
  // RunBidi of requests[i] for each i in `indices`, all going one way, their
  // outcomes into `results`.
  void RunBidiOn(const Route& route, const std::vector<v1::RunRequest>& requests,
                 const std::vector<size_t>& indices, std::vector<absl::StatusOr<Result>>& results);
  absl::StatusOr<HostTensor> FetchVia(const Route& route, const std::string& id,
                                      absl::Span<const int64_t> strides);
  absl::Status ReleaseVia(const Route& route, const std::vector<std::string>& ids);
  // Writes `data` in parts of at most `chunk_bytes`, each made by
  // set_chunk(part, piece), reporting upload progress; false once a Write fails
  // (the call is over: Finish says why).
  template <typename Part, typename Stream, typename SetChunk>
  bool WriteChunks(Stream& stream, absl::string_view data, int64_t chunk_bytes, SetChunk set_chunk,
                   int64_t& done, int64_t total) const;

  ClientOptions options_;
  absl::Status target_status_;
  std::unique_ptr<v1::TensorOp::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
  // What replica channels are made with: the main channel's credentials (null:
  // insecure) and, with TLS, the target's authority (TargetAuthority).
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::string authority_;
  std::unique_ptr<ReplicaChannels> replicas_ = std::make_unique<ReplicaChannels>();
};

// A gRPC status as an absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// A wire status code (google.rpc.Code) as an absl code; UNKNOWN outside 0..16.
absl::StatusCode StatusCodeFromWire(int code);

// `tensor` as a HostTensor: its layout copied, its data (or handle) moved out.
HostTensor HostTensorFromProto(v1::Tensor& tensor);

// A RunResponse's outputs as a Result, each checked with CheckLayout; INTERNAL
// naming the output when the server sent one that cannot be read safely.
// With `request`, outputs it sends to a shared memory region are taken as
// layouts only (their data is in the region), and outputs it keeps must carry
// their handle. An output with a handle is returned with `handle` set, no data.
absl::StatusOr<Result> ResultFromResponse(v1::RunResponse& response,
                                          const v1::RunRequest* request = nullptr);

// Gives a request whose operator derives its one output (every operator but
// slice and split) and that leaves it to the server (no `outputs`) the one
// OutputDesc it would get, so that it can be sent to shared memory:
// scatter_elements' sizes are its input's; the others' are asked of the server
// with a plain Run of the request (a failure there is left for the real call
// to report). Other requests are left alone.
void DescribeOutputs(Client& client, v1::RunRequest& request);

// Marks every output of `request` kept (OutputDesc.keep); a request whose
// operator derives its output, without `outputs`, gets one empty entry (its
// sizes left to the server) to keep.
void KeepOutputs(v1::RunRequest& request);

// `request`'s operator, inputs (as tensors) and outputs as a chain step.
v1::ChainStep ChainStepOf(const v1::RunRequest& request);

// `request` as a chain of one step answering every output (split: one per
// OutputDesc; the others: one), with its backend and device.
v1::RunChainRequest OneStepChain(const v1::RunRequest& request);
// `steps` (at least one) as one chain with the first's id, backend and device:
// each later step reads its "input" from output `from[i - 1]` (missing: 0) of
// the step before, and every output of the last step is answered.
v1::RunChainRequest ChainOf(absl::Span<const v1::RunRequest> steps, absl::Span<const int> from);

// Makes `tensor` name `handle` (its id, and its replica to route by), in
// place of any data; its layout stays beside it.
void ReferTo(const v1::TensorHandle& handle, v1::Tensor& tensor);

// Runs `request` (unary Run) through handles: each input is Put (in name
// order, with `put`, all on one replica: the first Put's, or that of a handle
// the request already reads), the request runs with its inputs referencing
// those handles and every output kept, each kept output is Fetched (with its
// OutputDesc's strides, else packed), and every handle made is Released,
// whatever happened. The same answer as client.Run(request), or the first
// error (a Put's, for an input the server rejects).
absl::StatusOr<Result> RunWithHandles(Client& client, const v1::RunRequest& request,
                                      const PutOptions& put = {});

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CLIENT_H_
