// A request's bytes parsed against the memory budget (the pipeline's first
// step): what parsing takes reserved from the message's tags before anything
// is allocated, the request's data left where gRPC received it or copied once
// into buffers of its own, the received bytes let go as they are parsed.
#ifndef TENSOROP_SERVER_PIPELINE_PARSE_H_
#define TENSOROP_SERVER_PIPELINE_PARSE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
// SerializationTraits for protobuf messages.
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/memory/output_buffer.h"
#include "server/wire/chunk_part.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// What one request holds besides its tensors, reserved before it is parsed
// (the request, its log record) and per output before it is planned (the
// output's layout, its plan step, its header in the answer), so that a small
// request naming many outputs cannot amplify.
constexpr int64_t kRequestOverheadBytes = 16 << 10;
constexpr int64_t kOutputOverheadBytes = 4 << 10;
// Parses `bytes` as a RunRequest into `request` for `method`, reserving what
// parsing takes (bounded from the tags, before anything is allocated) and the
// per-output overhead of planning it in `reservation`.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                          MemoryBudget::Reservation& reservation, v1::RunRequest* request);

// Parses `bytes` as a RunChainRequest like ParseRequest: reserving what
// parsing takes, then the per-output overhead of planning every step.
absl::Status ParseChainRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                               MemoryBudget::Reservation& reservation, v1::RunChainRequest* chain);

// Input bytes held apart from the request, by input name: they stand for the
// request's own data of those inputs.
struct UploadedInputs {
  // In one buffer.
  std::map<std::string, std::span<const std::byte>, std::less<>> bytes;
  // In pieces of whole elements, in order (a Run request's data left in the
  // slices it was received in: RequestDataView::ElementPieces). The CPU reads
  // them where they lie (CutCopiesAtPieces); a device run, or a read that
  // jumps between pieces, gathers them first.
  std::map<std::string, std::vector<std::span<const std::byte>>, std::less<>> pieces;
};

// An input's bytes held apart from the request (a RunChunked upload, a Run
// request's data taken from the received slices), appended as they arrive in
// a buffer sized ahead where the size is known, so they never move. A large
// one is a buffer pool's (resident pages a previous call left, else fresh
// address space whose pages only the bytes touch) and goes back to it.
class InputBuffer {
 public:
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  std::span<const std::byte> bytes() const { return {data_.get(), static_cast<size_t>(size_)}; }
  // Where the next `bytes` go; Grow first when they do not fit.
  std::byte* Extend(int64_t bytes) {
    std::byte* end = data_.get() + size_;
    size_ += bytes;
    return end;
  }
  // Where the bytes at `offset` go in a buffer filled out of order (an upload
  // storing only the bytes its op reads); they end within capacity().
  std::byte* At(int64_t offset) { return data_.get() + offset; }
  // Every byte of the capacity, for such a buffer once all its bytes arrived.
  std::span<const std::byte> Room() const { return {data_.get(), static_cast<size_t>(capacity_)}; }
  // Room for `capacity` bytes, the held ones copied over; false when out of
  // memory. `kept`: whether the buffer is one the pool kept (resident).
  bool Grow(int64_t capacity, BufferPool* pool, bool* kept) {
    const size_t bytes = static_cast<size_t>(capacity);
    BufferDeleter deleter;
    void* memory = nullptr;
    *kept = false;
    if (bytes < BufferPool::kMinBytes) {
      memory = std::malloc(std::max<size_t>(bytes, 1));
    } else {
      memory = pool != nullptr ? pool->Take(bytes, kept) : BufferPool::Allocate(bytes);
      deleter = {.pool = pool, .capacity = BufferPool::CapacityFor(bytes)};
    }
    if (memory == nullptr) return false;
    OutputBuffer grown(static_cast<std::byte*>(memory), deleter);
    if (size_ > 0) std::memcpy(grown.get(), data_.get(), static_cast<size_t>(size_));
    data_ = std::move(grown);
    capacity_ = capacity;
    return true;
  }

 private:
  OutputBuffer data_;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
};

using InputBuffers = std::map<std::string, InputBuffer, std::less<>>;

// The bytes of `buffers` as UploadedInputs.
UploadedInputs Spans(const InputBuffers& buffers);
// Their bytes together.
int64_t InputBytes(const InputBuffers& buffers);

// Reserves what parsing `bytes` as a `descriptor` message takes, bounded from
// its tags before anything is allocated, and the fixed per-request overhead.
// `received_bytes`: the request's length as it arrived, for the refusal
// (`bytes` may be a view's rest of it).
absl::Status ReserveParse(const grpc::ByteBuffer& bytes,
                          const google::protobuf::Descriptor& descriptor, int64_t received_bytes,
                          absl::string_view method, MemoryBudget::Reservation& reservation);

// Drops the slices of a request's bytes once it is parsed (gRPC keeps the
// ByteBuffer object, now empty, until the call ends) and gives their
// reservation back: the parsed copy is what the call holds from here. But
// for `still_held` of them: the data a RequestDataView keeps of those slices.
void ReleaseRequestBytes(const grpc::ByteBuffer* bytes, MemoryBudget::Reservation& reservation,
                         int64_t still_held = 0);

// Parses `bytes` (`received_bytes` long as they arrived) into `message`:
// INVALID_ARGUMENT "METHOD: the N bytes received are not a valid TYPE".
template <typename Message>
absl::Status DeserializeMessage(const grpc::ByteBuffer& bytes, int64_t received_bytes,
                                absl::string_view method, Message* message) {
  grpc::ByteBuffer copy(bytes);  // Deserialize consumes its buffer; this shares the slices
  if (!grpc::SerializationTraits<Message>::Deserialize(&copy, message).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": the ", received_bytes,
                                                   " bytes received are not a valid ",
                                                   Message::descriptor()->full_name()));
  }
  return absl::OkStatus();
}

// ReserveParse, then DeserializeMessage: a message of any method parsed from
// its raw bytes, within the budget.
template <typename Message>
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, absl::string_view method,
                          MemoryBudget::Reservation& reservation, Message* message) {
  const int64_t received_bytes = static_cast<int64_t>(bytes.Length());
  absl::Status reserved =
      ReserveParse(bytes, *Message::descriptor(), received_bytes, method, reservation);
  if (!reserved.ok()) return reserved;
  return DeserializeMessage(bytes, received_bytes, method, message);
}

// Makes a view of a large request with `make(max_rest_bytes)`, reserving
// first the most its copy of the fields besides the data may take, then
// keeping only what it took (nothing where `make` gives no view). The data
// stays where it was received, covered by the received bytes' reservation.
absl::StatusOr<std::optional<RequestDataView>> ReservedView(
    size_t max_rest_bytes, absl::string_view method, MemoryBudget::Reservation& reservation,
    const std::function<std::optional<RequestDataView>(size_t max_rest_bytes)>& make);

// Parses `bytes` like ParseRequest, but leaves each input's data bytes out of
// the message: with `received`, where they were received (the view, whose
// slices hold them, goes to `received`; not for a scatter, whose indices
// planning reads); else copied from the received slices into an InputBuffer of
// their own (from `pool` when large): one copy, and each received slice is
// let go once copied, so a large request is never held twice. The data bytes
// stay reserved, and are reserved once: the fields besides them are reserved
// as parsed, not the request's whole parse bound. Requests below 1 MiB, with
// more than 64 KiB of fields besides their data, or in a form protobuf's
// serializer does not write, are parsed as by ParseRequest (`inputs` left
// empty, no view).
// Either way the received bytes are released (and their reservation given
// back) once parsed, but for what the view holds.
absl::Status ParseRequestAndInputs(const grpc::ByteBuffer* bytes, absl::string_view method,
                                   MemoryBudget::Reservation& reservation, BufferPool* pool,
                                   v1::RunRequest* request, InputBuffers* inputs,
                                   std::optional<RequestDataView>* received = nullptr);

// A RunRequest parsed by ParseReceivedRun, with its large inputs' bytes held
// apart. Built in place and never moved: `uploaded` points into `inputs` and
// `received`.
struct ReceivedRun {
  v1::RunRequest request;
  InputBuffers inputs;                      // the large inputs' data, taken out of the request
  std::optional<RequestDataView> received;  // or left where they were received
  UploadedInputs uploaded;                  // their bytes, for PlanRun and the Execute calls
  int64_t data_bytes = 0;                   // reserved for them

  // Frees the input bytes and the request, giving the bytes' reservation back.
  void Free(MemoryBudget::Reservation& reservation);
};

// ParseRequestAndInputs into `run`, leaving the data where it was received
// (no copy; not for a scatter), each input then read as pieces of whole
// elements of its dtype.
absl::Status ParseReceivedRun(const grpc::ByteBuffer* bytes, absl::string_view method,
                              MemoryBudget::Reservation& reservation, BufferPool* pool,
                              ReceivedRun* run);

// ParseReceivedRun, when that is light work (for a reaction): a request of
// at least 1 MiB that the view reads, whose fields but its inputs' data take
// at most `max_rest_bytes`, and not a scatter (whose indices are copied out).
// False, having parsed and reserved nothing and read at most about
// `max_rest_bytes`, for any other request: ParseReceivedRun's on a worker.
absl::StatusOr<bool> ParseReceivedRunIfLight(const grpc::ByteBuffer* bytes,
                                             absl::string_view method,
                                             MemoryBudget::Reservation& reservation,
                                             size_t max_rest_bytes, ReceivedRun* run);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_PARSE_H_
