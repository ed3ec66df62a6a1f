#include "server/chunk_part.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tensorop::server {
namespace {

// Reads bytes across a list of slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip0(); }

  size_t position() const { return position_; }

  bool ReadByte(uint8_t* byte) {
    if (slice_ == slices_.size()) return false;
    *byte = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }

  // A varint of at most 10 bytes; false when cut short or overlong.
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      if (shift == 63 && byte > 1) return false;  // past 64 bits: left to protobuf
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Calls emit(slice, offset, length) for the next `length` bytes.
  template <typename Emit>
  bool Take(size_t length, Emit emit) {
    while (length > 0) {
      if (slice_ == slices_.size()) return false;
      const size_t here = std::min(length, slices_[slice_].size() - offset_);
      emit(slice_, offset_, here);
      Advance(here);
      length -= here;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    Skip0();
  }
  // Moves past exhausted (and empty) slices.
  void Skip0() {
    while (slice_ < slices_.size() && offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t position_ = 0;
};

constexpr uint8_t kChunkTag = (2 << 3) | 2;  // RequestPart.chunk
constexpr uint8_t kInputTag = (1 << 3) | 2;  // InputChunk.input
constexpr uint8_t kDataTag = (2 << 3) | 2;   // InputChunk.data

}  // namespace

std::optional<ChunkPartView> ChunkPartView::Of(const grpc::ByteBuffer& bytes) {
  ChunkPartView view;
  if (!bytes.Valid() || !bytes.Dump(&view.slices_).ok()) return std::nullopt;
  const size_t total = bytes.Length();
  Cursor in(view.slices_);
  uint8_t tag = 0;
  uint64_t length = 0;
  if (!in.ReadByte(&tag) || tag != kChunkTag || !in.ReadVarint(&length)) return std::nullopt;
  if (length != total - in.position()) return std::nullopt;
  if (total == in.position()) return view;  // an empty chunk: no input, no data
  if (!in.ReadByte(&tag)) return std::nullopt;
  if (tag == kInputTag) {
    uint64_t name_bytes = 0;
    if (!in.ReadVarint(&name_bytes) || name_bytes > total - in.position()) return std::nullopt;
    view.input_.reserve(name_bytes);
    in.Take(name_bytes, [&](size_t slice, size_t offset, size_t n) {
      view.input_.append(reinterpret_cast<const char*>(view.slices_[slice].begin()) + offset, n);
    });
    if (in.position() == total) return view;
    if (!in.ReadByte(&tag)) return std::nullopt;
  }
  if (tag != kDataTag) return std::nullopt;
  uint64_t data_bytes = 0;
  if (!in.ReadVarint(&data_bytes) || data_bytes != total - in.position()) return std::nullopt;
  view.data_bytes_ = static_cast<int64_t>(data_bytes);
  in.Take(data_bytes, [&](size_t slice, size_t offset, size_t n) {
    view.data_.push_back(Piece{.slice = slice, .offset = offset, .length = n});
  });
  return view;
}

void ChunkPartView::CopyDataTo(std::byte* out) const {
  for (const Piece& piece : data_) {
    std::memcpy(out, slices_[piece.slice].begin() + piece.offset, piece.length);
    out += piece.length;
  }
}

}  // namespace tensorop::server
