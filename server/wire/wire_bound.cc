#include "server/wire/wire_bound.h"

#include <array>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/wire/convert.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// What parsing allocates per field, for protobuf 3.21 and glibc's malloc,
// parsing on the heap as tensord does (gRPC's SerializationTraits into a
// message without an arena; with one, old blocks of repeated fields would
// stay in the arena: not counted here). Measured by parsing N fields of each
// kind, N = 2^12 + 1 and 2^20 + 1 (just past a doubling, the worst case of
// growth), with a counting operator new that takes each block as its malloc
// chunk (malloc_usable_size + 8) and notes the peak during the parse; per
// field at the peak: an unknown varint or fixed 48 bytes, an unknown
// length-delimited one 96 empty, 144 of 16 bytes, 208 of 100, an empty
// unknown group 80; an unpacked int64 24, a 20-byte string of a repeated field
// 120, an empty repeated message 120, a map entry (a short key, an empty
// Tensor) 144. tests/server/wire/wire_bound_test.cc measures them again, every
// field of every message of ours and unknown fields of every wire type,
// against this bound.

// A message object: the largest of ours (inference.ModelInferRequest) is 240
// bytes, a 256-byte chunk; the test parses every one that is a field of
// another. A map entry's node (its key, its value inline, a link) fits in it
// too.
constexpr int64_t kMessageBytes = 256;
// An array that doubles as it grows (a repeated field's, the unknown fields')
// holds fewer than twice its entries, and while it grows the old array lives
// until copied into the new: three entries' bytes per entry at most.
constexpr int64_t kGrowthFactor = 3;
// An array's first block and the chunk headers of the two blocks alive while
// it grows: 8 bytes of header and room for 4 entries (RepeatedField and
// RepeatedPtrField start there), in at most 48-byte chunks; measured at most
// 56 bytes beyond the growth factor's.
constexpr int64_t kArrayBytes = 96;
// An entry of a repeated string or message field: its pointer in the array.
constexpr int64_t kPointerBytes = 8;
// A string field's value: the std::string protobuf allocates for it (32 bytes,
// a 48-byte chunk) and its buffer beyond its bytes: none up to 15 bytes, else
// at most 32 (libstdc++ allocates at least 31 bytes; malloc's chunk adds 8 and
// rounds up to 16).
constexpr int64_t kStringBytes = 80;
// Protobuf reserves a string up to this length at once; a longer one grows as
// its slices arrive, by doubling: up to 3 times its length at once (measured:
// 3.0 at 50 000 001 bytes read from 8 KiB slices).
constexpr int64_t kSafeStringBytes = 50'000'000;  // its EpsCopyInputStream::kSafeStringSize
// A block malloc maps on its own (from about 128 KiB, glibc's lowest
// threshold): its 16-byte header, rounded up to a 4 KiB page.
constexpr int64_t kMappedFromBytes = (128 << 10) - kArrayBytes;
constexpr int64_t kMappedSlackBytes = 4096 + 16;
// An unknown field: a 16-byte UnknownField in the message's UnknownFieldSet,
// a std::vector that doubles.
constexpr int64_t kUnknownFieldBytes = sizeof(google::protobuf::UnknownField);
// The UnknownFieldSet a message allocates for its first unknown field (an
// arena pointer and the vector: a 48-byte chunk), or an unknown group for its
// fields (the vector: 32).
constexpr int64_t kUnknownFieldSetBytes = 64;
// Our messages nest four deep; protobuf itself allows 100.
constexpr int kMaxDepth = 16;

// Whether malloc may map a block of `bytes` on its own.
bool Mapped(int64_t bytes) { return bytes >= kMappedFromBytes; }

// The bytes of a string field's value `length` bytes long.
int64_t StringBytes(int64_t length) {
  if (length > kSafeStringBytes)
    return kStringBytes + kGrowthFactor * length + 2 * kMappedSlackBytes;
  return kStringBytes + length + (Mapped(length) ? kMappedSlackBytes : 0);
}

// The bytes an entry of `field`, a repeated scalar, takes in its array.
int64_t ScalarBytes(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return 1;
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return 8;
    default:  // int32, uint32, float, enum
      return 4;
  }
}

// Whether protobuf parses `field` from a field of `wire_type`; else it keeps
// that field as an unknown one.
bool Parses(const FieldDescriptor& field, WireFormatLite::WireType wire_type) {
  const WireFormatLite::WireType expected =
      WireFormatLite::WireTypeForFieldType(static_cast<WireFormatLite::FieldType>(field.type()));
  return wire_type == expected ||
         (field.is_packable() && wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

// Whether protobuf keeps a value of `field` it does not know as an unknown
// field: a closed (proto2) enum's. Ours are all proto3: open.
bool ClosedEnum(const FieldDescriptor& field) {
  return field.enum_type() != nullptr && field.file()->syntax() == FileDescriptor::SYNTAX_PROTO2;
}

// The arrays one message grows as it is parsed (its repeated fields' and its
// unknown fields'), by field: what each entry adds, the array's first block
// when it starts, and the slack of the two blocks malloc maps once it is
// large.
class Arrays {
 public:
  // The bytes `entries` more entries of `entry_bytes` add to the array of
  // `key`.
  int64_t Add(const void* key, int64_t entry_bytes, int64_t entries) {
    int64_t* held = Find(key);
    int64_t bytes = kGrowthFactor * entry_bytes * entries;
    if (held == nullptr) {
      bytes += kArrayBytes;
      held = Start(key);
    }
    const int64_t before = *held;
    *held += entry_bytes * entries;
    // Its block holds up to twice its entries.
    if (Mapped(2 * before) != Mapped(2 * *held)) bytes += 2 * kMappedSlackBytes;
    return bytes;
  }

 private:
  struct Array {
    const void* key = nullptr;
    int64_t bytes = 0;
  };

  int64_t* Find(const void* key) {
    if (last_ != nullptr && last_->key == key) return &last_->bytes;
    for (int i = 0; i < size_; ++i) {
      if (arrays_[i].key == key) {
        last_ = &arrays_[i];
        return &last_->bytes;
      }
    }
    return nullptr;
  }
  // A new array; past the room here, one counted as new each time (more).
  int64_t* Start(const void* key) {
    if (size_ == static_cast<int>(arrays_.size())) return &spare_;
    arrays_[size_] = {key, 0};
    last_ = &arrays_[size_++];
    return &last_->bytes;
  }

  std::array<Array, 8> arrays_;
  int size_ = 0;
  Array* last_ = nullptr;
  int64_t spare_ = 0;
};

// The key of a message's unknown fields in its Arrays.
const char kUnknownFields = 0;

bool Scan(CodedInputStream& in, const Descriptor* type, uint32_t end_tag, int depth,
          int64_t& total);

// Skips the rest of an unknown field whose `tag` was read, counting what its
// value takes beyond its UnknownField.
bool SkipUnknown(CodedInputStream& in, uint32_t tag, int depth, int64_t& total) {
  switch (WireFormatLite::GetTagWireType(tag)) {
    case WireFormatLite::WIRETYPE_VARINT: {
      uint64_t value = 0;
      return in.ReadVarint64(&value);
    }
    case WireFormatLite::WIRETYPE_FIXED64:
      return in.Skip(8);
    case WireFormatLite::WIRETYPE_FIXED32:
      return in.Skip(4);
    case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) return false;
      total += StringBytes(length);
      return in.Skip(static_cast<int>(length));
    }
    case WireFormatLite::WIRETYPE_START_GROUP: {
      if (depth >= kMaxDepth) return false;
      total += kUnknownFieldSetBytes;
      const uint32_t end = WireFormatLite::MakeTag(WireFormatLite::GetTagFieldNumber(tag),
                                                   WireFormatLite::WIRETYPE_END_GROUP);
      return Scan(in, nullptr, end, depth + 1, total);
    }
    default:  // an END_GROUP no group opened, or no wire type at all
      return false;
  }
}

// Reads the fields of a `type` message until the current limit, or, with an
// `end_tag`, a group's until that tag (`type` null: an unknown group's, every
// field unknown); false on malformed input.
bool Scan(CodedInputStream& in, const Descriptor* type, uint32_t end_tag, int depth,
          int64_t& total) {
  Arrays arrays;
  bool has_unknown = false;
  // An unknown field, or a value of a closed enum that may be one (`count`
  // of them).
  const auto unknown = [&](int64_t count) {
    if (!has_unknown && type != nullptr) total += kUnknownFieldSetBytes;
    has_unknown = true;
    total += arrays.Add(&kUnknownFields, kUnknownFieldBytes, count);
  };
  // A flood names one field again and again: it is looked up once.
  int last_number = 0;
  const FieldDescriptor* last_field = nullptr;
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return end_tag == 0 && in.BytesUntilLimit() == 0;
    if (tag == end_tag) return true;
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (number == 0) return false;
    const WireFormatLite::WireType wire_type = WireFormatLite::GetTagWireType(tag);
    if (number != last_number) {
      last_number = number;
      last_field = type != nullptr ? type->FindFieldByNumber(number) : nullptr;
    }
    const FieldDescriptor* field = last_field;
    if (field == nullptr || !Parses(*field, wire_type)) {
      // Kept whole in the message's UnknownFieldSet (a known field of
      // another wire type too).
      unknown(1);
      if (!SkipUnknown(in, tag, depth, total)) return false;
      continue;
    }
    switch (wire_type) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t value = 0;
        if (!in.ReadVarint64(&value)) return false;
        if (ClosedEnum(*field)) unknown(1);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in.Skip(8)) return false;
        break;
      case WireFormatLite::WIRETYPE_FIXED32:
        if (!in.Skip(4)) return false;
        break;
      case WireFormatLite::WIRETYPE_START_GROUP: {  // a (proto2) group field: a message
        if (depth >= kMaxDepth) return false;
        total += kMessageBytes;
        if (field->is_repeated()) total += arrays.Add(field, kPointerBytes, 1);
        const uint32_t end = WireFormatLite::MakeTag(number, WireFormatLite::WIRETYPE_END_GROUP);
        if (!Scan(in, field->message_type(), end, depth + 1, total)) return false;
        continue;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) return false;
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {  // map entries too
          if (depth >= kMaxDepth) return false;
          total += kMessageBytes;
          if (field->is_repeated()) total += arrays.Add(field, kPointerBytes, 1);
          const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
          if (!Scan(in, field->message_type(), 0, depth + 1, total)) return false;
          in.PopLimit(limit);
          continue;
        }
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          total += StringBytes(length);
          if (field->is_repeated()) total += arrays.Add(field, kPointerBytes, 1);
        } else {
          // Packed: at most one varint entry per byte, or fixed ones of 4 or 8.
          const WireFormatLite::WireType entry_type = WireFormatLite::WireTypeForFieldType(
              static_cast<WireFormatLite::FieldType>(field->type()));
          const int64_t entries = entry_type == WireFormatLite::WIRETYPE_FIXED32   ? length / 4
                                  : entry_type == WireFormatLite::WIRETYPE_FIXED64 ? length / 8
                                                                                   : length;
          total += arrays.Add(field, ScalarBytes(*field), entries);
          if (ClosedEnum(*field)) unknown(entries);
        }
        if (!in.Skip(static_cast<int>(length))) return false;
        continue;
      }
      default:
        return false;
    }
    if (field->is_repeated()) total += arrays.Add(field, ScalarBytes(*field), 1);
  }
}

int64_t LengthDelimited(int64_t bytes) {
  return 1 + static_cast<int64_t>(CodedOutputStream::VarintSize64(static_cast<uint64_t>(bytes))) +
         bytes;
}

}  // namespace

absl::StatusOr<int64_t> ParsedBytesBound(const grpc::ByteBuffer& bytes, const Descriptor& type) {
  grpc::ByteBuffer copy(bytes);  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  CodedInputStream in(&reader);
  const size_t length = bytes.Length();
  int64_t total = kMessageBytes;
  bool ok = length <= static_cast<size_t>(INT32_MAX);
  if (ok) {
    const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
    ok = Scan(in, &type, /*end_tag=*/0, /*depth=*/0, total);
    in.PopLimit(limit);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", length, " bytes received are not a valid ", type.full_name()));
  }
  return total;
}

int64_t RunResponseBytes(absl::string_view id, absl::string_view backend, bool with_status,
                         absl::string_view status_message, const std::vector<Layout>& outputs) {
  v1::RunResponse fields;
  fields.set_id(std::string(id));
  fields.set_backend(std::string(backend));
  if (with_status) fields.mutable_status()->set_message(std::string(status_message));
  int64_t total = static_cast<int64_t>(fields.ByteSizeLong());
  v1::Tensor tensor;
  for (const Layout& layout : outputs) {
    tensor.Clear();
    SetTensorLayout(layout, &tensor);
    int64_t tensor_bytes = static_cast<int64_t>(tensor.ByteSizeLong());
    if (layout.buffer_bytes() > 0) tensor_bytes += LengthDelimited(layout.buffer_bytes());
    total += LengthDelimited(tensor_bytes);
  }
  return total;
}

absl::Status CheckReceivedBytes(int64_t bytes, int64_t max_message_bytes, absl::string_view what) {
  if (bytes <= max_message_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": a message of ", bytes, " bytes, over the server's message limit of ",
                   max_message_bytes, " bytes (--max_message_bytes)"));
}

}  // namespace tensorop::server
