#include "tests/integration/tensord_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "tests/support/proc_status.h"

namespace tensorop::testing {

std::shared_ptr<grpc::Channel> Connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> sizes, std::string data,
                      std::vector<int64_t> strides) {
  v1::Tensor tensor;
  tensor.set_dtype(dtype);
  tensor.mutable_sizes()->Assign(sizes.begin(), sizes.end());
  tensor.mutable_strides()->Assign(strides.begin(), strides.end());
  tensor.set_data(std::move(data));
  return tensor;
}

v1::RunRequest SliceRequest(const std::string& id, v1::Tensor input, std::vector<int64_t> offsets,
                            std::vector<int64_t> window_sizes, std::vector<int64_t> window_strides,
                            std::vector<int64_t> output_sizes) {
  v1::RunRequest request;
  request.set_id(id);
  v1::SliceAttrs* slice = request.mutable_slice();
  slice->mutable_offsets()->Assign(offsets.begin(), offsets.end());
  slice->mutable_window_sizes()->Assign(window_sizes.begin(), window_sizes.end());
  slice->mutable_window_strides()->Assign(window_strides.begin(), window_strides.end());
  (*request.mutable_inputs())["input"] = std::move(input);
  request.add_outputs()->mutable_sizes()->Assign(output_sizes.begin(), output_sizes.end());
  return request;
}

ReversedRows ReversedRowsCase() {
  constexpr int64_t kRows = 512, kCols = 1024;
  ReversedRows rows;
  rows.matrix.resize(kRows * kCols);
  for (size_t i = 0; i < rows.matrix.size(); ++i) rows.matrix[i] = static_cast<float>(i) * 0.5f + 1;
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < 341; ++j)
      rows.expected.push_back(rows.matrix[(kRows - 1 - i) * kCols + 1 + 3 * j]);
  }
  return rows;
}

v1::RunRequest ReversedRows::Request(const std::string& id) const {
  return SliceRequest(id, MakeTensor(v1::FLOAT32, {512, 1024}, Pack(matrix)), {0, 1}, {512, 1023},
                      {-1, 3}, {512, 341});
}

v1::RunRequest DocSliceRequest(const std::string& id) {
  std::vector<float> values;
  for (int i = 1; i <= 16; ++i) values.push_back(static_cast<float>(i));
  return SliceRequest(id, MakeTensor(v1::FLOAT32, {1, 1, 4, 4}, Pack(values)), {0, 0, 0, 1},
                      {1, 1, 4, 3}, {1, 1, 2, 2}, {1, 1, 2, 2});
}

int64_t BroadcastRowsMismatches(const std::string& data, int64_t cols) {
  int64_t mismatches = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    mismatches +=
        static_cast<uint8_t>(data[i]) != BroadcastRowValue(static_cast<int64_t>(i) % cols);
  }
  return mismatches;
}

SplitRows SplitRowsCase() {
  SplitRows split;
  split.bytes.resize(static_cast<size_t>(SplitRows::kRows * SplitRows::kCols));
  for (size_t i = 0; i < split.bytes.size(); ++i) {
    split.bytes[i] = static_cast<char>((i * 7 + i / 4093) % 256);
  }
  split.request.set_id("split");
  split.request.mutable_split()->set_axis(0);
  (*split.request.mutable_inputs())["input"] =
      MakeTensor(v1::UINT8, {SplitRows::kRows, SplitRows::kCols}, split.bytes);
  for (const int64_t rows : {int64_t{4096}, int64_t{6144}}) {
    v1::OutputDesc* output = split.request.add_outputs();
    output->add_sizes(rows);
    output->add_sizes(SplitRows::kCols);
  }
  return split;
}

v1::RunRequest BroadcastRowsRequest(const std::string& id, int64_t rows, int64_t cols) {
  std::string row(static_cast<size_t>(cols), '\0');
  for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<char>(BroadcastRowValue(c));
  return SliceRequest(id, MakeTensor(v1::UINT8, {rows, cols}, std::move(row), {0, 1}), {0, 0},
                      {rows, cols}, {1, 1}, {rows, cols});
}

std::string WireString(int field, const std::string& value) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(static_cast<uint32_t>(field << 3 | 2));
    coded.WriteVarint32(static_cast<uint32_t>(value.size()));
    coded.WriteString(value);
  }
  return out;
}

std::vector<std::string> WireStrings(const std::string& message, int field) {
  google::protobuf::UnknownFieldSet fields;
  std::vector<std::string> values;
  if (!fields.ParseFromString(message)) return values;
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& value = fields.field(i);
    if (value.number() == field &&
        value.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      values.push_back(value.length_delimited());
    }
  }
  return values;
}

std::vector<uint64_t> WireVarints(const std::string& message, int field) {
  google::protobuf::UnknownFieldSet fields;
  std::vector<uint64_t> values;
  if (!fields.ParseFromString(message)) return values;
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& value = fields.field(i);
    if (value.number() == field && value.type() == google::protobuf::UnknownField::TYPE_VARINT) {
      values.push_back(value.varint());
    }
  }
  return values;
}

RawCall::RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                 grpc::ClientContext* context)
    : stub_(channel) {
  call_ = stub_.PrepareCall(context, method, &queue_);
  call_->StartCall(this);
  Await();
}

RawCall::~RawCall() {
  if (!finished_) Finish();
  queue_.Shutdown();
  void* tag;
  bool ok;
  while (queue_.Next(&tag, &ok)) {
  }
}

bool RawCall::Await() {
  void* tag = nullptr;
  bool ok = false;
  return queue_.Next(&tag, &ok) && ok;
}

bool RawCall::Write(const std::string& message) {
  grpc::Slice slice(message);
  grpc::ByteBuffer buffer(&slice, 1);
  call_->Write(buffer, this);
  return Await();
}

bool RawCall::WritesDone() {
  call_->WritesDone(this);
  return Await();
}

std::optional<std::string> RawCall::Read() {
  grpc::ByteBuffer buffer;
  call_->Read(&buffer, this);
  if (!Await()) return std::nullopt;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return std::nullopt;
  std::string message;
  for (const grpc::Slice& slice : slices) {
    message.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return message;
}

grpc::Status RawCall::Finish() {
  grpc::Status status;
  call_->Finish(&status, this);
  Await();
  finished_ = true;
  return status;
}

grpc::Status RawExchange(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                         const std::vector<std::string>& messages) {
  grpc::ClientContext context;
  RawCall call(channel, method, &context);
  for (const std::string& message : messages) {
    if (!call.Write(message)) break;
  }
  call.WritesDone();
  while (call.Read().has_value()) {
  }
  return call.Finish();
}

std::string AwaitLogLine(const TensordProcess& server, const std::vector<std::string>& needles) {
  // Bounded only so that a bug fails the test instead of hanging it; the line is
  // written as the call ends, so it normally is there on the first look.
  bool exited = false;
  for (int attempt = 0; attempt < 3000 && !exited; ++attempt) {
    exited = ProcessHasExited(server.pid());  // before the read: that read is then the last
    std::istringstream log(server.Log());
    std::string line;
    while (std::getline(log, line)) {
      bool all = true;
      for (const std::string& needle : needles) {
        if (line.find(needle) == std::string::npos) {
          all = false;
          break;
        }
      }
      if (all) return line;
    }
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // For the failure this empty line leads to: whether the server still runs (a
  // crash under a sanitizer ends its log with the report) and what it logged last.
  const std::string log = server.Log();
  const size_t tail = 16 * 1024;
  std::fprintf(stderr, "AwaitLogLine: no line with every needle; tensord %s; its log's end:\n%s\n",
               exited ? "has exited" : "still runs",
               log.substr(log.size() > tail ? log.size() - tail : 0).c_str());
  return "";
}

grpc::Status PutTensor(v1::TensorOp::Stub& stub, const v1::Tensor& tensor, v1::TensorHandle* handle,
                       int64_t ttl_seconds, int64_t chunk_bytes, v1::Backend backend) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::unique_ptr<grpc::ClientWriter<v1::PutPart>> writer = stub.Put(&context, handle);
  v1::PutPart part;
  v1::PutHeader* header = part.mutable_header();
  header->set_dtype(tensor.dtype());
  *header->mutable_sizes() = tensor.sizes();
  *header->mutable_strides() = tensor.strides();
  header->set_ttl_seconds(ttl_seconds);
  header->set_backend(backend);
  bool sent = writer->Write(part);
  const std::string& data = tensor.data();
  for (size_t at = 0; sent && at < data.size(); at += static_cast<size_t>(chunk_bytes)) {
    part.set_chunk(data.substr(at, static_cast<size_t>(chunk_bytes)));
    sent = writer->Write(part);
  }
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status FetchTensor(v1::TensorOp::Stub& stub, const std::string& id,
                         const std::vector<int64_t>& strides, v1::OutputHeader* header,
                         std::string* data) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::FetchRequest request;
  request.set_id(id);
  request.mutable_strides()->Assign(strides.begin(), strides.end());
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = stub.Fetch(&context, request);
  v1::ResultPart part;
  while (reader->Read(&part)) {
    if (part.has_header()) *header = part.header();
    *data += part.chunk();
  }
  return reader->Finish();
}

void ReleaseEveryHandle(v1::TensorOp::Stub& stub) {
  // A page at a time (at most 1000 ids, as Release takes), always the first
  // page: the one released is gone from the next listing.
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListHandlesRequest list;
    list.set_page_size(1000);
    v1::ListHandlesResponse page;
    if (!stub.ListHandles(&context, list, &page).ok() || page.handles().empty()) return;
    v1::ReleaseRequest release;
    for (const v1::TensorHandle& handle : page.handles()) release.add_ids(handle.id());
    grpc::ClientContext releasing;
    releasing.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ReleaseResponse released;
    if (!stub.Release(&releasing, release, &released).ok()) return;
  }
}

int64_t MetricValue(const TensordProcess& server, const std::string& series) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  if (!result) return -1;
  const std::string prefix = "\n" + series + " ";
  const size_t at = result->body.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stoll(result->body.substr(at + prefix.size()));
}

int64_t FirstMetricValue(const TensordProcess& server, const std::string& family) {
  httplib::Client client("127.0.0.1", server.metrics_port());
  httplib::Result result = client.Get("/metrics");
  if (!result) return -1;
  const std::string& text = result->body;
  size_t value = std::string::npos;
  if (size_t at = text.find("\n" + family + " "); at != std::string::npos) {
    value = at + family.size() + 2;
  } else if (at = text.find("\n" + family + "{"); at != std::string::npos) {
    const size_t labels_end = text.find("} ", at);  // label values may hold spaces
    if (labels_end != std::string::npos) value = labels_end + 2;
  }
  return value == std::string::npos ? -1 : std::stoll(text.substr(value));
}

int ConnectHttp(int port, int timeout_seconds) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{timeout_seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

std::string RawHttpExchange(int port, const std::string& request, int timeout_seconds) {
  const int fd = ConnectHttp(port, timeout_seconds);
  if (fd < 0) return "";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buffer[4096];
  ssize_t got;
  while ((got = ::recv(fd, buffer, sizeof buffer, 0)) > 0) {
    answer.append(buffer, got);
    const size_t head_end = answer.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    const std::string head = absl::AsciiStrToLower(answer.substr(0, head_end));
    const size_t length_at = head.find("\r\ncontent-length:");
    size_t length = 0;
    if (length_at != std::string::npos &&
        absl::SimpleAtoi(
            head.substr(length_at + 17, head.find("\r\n", length_at + 2) - (length_at + 17)),
            &length) &&
        answer.size() >= head_end + 4 + length) {
      break;
    }
  }
  ::close(fd);
  return answer;
}

int64_t PoolBuffers(const TensordProcess& server) {
  return MetricValue(server, "tensorop_buffer_pool_allocations_total") +
         MetricValue(server, "tensorop_buffer_pool_reuses_total");
}

int64_t MetricValueOnceItIs(const TensordProcess& server, const std::string& series,
                            int64_t expected) {
  int64_t value = MetricValue(server, series);
  for (int i = 0; i < 1000 && value != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    value = MetricValue(server, series);
  }
  return value;
}

}  // namespace tensorop::testing
