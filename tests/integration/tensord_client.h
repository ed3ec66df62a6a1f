// Client-side helpers for the tests that talk to a real tensord: channels,
// request builders, byte packing, protobuf wire encoding for the services we
// have no generated stubs for (health, reflection), a blocking raw-bytes call,
// and waiting for request-log lines.
#ifndef TENSOROP_TESTS_INTEGRATION_TENSORD_CLIENT_H_
#define TENSOROP_TESTS_INTEGRATION_TENSORD_CLIENT_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "tensorop/v1/tensorop.grpc.pb.h"
#include "tensorop/v1/tensorop.pb.h"
#include "tests/support/set_ints.h"
#include "tests/support/tensord_process.h"

namespace tensorop::testing {

// A channel to `target` without message size limits on our side: the tests
// exercise the server's limits, not the client's.
std::shared_ptr<grpc::Channel> Connect(const std::string& target);

// The little-endian bytes of `values`.
template <typename T>
std::string Pack(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// `bytes` read as T elements.
template <typename T>
std::vector<T> Unpack(const std::string& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> sizes, std::string data,
                      std::vector<int64_t> strides = {});

// A slice request for `input` with one output of `output_sizes`.
v1::RunRequest SliceRequest(const std::string& id, v1::Tensor input, std::vector<int64_t> offsets,
                            std::vector<int64_t> window_sizes, std::vector<int64_t> window_strides,
                            std::vector<int64_t> output_sizes);

// A float32 [512, 1024] matrix (2 MiB: inputs from 1 MiB are read where gRPC
// received them) and what slicing its rows reversed, every third column from
// 1, gives: out[i][j] = matrix[511 - i][1 + 3j], [512, 341].
struct ReversedRows {
  std::vector<float> matrix;
  std::vector<float> expected;
  // The slice request giving `expected`.
  v1::RunRequest Request(const std::string& id) const;
};
ReversedRows ReversedRowsCase();

// OPERATORS.md's slice example: float32 [1,1,4,4] holding 1..16, offsets
// [0,0,0,1], window [1,1,4,3], strides [1,1,2,2] -> [1,1,2,2] holding 2,4,10,12.
v1::RunRequest DocSliceRequest(const std::string& id);

// A uint8 input of sizes [rows, cols] made from one row of `cols` bytes
// broadcast with stride 0 (row value: column % 251), sliced whole: the output is
// rows*cols bytes while the upload is cols bytes.
v1::RunRequest BroadcastRowsRequest(const std::string& id, int64_t rows, int64_t cols);

// A 10 MiB uint8 [10240, 1024] input split into 4096 and 6144 whole rows (4
// and 6 MiB): each output is a run of the input's bytes, which the server
// answers with from where gRPC received them.
struct SplitRows {
  static constexpr int64_t kRows = 10240, kCols = 1024;
  std::string bytes;  // the input's
  v1::RunRequest request;
};
SplitRows SplitRowsCase();
inline uint8_t BroadcastRowValue(int64_t column) { return static_cast<uint8_t>(column % 251); }
// The bytes of `data` that differ from BroadcastRowsRequest's result with `cols` columns.
int64_t BroadcastRowsMismatches(const std::string& data, int64_t cols);

// Protobuf wire format by hand, for messages we have no generated code for.
std::string WireString(int field, const std::string& value);
// The length-delimited (string/bytes/message) values of `field` in `message`.
std::vector<std::string> WireStrings(const std::string& message, int field);
// The varint values of `field` in `message`.
std::vector<uint64_t> WireVarints(const std::string& message, int field);

// Puts `tensor` (its dtype, sizes, strides and data) as a handle living
// `ttl_seconds` after each use (0: the server's default), its data in chunks
// of at most `chunk_bytes`, on `backend`.
grpc::Status PutTensor(v1::TensorOp::Stub& stub, const v1::Tensor& tensor, v1::TensorHandle* handle,
                       int64_t ttl_seconds = 0, int64_t chunk_bytes = int64_t{1} << 20,
                       v1::Backend backend = v1::AUTO);

// Fetches handle `id` whole, with `strides` (empty: packed): its header and
// bytes appended to `data`.
grpc::Status FetchTensor(v1::TensorOp::Stub& stub, const std::string& id,
                         const std::vector<int64_t>& strides, v1::OutputHeader* header,
                         std::string* data);

// Releases every handle ListHandles shows the caller, so that the server's
// SIGTERM does not wait out its grace period serving them (server.cc).
void ReleaseEveryHandle(v1::TensorOp::Stub& stub);

// The value of `series` on the server's /metrics (its name, with labels
// if it has any: `tensorop_handles{backend="cpu"}`), or -1.
int64_t MetricValue(const TensordProcess& server, const std::string& series);
// The output buffers `server`'s pool handed out so far (from 4 MiB).
int64_t PoolBuffers(const TensordProcess& server);
// MetricValue once it reads `expected`, or its last reading after 10 s: a call's
// reservation is given back in its OnDone, a moment after the client has its
// status.
int64_t MetricValueOnceItIs(const TensordProcess& server, const std::string& series,
                            int64_t expected);

// A connected loopback socket to an HTTP `port` (reads time out after
// `timeout_seconds`), or -1.
int ConnectHttp(int port, int timeout_seconds = 10);
// Sends `request` on a fresh connection to `port` and reads one answer: until
// its Content-Length is in (the server may keep the connection), the server
// closes it, or a read waits `timeout_seconds`.
std::string RawHttpExchange(int port, const std::string& request, int timeout_seconds = 10);

// The value of the first series of `family` on the server's /metrics, whatever
// its labels, or -1.
int64_t FirstMetricValue(const TensordProcess& server, const std::string& family);

// One call of any method, in raw bytes, with every step blocking until done
// (GenericStub's async streaming call driven on a private completion queue).
// Works for unary methods too: on the wire they are one-message streams.
class RawCall {
 public:
  RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
          grpc::ClientContext* context);
  ~RawCall();
  bool Write(const std::string& message);
  bool WritesDone();
  std::optional<std::string> Read();
  grpc::Status Finish();

 private:
  bool Await();

  grpc::CompletionQueue queue_;
  grpc::GenericStub stub_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool finished_ = false;
};

// Sends each of `messages` on `method`, half-closes, reads everything and
// returns the final status.
grpc::Status RawExchange(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                         const std::vector<std::string>& messages);

// Waits until the server's log has a line containing every one of `needles`
// and returns it, or returns "" once the server has exited or after a generous
// wait (30 s), having printed which and the end of its log.
std::string AwaitLogLine(const TensordProcess& server, const std::vector<std::string>& needles);

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_INTEGRATION_TENSORD_CLIENT_H_
