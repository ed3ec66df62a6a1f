// Answers serialized without copying their tensor bytes: the output buffers the
// kernels wrote go to gRPC as slices that gRPC frees (grpc::Slice with a
// destroy callback), between small slices holding the messages' other fields.
// The bytes on the wire are exactly what protobuf's serializer writes for the
// same message (fields in number order, empty bytes fields left out).
#ifndef TENSOROP_SERVER_PIPELINE_RESPONSE_WRITER_H_
#define TENSOROP_SERVER_PIPELINE_RESPONSE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "server/memory/output_buffer.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// Outputs written into their own buffers, not yet answered.
struct OutputBuffers {
  std::vector<Layout> layouts;
  std::vector<OutputBuffer> buffers;  // one per layout
  // Outputs that are bytes of a received input (OutputAsInputBytes): those
  // bytes, where gRPC received them, one list per layout (empty: the output
  // is its buffer); or none at all.
  std::vector<std::vector<grpc::Slice>> forwarded;
};

// Serializes RunResponse{id, outputs, backend, status} into `out`, handing
// every output buffer (or forwarded slice) to gRPC (buffers are freed when
// gRPC drops the slices); `status` is left out when null. `outputs` is
// emptied.
void SerializeRunResponse(absl::string_view id, OutputBuffers& outputs, absl::string_view backend,
                          const v1::Status* status, grpc::ByteBuffer* out);

// Serializes `head` followed by entries of its repeated bytes field number
// `field`, which `head` leaves empty and which comes after every other field
// of its message (so this is the bytes protobuf's serializer writes for the
// whole message): entry j holds output contents[j]'s bytes, its buffer (or
// forwarded slices) handed to gRPC without a copy, shared by entries naming
// the same output. Outputs no entry names are freed; `outputs` is emptied.
void SerializeWithOutputContents(const google::protobuf::MessageLite& head, int field,
                                 std::span<const int> contents, OutputBuffers& outputs,
                                 grpc::ByteBuffer* out);

// Serializes ResultPart{chunk: bytes [offset, offset + length) of `buffer`}
// into `out` without copying them: the slice holds a reference to `buffer`.
void SerializeChunkPart(const SharedOutput& buffer, int64_t offset, int64_t length,
                        grpc::ByteBuffer* out);
// The same of bytes [offset, offset + length) of `slices` end to end: the
// part holds sub-slices of them (references, no copy).
void SerializeChunkPart(std::span<const grpc::Slice> slices, int64_t offset, int64_t length,
                        grpc::ByteBuffer* out);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_RESPONSE_WRITER_H_
