#include "server/pipeline/response_writer.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/support/slice.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/wire/convert.h"

namespace tensorop::server {
namespace {

using google::protobuf::io::CodedOutputStream;

// Wire tags (field number << 3 | 2, length-delimited) used here.
constexpr uint8_t kRunResponseOutputsTag = (2 << 3) | 2;
constexpr uint8_t kTensorDataTag = (4 << 3) | 2;
constexpr uint8_t kResultPartChunkTag = (2 << 3) | 2;

void AppendVarint(uint64_t value, std::string* out) {
  uint8_t bytes[10];
  const uint8_t* end = CodedOutputStream::WriteVarint64ToArray(value, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(end - bytes));
}

size_t VarintSize(uint64_t value) { return CodedOutputStream::VarintSize64(value); }

// A slice's user data: the output buffer it owns, or one reference to a
// shared output.
void DropBuffer(void* holder) { delete static_cast<OutputBuffer*>(holder); }
void DropReference(void* holder) { delete static_cast<SharedOutput*>(holder); }

// A slice of `length` bytes of `buffer` from `offset`, for gRPC, which frees
// it once sent, maybe after the call ended: the buffer's reservation leaves
// the call's ledger, and is given back when the last such slice is freed.
grpc::Slice SliceForGrpc(const SharedOutput& buffer, int64_t offset, int64_t length) {
  LeaveCall(buffer);
  return grpc::Slice(buffer.get() + offset, static_cast<size_t>(length), &DropReference,
                     new SharedOutput(buffer));
}
// The same for the first `length` bytes of a buffer of its own, which the
// slice owns.
grpc::Slice SliceForGrpc(OutputBuffer buffer, int64_t length) {
  LeaveCall(buffer);
  std::byte* data = buffer.get();
  return grpc::Slice(data, static_cast<size_t>(length), &DropBuffer,
                     new OutputBuffer(std::move(buffer)));
}

}  // namespace

void SerializeRunResponse(absl::string_view id, OutputBuffers& outputs, absl::string_view backend,
                          const v1::Status* status, grpc::ByteBuffer* out) {
  std::vector<grpc::Slice> slices;
  slices.reserve(2 * outputs.layouts.size() + 2);
  std::string pending;  // bytes of the next small slice
  {
    v1::RunResponse head;
    head.set_id(std::string(id));
    head.AppendToString(&pending);
  }
  v1::Tensor tensor;
  for (size_t i = 0; i < outputs.layouts.size(); ++i) {
    const Layout& layout = outputs.layouts[i];
    tensor.Clear();
    SetTensorLayout(layout, &tensor);
    const std::string fields = tensor.SerializeAsString();
    const uint64_t data_bytes = static_cast<uint64_t>(layout.buffer_bytes());
    uint64_t tensor_bytes = fields.size();
    if (data_bytes > 0) tensor_bytes += 1 + VarintSize(data_bytes) + data_bytes;
    pending.push_back(static_cast<char>(kRunResponseOutputsTag));
    AppendVarint(tensor_bytes, &pending);
    pending += fields;
    if (data_bytes == 0) continue;  // proto3 leaves an empty bytes field out
    pending.push_back(static_cast<char>(kTensorDataTag));
    AppendVarint(data_bytes, &pending);
    slices.emplace_back(pending.data(), pending.size());
    pending.clear();
    if (i < outputs.forwarded.size() && !outputs.forwarded[i].empty()) {
      for (grpc::Slice& slice : outputs.forwarded[i]) slices.push_back(std::move(slice));
      continue;
    }
    slices.push_back(SliceForGrpc(std::move(outputs.buffers[i]), static_cast<int64_t>(data_bytes)));
  }
  {
    v1::RunResponse tail;
    tail.set_backend(std::string(backend));
    if (status != nullptr) *tail.mutable_status() = *status;
    tail.AppendToString(&pending);
  }
  if (!pending.empty()) slices.emplace_back(pending.data(), pending.size());
  outputs.layouts.clear();
  outputs.buffers.clear();
  outputs.forwarded.clear();
  *out = grpc::ByteBuffer(slices.data(), slices.size());
}

void SerializeWithOutputContents(const google::protobuf::MessageLite& head, int field,
                                 std::span<const int> contents, OutputBuffers& outputs,
                                 grpc::ByteBuffer* out) {
  std::vector<grpc::Slice> slices;
  std::string pending = head.SerializeAsString();  // bytes of the next small slice
  std::vector<SharedOutput> shared(outputs.buffers.size());
  const uint64_t tag = (static_cast<uint64_t>(field) << 3) | 2;
  for (const int k : contents) {
    const size_t output = static_cast<size_t>(k);
    const uint64_t data_bytes = static_cast<uint64_t>(outputs.layouts[output].buffer_bytes());
    AppendVarint(tag, &pending);
    AppendVarint(data_bytes, &pending);
    if (data_bytes == 0) continue;
    slices.emplace_back(pending.data(), pending.size());
    pending.clear();
    if (output < outputs.forwarded.size() && !outputs.forwarded[output].empty()) {
      for (const grpc::Slice& slice : outputs.forwarded[output]) slices.push_back(slice);
      continue;
    }
    if (shared[output] == nullptr) shared[output] = Share(std::move(outputs.buffers[output]));
    slices.push_back(SliceForGrpc(shared[output], 0, static_cast<int64_t>(data_bytes)));
  }
  if (!pending.empty()) slices.emplace_back(pending.data(), pending.size());
  outputs.layouts.clear();
  outputs.buffers.clear();
  outputs.forwarded.clear();
  *out = grpc::ByteBuffer(slices.data(), slices.size());
}

namespace {

std::string ChunkPartHead(int64_t length) {
  std::string head;
  head.push_back(static_cast<char>(kResultPartChunkTag));
  AppendVarint(static_cast<uint64_t>(length), &head);
  return head;
}

}  // namespace

void SerializeChunkPart(const SharedOutput& buffer, int64_t offset, int64_t length,
                        grpc::ByteBuffer* out) {
  const std::string head = ChunkPartHead(length);
  grpc::Slice slices[2] = {grpc::Slice(head.data(), head.size()),
                           SliceForGrpc(buffer, offset, length)};
  *out = grpc::ByteBuffer(slices, length > 0 ? 2 : 1);
}

void SerializeChunkPart(std::span<const grpc::Slice> slices, int64_t offset, int64_t length,
                        grpc::ByteBuffer* out) {
  const std::string head = ChunkPartHead(length);
  std::vector<grpc::Slice> part = {grpc::Slice(head.data(), head.size())};
  const int64_t end = offset + length;
  int64_t at = 0;  // of the slice's first byte
  for (const grpc::Slice& slice : slices) {
    const int64_t size = static_cast<int64_t>(slice.size());
    if (at >= end) break;
    if (at + size > offset) {
      part.push_back(slice.sub(static_cast<size_t>(std::max(offset, at) - at),
                               static_cast<size_t>(std::min(end, at + size) - at)));
    }
    at += size;
  }
  *out = grpc::ByteBuffer(part.data(), part.size());
}

}  // namespace tensorop::server
