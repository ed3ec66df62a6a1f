// Answers serialized without copying their tensor bytes: the output buffers the
// kernels wrote go to gRPC as slices that gRPC frees (grpc::Slice with a
// destroy callback), between small slices holding the messages' other fields.
// The bytes on the wire are exactly what protobuf's serializer writes for the
// same message (fields in number order, empty bytes fields left out).
#ifndef TENSOROP_SERVER_RESPONSE_WRITER_H_
#define TENSOROP_SERVER_RESPONSE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

class BufferPool;

// Frees an output buffer: back to the pool it came from (`pool`, with its
// `capacity`), else with free().
struct BufferDeleter {
  BufferPool* pool = nullptr;
  size_t capacity = 0;
  void operator()(std::byte* bytes) const;
};
using OutputBuffer = std::unique_ptr<std::byte[], BufferDeleter>;

// A buffer for `layout`'s buffer_bytes() (at least one byte). Only a layout
// with padding (bytes no element covers) is zeroed; every other byte is
// written by the kernel, which covers each element of an output exactly once,
// so a large one may come from `pool` (null: none) holding a previous call's
// bytes. RESOURCE_EXHAUSTED when there is no memory for it.
absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool);

// Asks the kernel to back the 2 MiB-aligned pages inside [data, data + bytes)
// with transparent huge pages: a large buffer written once then takes one
// page fault per 2 MiB instead of per 4 KiB (those faults, the zeroing of the
// pages and their unmapping were most of tensord's CPU on bulk calls). A hint:
// nothing happens where THP is off.
void AdviseHugePages(void* data, size_t bytes);

// Whether `layout`'s elements cover every byte of its buffer.
bool CoversBuffer(const Layout& layout);

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

// A buffer shared by the slices of a streamed output: freed when the last
// slice (and the holder) let go.
using SharedOutput = std::shared_ptr<std::byte>;
SharedOutput Share(OutputBuffer buffer);

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

#endif  // TENSOROP_SERVER_RESPONSE_WRITER_H_
