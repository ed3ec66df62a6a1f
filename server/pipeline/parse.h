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

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/input_buffer.h"
#include "server/memory/memory_budget.h"
#include "server/memory/output_buffer.h"
#include "server/memory/received_bytes.h"
#include "server/memory/request_cost.h"
#include "server/pipeline/input_source.h"
#include "server/wire/chunk_part.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// Reserves the overhead of planning `outputs` outputs (at least one) of the
// `kind` ("request", "chain") of `id`, for `method`.
absl::Status ReservePlanning(int outputs, absl::string_view method, absl::string_view kind,
                             absl::string_view id, MemoryBudget::Reservation& reservation);

// Parses `bytes` as a RunRequest into `request` for `method`, reserving what
// parsing takes (bounded from the tags, before anything is allocated) and the
// per-output overhead of planning it in `reservation`.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                          MemoryBudget::Reservation& reservation, v1::RunRequest* request);

// Parses `bytes` as a RunChainRequest like ParseRequest: reserving what
// parsing takes, then the per-output overhead of planning every step.
absl::Status ParseChainRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                               MemoryBudget::Reservation& reservation, v1::RunChainRequest* chain);

using InputBuffers = std::map<std::string, InputBuffer, std::less<>>;

// The bytes of `buffers` as UploadedInputs (kUploaded).
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

// Parses `received` like ParseRequest, but leaves each input's data bytes out
// of the message: copied from the received slices into an InputBuffer of
// their own (from `pool` when large), reserved in a sibling of `reservation`
// that the buffer holds: one copy, and each received slice is let go once
// copied, so a large request is never held twice. The fields besides the data
// are reserved as parsed, not the request's whole parse bound. Requests below
// 1 MiB, with more than 64 KiB of fields besides their data, or in a form
// protobuf's serializer does not write, are parsed as by ParseRequest
// (`inputs` left empty). Either way the received bytes are released (and
// their reservation given back) once parsed.
absl::Status ParseRequestAndInputs(ReceivedBytes& received, absl::string_view method,
                                   MemoryBudget::Reservation& reservation, BufferPool* pool,
                                   v1::RunRequest* request, InputBuffers* inputs);

// A request's data left where gRPC received it: a view of the received
// slices, and the reservation covering the bytes the view holds. An answer
// that forwards those bytes takes the cover over (GrowTakingOver).
struct ReceivedData {
  std::optional<RequestDataView> view;
  MemoryBudget::Reservation cover;

  // Lets the slices go, and with them their reservation.
  void Release() {
    cover.Release();
    view.reset();
  }
};

// A RunRequest parsed by ParseReceivedRun, with its large inputs' bytes held
// apart. Built in place and never moved: `uploaded` points into `inputs` and
// `received`.
struct ReceivedRun {
  v1::RunRequest request;
  InputBuffers inputs;      // the large inputs' data, taken out of the request,
  ReceivedData received;    // or left where they were received
  UploadedInputs uploaded;  // their bytes, for PlanRun and the Execute calls
  int64_t data_bytes = 0;   // their count

  // Frees the input bytes and the request, and with them their reservations.
  void Free();
};

// ParseRequestAndInputs into `run`, but leaving the data where it was
// received (no copy; not for a scatter, whose indices planning reads), each
// input then read as pieces of whole elements of its dtype: the view, whose
// slices hold them, goes to `run->received` with the part of `received`'s
// reservation covering them.
absl::Status ParseReceivedRun(ReceivedBytes& received, absl::string_view method,
                              MemoryBudget::Reservation& reservation, BufferPool* pool,
                              ReceivedRun* run);

// ParseReceivedRun, when that is light work (for a reaction): a request of
// at least 1 MiB that the view reads, whose fields but its inputs' data take
// at most `max_rest_bytes`, and not a scatter (whose indices are copied out).
// False, having parsed and reserved nothing and read at most about
// `max_rest_bytes`, for any other request: ParseReceivedRun's on a worker.
absl::StatusOr<bool> ParseReceivedRunIfLight(ReceivedBytes& received, absl::string_view method,
                                             MemoryBudget::Reservation& reservation,
                                             size_t max_rest_bytes, ReceivedRun* run);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_PARSE_H_
