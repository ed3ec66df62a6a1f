#include "server/wire/wire_bound.h"

#include <string>

#include <google/protobuf/io/coded_stream.h>
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
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// A parsed message object (or map node) and its bookkeeping; generous.
constexpr int64_t kMessageBytes = 256;
// A string's heap block beyond its bytes.
constexpr int64_t kStringBytes = 32;
// Per entry of a repeated scalar: 8 bytes, doubled for the growth of the array.
constexpr int64_t kRepeatedEntryBytes = 16;
// Our messages nest four deep; protobuf itself allows 100.
constexpr int kMaxDepth = 16;

// Reads fields of `type` until the current limit; false on malformed input.
bool Scan(CodedInputStream& in, const Descriptor& type, int depth, int64_t& total) {
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return in.BytesUntilLimit() == 0;
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (number == 0) return false;
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    const bool repeated = field != nullptr && field->is_repeated();
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t value = 0;
        if (!in.ReadVarint64(&value)) return false;
        if (repeated) total += kRepeatedEntryBytes;
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in.Skip(8)) return false;
        if (repeated) total += kRepeatedEntryBytes;
        break;
      case WireFormatLite::WIRETYPE_FIXED32:
        if (!in.Skip(4)) return false;
        if (repeated) total += kRepeatedEntryBytes;
        break;
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(INT32_MAX)) return false;
        if (field != nullptr && field->type() == FieldDescriptor::TYPE_MESSAGE) {
          if (depth >= kMaxDepth) return false;
          total += kMessageBytes;
          const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
          if (!Scan(in, *field->message_type(), depth + 1, total)) return false;
          in.PopLimit(limit);
        } else {
          // A packed repeated scalar holds at most one entry per byte; bytes,
          // strings and unknown fields take their length.
          const bool packed = repeated && field->cpp_type() != FieldDescriptor::CPPTYPE_STRING;
          total += packed ? kRepeatedEntryBytes * static_cast<int64_t>(length)
                          : kStringBytes + static_cast<int64_t>(length);
          if (!in.Skip(static_cast<int>(length))) return false;
        }
        break;
      }
      default:  // groups: none of our messages has them
        return false;
    }
  }
}

int64_t LengthDelimited(int64_t bytes) {
  return 1 + CodedOutputStream::VarintSize64(static_cast<uint64_t>(bytes)) + bytes;
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
    ok = Scan(in, type, 0, total);
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

}  // namespace tensorop::server
