// Tensor bytes read where they arrived: a RunChunked RequestPart holding an
// InputChunk, or a RunRequest's inputs, in the form clients write them, are
// recognised from their tags and their data bytes copied from gRPC's received
// slices (one copy, into the input's buffer) instead of being parsed into a
// message first.
#ifndef TENSOROP_SERVER_WIRE_CHUNK_PART_H_
#define TENSOROP_SERVER_WIRE_CHUNK_PART_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "core/plan/byte_range.h"

namespace tensorop::server {

// Where some bytes lie in a list of received slices.
struct SlicePiece {
  size_t slice;
  size_t offset;
  size_t length;
};

// A chunk part's input name and where its data bytes lie in the received
// slices (which it holds).
class ChunkPartView {
 public:
  // The view of `bytes` when they are exactly
  //   RequestPart{chunk: InputChunk{input: NAME, data: DATA}}
  // with each field at most once, in field order (what protobuf's serializer
  // writes); nullopt for anything else, which the caller parses with
  // protobuf (so every other form, valid or not, is treated as before).
  static std::optional<ChunkPartView> Of(const grpc::ByteBuffer& bytes);

  const std::string& input() const { return input_; }
  int64_t data_bytes() const { return data_bytes_; }
  // Copies `length` data bytes from data byte `from` on to `out`.
  void CopyDataTo(int64_t from, int64_t length, std::byte* out) const;

 private:
  std::vector<grpc::Slice> slices_;
  std::vector<SlicePiece> data_;
  std::string input_;
  int64_t data_bytes_ = 0;
};

// A RunRequest with its inputs' data bytes left where they arrived.
class RequestDataView {
 public:
  // The view of `bytes` when each `inputs` entry is in the form protobuf's
  // serializer writes (key, then value, each once; the value Tensor's fields
  // with `data` at most once and not beside `shared_memory` or `handle`, its
  // oneof) and no input is named twice; nullopt for
  // anything else, which the caller parses with protobuf as before. Also
  // nullopt, having copied at most about `max_rest_bytes`, when rest() would
  // take more: a bound on the work for a caller that must stay light.
  static std::optional<RequestDataView> Of(const grpc::ByteBuffer& bytes,
                                           size_t max_rest_bytes = SIZE_MAX);

  // The view of `bytes`, any message, with the entries of its repeated bytes
  // field number `field` of at least `min_bytes` left where they arrived
  // (each an empty entry in rest(), so entries keep their places): inputs()
  // has one unnamed input per entry of the field, 0 bytes for those left in
  // rest(). nullopt when no entry is that large, the field has more than
  // kMaxRepeatedEntries entries, the bytes are not in a form protobuf's
  // serializer writes, or rest() would take more than `max_rest_bytes`.
  static constexpr size_t kMaxRepeatedEntries = 256;
  static std::optional<RequestDataView> OfRepeatedBytes(const grpc::ByteBuffer& bytes, int field,
                                                        size_t min_bytes,
                                                        size_t max_rest_bytes = SIZE_MAX);

  // The request without its inputs' data fields: parse it with protobuf.
  const std::string& rest() const { return rest_; }
  // Names input `index` (the native input its bytes are).
  void Name(size_t index, std::string name) { inputs_[index].input = std::move(name); }

  struct InputData {
    std::string input;
    int64_t bytes = 0;
  };
  // Each input, in request order, with its data bytes (0: none).
  const std::vector<InputData>& inputs() const { return inputs_; }
  // The data bytes of all inputs together.
  int64_t DataBytes() const;
  // Copies input `index`'s data bytes to `out` (inputs()[index].bytes of
  // room), letting go of each received slice once nothing else needs it, so
  // the request is not held twice while it is copied.
  void MoveDataTo(size_t index, std::byte* out);
  // Input `index`'s data bytes, in order, as pieces of whole elements of
  // `element_size` bytes: views into the received slices, and, for an element
  // split between two of them, a copy of that element (held by the view).
  // The bytes stay valid while the view lives.
  std::vector<std::span<const std::byte>> ElementPieces(size_t index, int64_t element_size);
  // Input `index`'s data bytes `range` as slices sharing the received memory
  // (no copy); `*held` grows by the bytes of the received slices they keep.
  std::vector<grpc::Slice> DataSlices(size_t index, ByteRange range, int64_t* held) const;

 private:
  // Takes `bytes`' slices to read; false when they cannot be read.
  bool Hold(const grpc::ByteBuffer& bytes);
  // Drops the received slices no data piece needs.
  void LetGoOfUnusedSlices();

  std::vector<grpc::Slice> slices_;
  std::deque<std::array<std::byte, 8>> seams_;   // the elements split between slices
  std::vector<int> slice_uses_;                  // pieces not yet copied, per slice
  std::vector<std::vector<SlicePiece>> pieces_;  // per input
  std::vector<InputData> inputs_;
  std::string rest_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_WIRE_CHUNK_PART_H_
