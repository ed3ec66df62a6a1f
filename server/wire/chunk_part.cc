#include "server/wire/chunk_part.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/string_view.h"

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

  // A varint of at most 10 bytes; false when cut short, overlong, or padded
  // with high zero bytes: the views write tags and lengths again
  // canonically, and protobuf refuses some padded forms (a tag past 5 bytes)
  // that it would then accept. Such bytes are left to protobuf.
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte = 0;
      if (!ReadByte(&byte)) return false;
      if (shift == 63 && byte > 1) return false;  // past 64 bits: left to protobuf
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return shift == 0 || byte != 0;
    }
    return false;
  }

  // Appends the next `length` bytes to `out`.
  bool AppendTo(size_t length, std::string* out) {
    return Take(length, [&](size_t slice, size_t offset, size_t n) {
      out->append(reinterpret_cast<const char*>(slices_[slice].begin()) + offset, n);
    });
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

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// Reads one field's tag, and appends the field whole (tag included) to `out`
// unless it is length-delimited, when only its tag and length are read
// (`*length`) and the caller takes its bytes. False on a malformed field or a
// group (left to protobuf).
bool ReadField(Cursor& in, size_t end, uint64_t* tag, uint64_t* length, std::string* out) {
  if (!in.ReadVarint(tag)) return false;
  switch (*tag & 7) {
    case kVarint: {
      uint64_t value = 0;
      if (!in.ReadVarint(&value) || in.position() > end) return false;
      AppendVarint(*tag, out);
      AppendVarint(value, out);
      return true;
    }
    case kFixed64:
    case kFixed32: {
      const size_t bytes = (*tag & 7) == kFixed64 ? 8 : 4;
      if (in.position() + bytes > end) return false;
      AppendVarint(*tag, out);
      return in.AppendTo(bytes, out);
    }
    case kLengthDelimited:
      return in.ReadVarint(length) && in.position() <= end && *length <= end - in.position();
    default:
      return false;
  }
}

constexpr uint64_t kInputsTag = (6 << 3) | 2;      // RunRequest.inputs
constexpr uint64_t kEntryKeyTag = (1 << 3) | 2;    // map entry key
constexpr uint64_t kEntryValueTag = (2 << 3) | 2;  // map entry value
constexpr uint64_t kTensorDataTag = (4 << 3) | 2;  // Tensor.data
// Tensor.shared_memory and Tensor.handle: `data`'s oneof, where the last one
// sent wins.
constexpr uint64_t kTensorSharedMemoryTag = (5 << 3) | 2;
constexpr uint64_t kTensorHandleTag = (6 << 3) | 2;

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
    view.data_.push_back(SlicePiece{.slice = slice, .offset = offset, .length = n});
  });
  return view;
}

std::optional<RequestDataView> RequestDataView::Of(const grpc::ByteBuffer& bytes,
                                                   size_t max_rest_bytes) {
  RequestDataView view;
  if (!view.Hold(bytes)) return std::nullopt;
  const size_t total = bytes.Length();
  Cursor in(view.slices_);
  // The bytes read so far but the data, plus `more`: what rest() would hold.
  size_t data_read = 0;
  const auto too_much_rest = [&](size_t more) {
    return in.position() - data_read + more > max_rest_bytes;
  };
  while (in.position() < total) {
    if (too_much_rest(0)) return std::nullopt;
    uint64_t tag = 0, length = 0;
    if (!ReadField(in, total, &tag, &length, &view.rest_)) return std::nullopt;
    if ((tag & 7) != kLengthDelimited) continue;
    if (tag != kInputsTag) {
      AppendVarint(tag, &view.rest_);
      AppendVarint(length, &view.rest_);
      if (too_much_rest(length) || !in.AppendTo(length, &view.rest_)) return std::nullopt;
      continue;
    }
    // inputs: {key, value: Tensor}, the Tensor's data left in the slices.
    const size_t entry_end = in.position() + length;
    uint64_t key_tag = 0, key_length = 0, value_tag = 0, value_length = 0;
    std::string key;
    if (in.position() == entry_end || !ReadField(in, entry_end, &key_tag, &key_length, &key) ||
        key_tag != kEntryKeyTag || too_much_rest(key_length) || !in.AppendTo(key_length, &key)) {
      return std::nullopt;
    }
    std::string tensor;  // the value's fields but data
    std::vector<SlicePiece> pieces;
    int64_t data_bytes = 0;
    if (in.position() < entry_end) {
      if (!ReadField(in, entry_end, &value_tag, &value_length, &tensor) ||
          value_tag != kEntryValueTag || in.position() + value_length != entry_end) {
        return std::nullopt;
      }
      bool have_data = false;
      bool have_other_location = false;
      while (in.position() < entry_end) {
        if (too_much_rest(0)) return std::nullopt;
        uint64_t field = 0, field_length = 0;
        if (!ReadField(in, entry_end, &field, &field_length, &tensor)) return std::nullopt;
        if ((field & 7) != kLengthDelimited) continue;
        if (field == kTensorSharedMemoryTag || field == kTensorHandleTag) {
          have_other_location = true;
        }
        if (field == kTensorDataTag && have_data) return std::nullopt;
        // An empty data field stays for protobuf: in a oneof, even an empty
        // value says which member is set.
        if (field != kTensorDataTag || field_length == 0) {
          AppendVarint(field, &tensor);
          AppendVarint(field_length, &tensor);
          if (too_much_rest(field_length) || !in.AppendTo(field_length, &tensor)) {
            return std::nullopt;
          }
          continue;
        }
        have_data = true;
        data_bytes = static_cast<int64_t>(field_length);
        data_read += field_length;
        if (!in.Take(field_length, [&](size_t slice, size_t offset, size_t n) {
              pieces.push_back(SlicePiece{.slice = slice, .offset = offset, .length = n});
            })) {
          return std::nullopt;
        }
      }
      // Data beside another member of its oneof is protobuf's to resolve.
      if (have_data && have_other_location) return std::nullopt;
    }
    if (in.position() != entry_end) return std::nullopt;
    std::string entry;
    AppendVarint(kEntryKeyTag, &entry);
    AppendVarint(key.size(), &entry);
    entry += key;
    AppendVarint(kEntryValueTag, &entry);
    AppendVarint(tensor.size(), &entry);
    entry += tensor;
    AppendVarint(kInputsTag, &view.rest_);
    AppendVarint(entry.size(), &view.rest_);
    view.rest_ += entry;
    for (const SlicePiece& piece : pieces) ++view.slice_uses_[piece.slice];
    view.inputs_.push_back(InputData{.input = std::move(key), .bytes = data_bytes});
    view.pieces_.push_back(std::move(pieces));
  }
  // An input named twice is protobuf's to merge (the last entry wins).
  std::vector<absl::string_view> names;
  names.reserve(view.inputs_.size());
  for (const InputData& input : view.inputs_) names.push_back(input.input);
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) return std::nullopt;
  view.LetGoOfUnusedSlices();
  return view;
}

std::optional<RequestDataView> RequestDataView::OfRepeatedBytes(const grpc::ByteBuffer& bytes,
                                                                int field, size_t min_bytes,
                                                                size_t max_rest_bytes) {
  RequestDataView view;
  if (!view.Hold(bytes)) return std::nullopt;
  const size_t total = bytes.Length();
  Cursor in(view.slices_);
  const uint64_t entry_tag = (static_cast<uint64_t>(field) << 3) | kLengthDelimited;
  bool held = false;
  while (in.position() < total) {
    if (view.rest_.size() > max_rest_bytes) return std::nullopt;
    uint64_t tag = 0, length = 0;
    if (!ReadField(in, total, &tag, &length, &view.rest_)) return std::nullopt;
    if ((tag & 7) != kLengthDelimited) continue;
    // Many entries (each a few bytes on the wire, more in the view) are
    // protobuf's to parse, as before; a request names a few inputs.
    if (tag == entry_tag && view.inputs_.size() == kMaxRepeatedEntries) return std::nullopt;
    AppendVarint(tag, &view.rest_);
    if (tag != entry_tag || length < min_bytes) {
      if (view.rest_.size() + length > max_rest_bytes) return std::nullopt;
      AppendVarint(length, &view.rest_);
      if (!in.AppendTo(length, &view.rest_)) return std::nullopt;
      if (tag == entry_tag) {
        view.inputs_.emplace_back();
        view.pieces_.emplace_back();
      }
      continue;
    }
    AppendVarint(0, &view.rest_);  // an empty entry in its place
    std::vector<SlicePiece> pieces;
    if (!in.Take(length, [&](size_t slice, size_t offset, size_t n) {
          pieces.push_back(SlicePiece{.slice = slice, .offset = offset, .length = n});
          ++view.slice_uses_[slice];
        })) {
      return std::nullopt;
    }
    view.inputs_.push_back(InputData{.input = "", .bytes = static_cast<int64_t>(length)});
    view.pieces_.push_back(std::move(pieces));
    held = true;
  }
  if (!held) return std::nullopt;
  view.LetGoOfUnusedSlices();
  return view;
}

int64_t RequestDataView::DataBytes() const {
  int64_t bytes = 0;
  for (const InputData& input : inputs_) bytes += input.bytes;
  return bytes;
}

bool RequestDataView::Hold(const grpc::ByteBuffer& bytes) {
  if (!bytes.Valid() || !bytes.Dump(&slices_).ok()) return false;
  slice_uses_.assign(slices_.size(), 0);
  rest_.reserve(4096);
  return true;
}

void RequestDataView::LetGoOfUnusedSlices() {
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (slice_uses_[i] == 0) slices_[i] = grpc::Slice();
  }
}

std::vector<grpc::Slice> RequestDataView::DataSlices(size_t index, ByteRange range,
                                                     int64_t* held) const {
  std::vector<grpc::Slice> slices;
  int64_t at = 0;  // of the piece's first byte, in the input's data
  for (const SlicePiece& piece : pieces_[index]) {
    const int64_t begin = std::max(range.begin, at);
    const int64_t end = std::min(range.end, at + static_cast<int64_t>(piece.length));
    if (begin < end) {
      const grpc::Slice& slice = slices_[piece.slice];
      slices.push_back(slice.sub(piece.offset + static_cast<size_t>(begin - at),
                                 piece.offset + static_cast<size_t>(end - at)));
      *held += static_cast<int64_t>(slice.size());
    }
    at += static_cast<int64_t>(piece.length);
  }
  return slices;
}

void RequestDataView::MoveDataTo(size_t index, std::byte* out) {
  for (const SlicePiece& piece : pieces_[index]) {
    std::memcpy(out, slices_[piece.slice].begin() + piece.offset, piece.length);
    out += piece.length;
    if (--slice_uses_[piece.slice] == 0) slices_[piece.slice] = grpc::Slice();
  }
}

std::vector<std::span<const std::byte>> RequestDataView::ElementPieces(size_t index,
                                                                       int64_t element_size) {
  const std::vector<SlicePiece>& pieces = pieces_[index];
  const auto bytes_of = [&](size_t i) {
    return reinterpret_cast<const std::byte*>(slices_[pieces[i].slice].begin()) + pieces[i].offset;
  };
  const int64_t es = std::clamp<int64_t>(element_size, 1, 8);
  std::vector<std::span<const std::byte>> out;
  out.reserve(2 * pieces.size());
  int64_t done = 0;   // bytes given out: whole elements
  int64_t start = 0;  // piece i's first byte in the input
  for (size_t i = 0; i < pieces.size(); start += static_cast<int64_t>(pieces[i].length), ++i) {
    const int64_t end = start + static_cast<int64_t>(pieces[i].length);
    if (end <= done) continue;  // all in a copied element already
    const int64_t whole_end = end / es * es;
    if (whole_end > done) {
      out.emplace_back(bytes_of(i) + (done - start), static_cast<size_t>(whole_end - done));
      done = whole_end;
    }
    if (done == end) continue;
    // Element [done, done + es) goes on into the next pieces: copied whole
    // (a last one cut short, too, so the size stays what was sent).
    const int64_t seam_end = std::min(done + es, inputs_[index].bytes);
    std::array<std::byte, 8>& seam = seams_.emplace_back();
    int64_t at = done;
    for (size_t j = i; at < seam_end; ++j) {
      const int64_t piece_start = j == i ? start : at;
      const int64_t n = std::min<int64_t>(
          seam_end - at, static_cast<int64_t>(pieces[j].length) - (at - piece_start));
      std::memcpy(seam.data() + (at - done), bytes_of(j) + (at - piece_start),
                  static_cast<size_t>(n));
      at += n;
    }
    out.emplace_back(seam.data(), static_cast<size_t>(seam_end - done));
    done = seam_end;
  }
  return out;
}

void ChunkPartView::CopyDataTo(int64_t from, int64_t length, std::byte* out) const {
  size_t skip = static_cast<size_t>(from);
  size_t left = static_cast<size_t>(length);
  for (const SlicePiece& piece : data_) {
    if (left == 0) break;
    if (skip >= piece.length) {
      skip -= piece.length;
      continue;
    }
    const size_t n = std::min(piece.length - skip, left);
    std::memcpy(out, slices_[piece.slice].begin() + piece.offset + skip, n);
    out += n;
    left -= n;
    skip = 0;
  }
}

}  // namespace tensorop::server
