// RunChunked's input chunks read where they arrived: a RequestPart holding an
// InputChunk, in the form clients write it, is recognised from its tags and
// its data bytes are appended from gRPC's received slices (one copy, into the
// input's buffer) instead of being parsed into a message first.
#ifndef TENSOROP_SERVER_CHUNK_PART_H_
#define TENSOROP_SERVER_CHUNK_PART_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

namespace tensorop::server {

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
  // Copies the data bytes to `out` (data_bytes() of room).
  void CopyDataTo(std::byte* out) const;

 private:
  struct Piece {
    size_t slice;
    size_t offset;
    size_t length;
  };
  std::vector<grpc::Slice> slices_;
  std::vector<Piece> data_;
  std::string input_;
  int64_t data_bytes_ = 0;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_CHUNK_PART_H_
