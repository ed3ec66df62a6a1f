#include "server/wire/wire_bound.h"

#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.pb.h"
#include "server/wire/convert.h"
#include "tensorop/v1/tensorop.pb.h"

// The heap blocks this thread allocates while counting, each as its malloc
// chunk (malloc_usable_size + 8, what mallinfo2 counts): how many bytes are
// held now and at most since counting began. What parsing a message allocates
// is measured with it, against the bound. It replaces operator new for all of
// server_unit_tests; other threads and other tests are never counted.
namespace {

struct HeapCount {
  bool on = false;
  int64_t now = 0;
  int64_t peak = 0;
};
thread_local HeapCount heap_count;

int64_t ChunkBytes(void* block) { return static_cast<int64_t>(malloc_usable_size(block)) + 8; }

}  // namespace

void* operator new(size_t bytes) {
  void* block = std::malloc(bytes == 0 ? 1 : bytes);
  if (block == nullptr) throw std::bad_alloc();
  if (heap_count.on) {
    heap_count.now += ChunkBytes(block);
    heap_count.peak = std::max(heap_count.peak, heap_count.now);
  }
  return block;
}

void operator delete(void* block) noexcept {
  if (block != nullptr && heap_count.on) heap_count.now -= ChunkBytes(block);
  std::free(block);
}

void operator delete(void* block, size_t) noexcept { operator delete(block); }

// The other forms (but the aligned ones) alike, so that every block is
// malloc's, whichever form made or frees it (the sanitizers check that).
void* operator new[](size_t bytes) { return operator new(bytes); }
void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return operator new(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t bytes, const std::nothrow_t& nothrow) noexcept {
  return operator new(bytes, nothrow);
}
void operator delete[](void* block) noexcept { operator delete(block); }
void operator delete[](void* block, size_t) noexcept { operator delete(block); }
void operator delete(void* block, const std::nothrow_t&) noexcept { operator delete(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { operator delete(block); }

namespace tensorop::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using ::testing::HasSubstr;

grpc::ByteBuffer Bytes(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

// `text` in slices of `slice_bytes`, as gRPC hands a large message over.
grpc::ByteBuffer Slices(const std::string& text, size_t slice_bytes) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < text.size(); at += slice_bytes) {
    slices.emplace_back(text.data() + at, std::min(slice_bytes, text.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// The wire bytes `write` makes.
template <typename Write>
std::string Wire(Write write) {
  std::string wire;
  {
    StringOutputStream stream(&wire);
    CodedOutputStream out(&stream);
    write(out);
  }
  return wire;
}

void Tag(CodedOutputStream& out, int number, WireFormatLite::WireType type) {
  out.WriteTag(WireFormatLite::MakeTag(number, type));
}

void LengthDelimited(CodedOutputStream& out, int number, const std::string& value) {
  Tag(out, number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  out.WriteVarint32(static_cast<uint32_t>(value.size()));
  out.WriteString(value);
}

// What parsing `bytes` into a fresh `type` message on the heap, as tensord
// does (gRPC's ProtoBufferReader), allocates at its peak; the message object
// itself not counted. Fails the test when the bytes do not parse.
int64_t ParsePeak(const grpc::ByteBuffer& bytes, const Descriptor& type) {
  std::unique_ptr<Message> message(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(&type)->New());
  grpc::ByteBuffer copy(bytes);
  grpc::ProtoBufferReader reader(&copy);
  heap_count = {.on = true};
  const bool parsed = message->ParseFromZeroCopyStream(&reader);
  heap_count.on = false;
  EXPECT_TRUE(parsed) << type.full_name();
  return heap_count.peak;
}

// The bound of `wire` as a `type` message, which must be at least what
// parsing it takes.
int64_t ExpectBoundCoversParse(const std::string& wire, const Descriptor& type,
                               const std::string& what) {
  const grpc::ByteBuffer bytes = Bytes(wire);
  absl::StatusOr<int64_t> bound = ParsedBytesBound(bytes, type);
  EXPECT_TRUE(bound.ok()) << what << ": " << bound.status();
  const int64_t peak = ParsePeak(bytes, type);
  EXPECT_GE(bound.value_or(0), peak)
      << what << " in " << type.full_name() << " (" << wire.size() << " bytes)";
  return bound.value_or(0);
}

// 2^k + 1 entries: an array that doubles has just grown, its old block still
// alive while copied, the most it takes per entry.
constexpr int kMany = (1 << 12) + 1;

// Fields of every wire type no message of ours has: each becomes an
// UnknownField (16 bytes in a vector that doubles: 48 at its peak), a
// length-delimited one a string too, a group an UnknownFieldSet of its own.
TEST(WireBoundTest, UnknownFieldsOfEveryWireTypeCostWhatParsingAllocates) {
  constexpr int kUnknown = 15;  // no field of RunRequest or ServerLiveRequest
  const std::vector<std::pair<std::string, std::function<void(CodedOutputStream&)>>> kinds = {
      {"varint",
       [](CodedOutputStream& out) {
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_VARINT);
         out.WriteVarint64(1);
       }},
      {"fixed64",
       [](CodedOutputStream& out) {
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_FIXED64);
         out.WriteLittleEndian64(1);
       }},
      {"fixed32",
       [](CodedOutputStream& out) {
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_FIXED32);
         out.WriteLittleEndian32(1);
       }},
      {"empty length-delimited",
       [](CodedOutputStream& out) { LengthDelimited(out, kUnknown, ""); }},
      {"16-byte length-delimited",
       [](CodedOutputStream& out) { LengthDelimited(out, kUnknown, std::string(16, 'x')); }},
      {"100-byte length-delimited",
       [](CodedOutputStream& out) { LengthDelimited(out, kUnknown, std::string(100, 'x')); }},
      {"empty group",
       [](CodedOutputStream& out) {
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_START_GROUP);
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_END_GROUP);
       }},
      {"group of a varint and a group",
       [](CodedOutputStream& out) {
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_START_GROUP);
         Tag(out, 1, WireFormatLite::WIRETYPE_VARINT);
         out.WriteVarint64(7);
         Tag(out, 2, WireFormatLite::WIRETYPE_START_GROUP);
         Tag(out, 2, WireFormatLite::WIRETYPE_END_GROUP);
         Tag(out, kUnknown, WireFormatLite::WIRETYPE_END_GROUP);
       }},
  };
  // Not a structured binding: clang 14 cannot capture one in the lambda.
  for (const auto& kind : kinds) {
    const std::string& what = kind.first;
    const std::function<void(CodedOutputStream&)>& write = kind.second;
    for (int count : {1, 2, kMany}) {
      const std::string wire = Wire([&](CodedOutputStream& out) {
        for (int i = 0; i < count; ++i) write(out);
      });
      const std::string label = absl::StrCat(count, " unknown ", what);
      ExpectBoundCoversParse(wire, *v1::RunRequest::descriptor(), label);
      ExpectBoundCoversParse(wire, *inference::ServerLiveRequest::descriptor(), label);
    }
  }
  // A known field sent with another wire type is kept as an unknown one.
  const std::string id_as_varints = Wire([](CodedOutputStream& out) {
    for (int i = 0; i < kMany; ++i) {
      Tag(out, v1::RunRequest::kIdFieldNumber, WireFormatLite::WIRETYPE_VARINT);
      out.WriteVarint64(1);
    }
  });
  EXPECT_GE(ExpectBoundCoversParse(id_as_varints, *v1::RunRequest::descriptor(), "id as varints"),
            48 * kMany);
}

// The attack of issue 42 (item 8): a ServerLive request of 30 M unknown
// varints, 60 MB, which parsing makes into 30 M UnknownFields.
TEST(WireBoundTest, AFloodOfUnknownVarintsCountsEveryField) {
  constexpr int64_t kFields = 30'000'000;
  std::string wire;
  wire.reserve(2 * kFields);
  for (int64_t i = 0; i < kFields; ++i) wire += "\x08\x01";  // field 1, varint 1
  absl::StatusOr<int64_t> bound =
      ParsedBytesBound(Slices(wire, 1 << 20), *inference::ServerLiveRequest::descriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, 16 * kFields);  // the UnknownFields themselves
  EXPECT_GE(*bound, 48 * kFields);  // and the vector's growth
  // Measured where it is affordable, 2^20 + 1 fields (48 MiB at the peak).
  const std::string measured = wire.substr(0, 2 * ((1 << 20) + 1));
  const int64_t peak = ParsePeak(Bytes(measured), *inference::ServerLiveRequest::descriptor());
  EXPECT_GE(peak, 48 * (1 << 20));
  EXPECT_GE(*ParsedBytesBound(Bytes(measured), *inference::ServerLiveRequest::descriptor()), peak);
}

// A value of `field` in the wire: a varint 1, a fixed 1, a 20-byte string, an
// empty message, or a map entry with key `i` (a string) and an empty value.
void WriteValue(CodedOutputStream& out, const FieldDescriptor& field, int i) {
  const WireFormatLite::WireType type =
      WireFormatLite::WireTypeForFieldType(static_cast<WireFormatLite::FieldType>(field.type()));
  Tag(out, field.number(), type);
  switch (type) {
    case WireFormatLite::WIRETYPE_VARINT:
      out.WriteVarint64(1);
      return;
    case WireFormatLite::WIRETYPE_FIXED64:
      out.WriteLittleEndian64(1);
      return;
    case WireFormatLite::WIRETYPE_FIXED32:
      out.WriteLittleEndian32(1);
      return;
    default:
      break;
  }
  std::string value;
  if (field.is_map()) {
    value = Wire([&](CodedOutputStream& entry) {
      const FieldDescriptor& key = *field.message_type()->map_key();
      ASSERT_EQ(key.type(), FieldDescriptor::TYPE_STRING) << field.full_name();
      LengthDelimited(entry, key.number(), absl::StrCat(i));
      const FieldDescriptor& map_value = *field.message_type()->map_value();
      if (map_value.type() == FieldDescriptor::TYPE_MESSAGE) {
        LengthDelimited(entry, map_value.number(), "");
      }
    });
  } else if (field.type() != FieldDescriptor::TYPE_MESSAGE) {
    value = std::string(20, 'x');
  }
  out.WriteVarint32(static_cast<uint32_t>(value.size()));
  out.WriteString(value);
}

// The message types of our two protos, nested ones included, but map entries
// (parsed as their map's nodes).
std::vector<const Descriptor*> MessageTypes() {
  std::vector<const Descriptor*> types;
  for (const Descriptor* file_type :
       {v1::RunRequest::descriptor(), inference::ModelInferRequest::descriptor()}) {
    const google::protobuf::FileDescriptor& file = *file_type->file();
    std::vector<const Descriptor*> todo;
    for (int i = 0; i < file.message_type_count(); ++i) todo.push_back(file.message_type(i));
    while (!todo.empty()) {
      const Descriptor* type = todo.back();
      todo.pop_back();
      for (int i = 0; i < type->nested_type_count(); ++i) todo.push_back(type->nested_type(i));
      if (!type->options().map_entry()) types.push_back(type);
    }
  }
  return types;
}

// Every field of every message type of ours, many times (2^12 + 1: just past
// a doubling) and few: scalars repeated unpacked and packed, strings, bytes,
// submessages, map entries. The bound is at least what protobuf allocates.
TEST(WireBoundTest, EveryFieldOfEveryMessageCostsAtMostItsBound) {
  int fields = 0;
  for (const Descriptor* type : MessageTypes()) {
    for (int f = 0; f < type->field_count(); ++f) {
      const FieldDescriptor& field = *type->field(f);
      ++fields;
      for (int count : {1, 3, kMany}) {
        const std::string wire = Wire([&](CodedOutputStream& out) {
          for (int i = 0; i < count; ++i) WriteValue(out, field, i);
        });
        ExpectBoundCoversParse(wire, *type, absl::StrCat(count, " of ", field.full_name()));
      }
      if (field.is_packable()) {
        // Packed: one-byte varints, or fixed entries.
        const std::string entries = Wire([&](CodedOutputStream& out) {
          for (int i = 0; i < kMany; ++i) {
            switch (WireFormatLite::WireTypeForFieldType(
                static_cast<WireFormatLite::FieldType>(field.type()))) {
              case WireFormatLite::WIRETYPE_FIXED64:
                out.WriteLittleEndian64(1);
                break;
              case WireFormatLite::WIRETYPE_FIXED32:
                out.WriteLittleEndian32(1);
                break;
              default:
                out.WriteVarint64(1);
            }
          }
        });
        const std::string packed = Wire([&](CodedOutputStream& out) {
          for (int chunk = 0; chunk < 3; ++chunk) LengthDelimited(out, field.number(), entries);
        });
        ExpectBoundCoversParse(packed, *type, absl::StrCat("packed ", field.full_name()));
      }
    }
  }
  EXPECT_GT(fields, 150);
}

// Strings of every size class: within std::string, short heap blocks, blocks
// malloc maps alone, and one past what protobuf reserves at once (50 000 000
// bytes), which grows as its slices arrive: 3 times its length at the peak.
TEST(WireBoundTest, StringsOfEverySizeCostAtMostTheirBound) {
  for (size_t length : {size_t{0}, size_t{15}, size_t{16}, size_t{30}, size_t{31}, size_t{100},
                        size_t{1} << 20, size_t{50'000'001}}) {
    v1::Tensor tensor;
    tensor.set_data(std::string(length, 'x'));
    const std::string wire = tensor.SerializeAsString();
    const grpc::ByteBuffer bytes = Slices(wire, 8192);
    absl::StatusOr<int64_t> bound = ParsedBytesBound(bytes, *v1::Tensor::descriptor());
    ASSERT_TRUE(bound.ok()) << bound.status();
    const int64_t peak = ParsePeak(bytes, *v1::Tensor::descriptor());
    EXPECT_GE(*bound, peak) << length << " bytes";
    if (length == 50'000'001) {
      EXPECT_GE(peak, 3 * static_cast<int64_t>(length));
    }
  }
}

TEST(WireBoundTest, MalformedGroupsAreInvalidAsProtobufFindsThem) {
  const std::vector<std::string> wires = {
      // A group never closed.
      Wire([](CodedOutputStream& out) { Tag(out, 15, WireFormatLite::WIRETYPE_START_GROUP); }),
      // Closed by another field's end.
      Wire([](CodedOutputStream& out) {
        Tag(out, 15, WireFormatLite::WIRETYPE_START_GROUP);
        Tag(out, 14, WireFormatLite::WIRETYPE_END_GROUP);
      }),
      // An end no group opened.
      Wire([](CodedOutputStream& out) { Tag(out, 15, WireFormatLite::WIRETYPE_END_GROUP); }),
      // Groups 17 deep (protobuf allows 100; tensord's messages nest 4).
      Wire([](CodedOutputStream& out) {
        for (int i = 0; i < 17; ++i) Tag(out, 15, WireFormatLite::WIRETYPE_START_GROUP);
        for (int i = 0; i < 17; ++i) Tag(out, 15, WireFormatLite::WIRETYPE_END_GROUP);
      }),
  };
  for (size_t i = 0; i < wires.size(); ++i) {
    absl::StatusOr<int64_t> bound =
        ParsedBytesBound(Bytes(wires[i]), *v1::RunRequest::descriptor());
    EXPECT_EQ(bound.status().code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_THAT(std::string(bound.status().message()),
                HasSubstr("not a valid tensorop.v1.RunRequest"));
    if (i < 3) {
      EXPECT_FALSE(v1::RunRequest().ParseFromString(wires[i])) << i;
    }
  }
}

v1::RunRequest SmallRequest() {
  v1::RunRequest request;
  request.set_id("a");
  request.mutable_slice()->add_offsets(0);
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  input.set_dtype(v1::UINT8);
  input.add_sizes(1000);
  input.set_data(std::string(1000, 'x'));
  request.add_outputs()->add_sizes(10);
  return request;
}

TEST(WireBoundTest, ABoundCoversTheDataAndStaysNearTheWireSize) {
  const std::string wire = SmallRequest().SerializeAsString();
  absl::StatusOr<int64_t> bound = ParsedBytesBound(Bytes(wire), *v1::RunRequest::descriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, 1000);
  EXPECT_LE(*bound, 1000 + 4096);
}

TEST(WireBoundTest, APackedFieldCountsEightBytesAndMorePerWireByte) {
  v1::RunRequest request = SmallRequest();
  v1::Tensor& input = (*request.mutable_inputs())["input"];
  for (int i = 0; i < 100000; ++i) input.add_sizes(1);  // one byte each on the wire
  const std::string wire = request.SerializeAsString();
  absl::StatusOr<int64_t> bound = ParsedBytesBound(Bytes(wire), *v1::RunRequest::descriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, 8 * 100000);
  v1::RunRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  // The tensor's own footprint: protobuf 3.21's SpaceUsedLong of a whole
  // RunRequest walks its inputs map through a repeated field the map may not
  // have built, which crashes under ThreadSanitizer.
  EXPECT_GE(*bound, static_cast<int64_t>(parsed.inputs().at("input").SpaceUsedLong()));
}

TEST(WireBoundTest, GarbageIsInvalidArgumentNamingTheType) {
  absl::StatusOr<int64_t> bound =
      ParsedBytesBound(Bytes("\xff\xff\xff garbage"), *v1::RunRequest::descriptor());
  EXPECT_EQ(bound.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bound.status().message()), HasSubstr("tensorop.v1.RunRequest"));
  // Truncated: a length past the end.
  const std::string wire = SmallRequest().SerializeAsString();
  EXPECT_FALSE(
      ParsedBytesBound(Bytes(wire.substr(0, wire.size() - 10)), *v1::RunRequest::descriptor())
          .ok());
}

TEST(WireBoundTest, RunResponseBytesIsTheSerializedSize) {
  Layout layout;
  layout.dtype = DType::kUint8;
  layout.sizes = {3, 300};
  layout.strides = {300, 1};
  layout.element_count = 900;
  layout.buffer_elements = 900;
  Layout empty = layout;
  empty.sizes = {0, 300};
  empty.element_count = 0;
  empty.buffer_elements = 0;
  for (bool with_status : {false, true}) {
    v1::RunResponse response;
    response.set_id("id");
    response.set_backend("cpu");
    if (with_status) response.mutable_status()->set_message("");
    for (const Layout& each : {layout, empty}) {
      v1::Tensor* tensor = response.add_outputs();
      SetTensorLayout(each, tensor);
      // As the server answers: an empty output has no data field.
      if (each.buffer_bytes() > 0) {
        tensor->set_data(std::string(static_cast<size_t>(each.buffer_bytes()), '\0'));
      }
    }
    EXPECT_EQ(RunResponseBytes("id", "cpu", with_status, "", {layout, empty}),
              static_cast<int64_t>(response.ByteSizeLong()));
  }
}

}  // namespace
}  // namespace tensorop::server
