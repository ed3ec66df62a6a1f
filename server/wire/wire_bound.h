// Sizes of messages without building them, so the memory budget is asked
// before protobuf allocates: a bound on what parsing a received message takes
// (a packed field of N one-byte entries becomes N int64s, eight times its wire
// size; each of N two-byte unknown fields a 16-byte UnknownField), and the
// exact serialized size of a RunResponse from its outputs' layouts (the
// message limit is checked before any work).
#ifndef TENSOROP_SERVER_WIRE_BOUND_H_
#define TENSOROP_SERVER_WIRE_BOUND_H_

#include <cstdint>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace tensorop::server {

// An upper bound on the heap bytes parsing `bytes` as a `type` message takes
// at its peak, found by reading its tags and lengths only (bytes fields and
// packed fields are skipped, not read): every field costs at least what
// protobuf allocates for it, measured (wire_bound.cc), unknown fields and
// known ones of another wire type included. INVALID_ARGUMENT naming the type
// when the bytes are not a well-formed message of it (or nest more than 16
// deep).
absl::StatusOr<int64_t> ParsedBytesBound(const grpc::ByteBuffer& bytes,
                                         const google::protobuf::Descriptor& type);

// OK when a received message of `bytes` is within the server's message limit,
// `max_message_bytes`; otherwise RESOURCE_EXHAUSTED naming `what` (the method,
// or the message of a stream) and --max_message_bytes. gRPC's own refusal
// names no flag, so its receive limit is a backstop at twice this one
// (SetMessageLimits, server/process/server.cc): every read of a message is
// checked here before anything is done with it.
absl::Status CheckReceivedBytes(int64_t bytes, int64_t max_message_bytes, absl::string_view what);
inline absl::Status CheckReceivedBytes(const grpc::ByteBuffer& message, int64_t max_message_bytes,
                                       absl::string_view what) {
  return CheckReceivedBytes(static_cast<int64_t>(message.Length()), max_message_bytes, what);
}

// The serialized size of a RunResponse with `id`, `backend`, the given status
// message (when `with_status`) and one output per layout, each with its
// layout's buffer_bytes() of data.
int64_t RunResponseBytes(absl::string_view id, absl::string_view backend, bool with_status,
                         absl::string_view status_message, const std::vector<Layout>& outputs);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_BOUND_H_
