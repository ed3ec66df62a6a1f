#include "client/client.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/protocol_error.h"
#include "client/status_macros.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/util/field_mask_util.h"

namespace tensorop::client {
namespace {

// A malicious byte_length must not make us allocate it up front; beyond this the
// string grows as chunks actually arrive.
constexpr int64_t kMaxReserveBytes = int64_t{256} << 20;

absl::StatusCode CodeFromGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return absl::StatusCode::kOk;
    case grpc::StatusCode::CANCELLED:
      return absl::StatusCode::kCancelled;
    case grpc::StatusCode::UNKNOWN:
      return absl::StatusCode::kUnknown;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::StatusCode::kInvalidArgument;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::StatusCode::kDeadlineExceeded;
    case grpc::StatusCode::NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
      return absl::StatusCode::kAlreadyExists;
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::StatusCode::kPermissionDenied;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::StatusCode::kResourceExhausted;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::StatusCode::kFailedPrecondition;
    case grpc::StatusCode::ABORTED:
      return absl::StatusCode::kAborted;
    case grpc::StatusCode::OUT_OF_RANGE:
      return absl::StatusCode::kOutOfRange;
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::StatusCode::kUnimplemented;
    case grpc::StatusCode::INTERNAL:
      return absl::StatusCode::kInternal;
    case grpc::StatusCode::UNAVAILABLE:
      return absl::StatusCode::kUnavailable;
    case grpc::StatusCode::DATA_LOSS:
      return absl::StatusCode::kDataLoss;
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::StatusCode::kUnauthenticated;
    case grpc::StatusCode::DO_NOT_USE:
      break;
  }
  return absl::StatusCode::kUnknown;
}

// Copies every field of `from` except the one named `skip` into `to`, so the
// streamed request header is built without copying gigabytes of tensor data, and
// fields added to the proto later travel too.
void CopyAllFieldsExcept(const google::protobuf::Message& from, absl::string_view skip,
                         google::protobuf::Message* to) {
  google::protobuf::FieldMask mask;
  const google::protobuf::Descriptor* descriptor = from.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    if (descriptor->field(i)->name() != skip) mask.add_paths(descriptor->field(i)->name());
  }
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      from, mask, google::protobuf::util::FieldMaskUtil::MergeOptions(), to);
}

// The handles a call reads, each with the field naming it, in the order the
// fields are checked.
using HandleReads = std::vector<std::pair<std::string, const v1::TensorHandle*>>;

// Appends the handles among `inputs` (a request's or a chain step's, whose
// Tensor `tensor_of` gives, or null), in name order, their fields after
// `prefix`.
template <typename Inputs, typename TensorOf>
void AddHandleReads(const Inputs& inputs, absl::string_view prefix, TensorOf tensor_of,
                    HandleReads& reads) {
  const size_t first = reads.size();
  for (const auto& [name, input] : inputs) {
    const v1::Tensor* tensor = tensor_of(input);
    if (tensor == nullptr || !tensor->has_handle()) continue;
    reads.emplace_back(absl::StrCat(prefix, "inputs[\"", absl::CHexEscape(name), "\"]"),
                       &tensor->handle());
  }
  std::sort(reads.begin() + static_cast<std::ptrdiff_t>(first), reads.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
}

// The read whose replica a call goes to, or null for none (no handle, or
// only handles of older servers, which name no replica): INVALID_ARGUMENT
// naming both fields when two name different replicas.
absl::StatusOr<const HandleReads::value_type*> ReplicaRead(const HandleReads& reads) {
  const HandleReads::value_type* chosen = nullptr;
  for (const auto& read : reads) {
    const std::string& replica = read.second->replica();
    if (replica.empty()) continue;
    if (chosen == nullptr) {
      chosen = &read;
    } else if (replica != chosen->second->replica()) {
      return absl::InvalidArgumentError(absl::StrCat(
          chosen->first, " lives on replica ", chosen->second->replica(), " and ", read.first,
          " on replica ", replica, "; a call reads handles of one replica"));
    }
  }
  return chosen;
}

}  // namespace

HostTensor HostTensorFromProto(v1::Tensor& tensor) {
  HostTensor host;
  host.dtype = tensor.dtype();
  host.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  host.strides.assign(tensor.strides().begin(), tensor.strides().end());
  if (tensor.has_handle()) {
    host.handle = std::move(*tensor.mutable_handle());
  } else {
    host.data = std::move(*tensor.mutable_data());
  }
  return host;
}

absl::StatusCode StatusCodeFromWire(int code) {
  // Checked first: casting an out-of-range value to the enum is undefined.
  if (code < 0 || code > static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)) {
    return absl::StatusCode::kUnknown;
  }
  return CodeFromGrpc(static_cast<grpc::StatusCode>(code));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  // TLS and token failures say which part failed.
  return ExplainSecurityError(
      absl::Status(CodeFromGrpc(status.error_code()), status.error_message()));
}

absl::StatusOr<Result> ResultFromResponse(v1::RunResponse& response,
                                          const v1::RunRequest* request) {
  Result result;
  result.backend = response.backend();
  result.outputs.reserve(response.outputs_size());
  for (int i = 0; i < response.outputs_size(); ++i) {
    HostTensor tensor = HostTensorFromProto(*response.mutable_outputs(i));
    const v1::OutputDesc* desc =
        request != nullptr && i < request->outputs_size() ? &request->outputs(i) : nullptr;
    if (desc != nullptr && desc->keep() && !tensor.handle.has_value()) {
      return ProtocolError(absl::StrCat("output ", i, " was kept, yet the answer has no handle"));
    }
    if (tensor.handle.has_value()) {
      // Kept: a layout and a handle, no data.
    } else if (desc != nullptr && desc->has_shared_memory()) {
      if (!tensor.data.empty()) {
        return ProtocolError(absl::StrCat("output ", i,
                                          " was sent to shared memory, yet the "
                                          "answer carries ",
                                          tensor.data.size(), " bytes"));
      }
    } else if (absl::StatusOr<int64_t> checked = CheckLayout(tensor); !checked.ok()) {
      return ProtocolError(absl::StrCat("output ", i, ": ", checked.status().message()));
    }
    result.outputs.push_back(std::move(tensor));
  }
  return result;
}

Client::Client(const std::string& target, ClientOptions options) : options_(std::move(options)) {
  absl::StatusOr<std::string> channel_target = ChannelTarget(target);
  target_status_ = channel_target.status();
  // A malformed target still gets a channel (to nowhere), so the object stays
  // usable; every call then answers target_status_.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(options_.security);
  if (target_status_.ok()) target_status_ = credentials.status();
  if (credentials.ok()) credentials_ = *credentials;
  if (options_.security.enabled()) authority_ = TargetAuthority(target);
  Connect(CreateChannel(channel_target.ok() ? *channel_target : std::string(target),
                        options_.max_message_bytes, options_.skip_unhealthy_replicas,
                        credentials_));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)) {
  Connect(std::move(channel));
}

void Client::Connect(std::shared_ptr<grpc::Channel> channel) {
  stub_ = v1::TensorOp::NewStub(channel);
  health_stub_ = grpc::health::v1::Health::NewStub(std::move(channel));
}

Client::Route Client::MainRoute() const { return Route{.stub = stub_.get()}; }

Client::Route Client::RouteTo(const std::string& replica, absl::string_view handle_id) {
  if (replica.empty()) return MainRoute();
  Route route{.replica = replica};
  if (!handle_id.empty()) route.holding = absl::StrCat(" holding ", handle_id.substr(0, 8), "...");
  std::lock_guard<std::mutex> lock(replicas_->mutex);
  auto [entry, made] = replicas_->by_address.try_emplace(replica);
  if (made) {
    entry->second.channel =
        CreateReplicaChannel(replica, options_.max_message_bytes, credentials_, authority_);
    entry->second.stub = v1::TensorOp::NewStub(entry->second.channel);
  }
  route.channel = entry->second.channel.get();
  route.stub = entry->second.stub.get();
  return route;
}

absl::StatusOr<Client::Route> Client::RouteFor(const v1::RunRequest& request) {
  HandleReads reads;
  AddHandleReads(
      request.inputs(), "", [](const v1::Tensor& tensor) { return &tensor; }, reads);
  ASSIGN_OR_RETURN(const HandleReads::value_type* read, ReplicaRead(reads));
  if (read == nullptr) return MainRoute();
  return RouteTo(read->second->replica(), read->second->id());
}

absl::StatusOr<Client::Route> Client::RouteFor(const v1::RunChainRequest& chain) {
  HandleReads reads;
  for (int i = 0; i < chain.steps_size(); ++i) {
    AddHandleReads(
        chain.steps(i).inputs(), absl::StrCat("steps[", i, "]."),
        [](const v1::ChainInput& input) { return input.has_tensor() ? &input.tensor() : nullptr; },
        reads);
  }
  ASSIGN_OR_RETURN(const HandleReads::value_type* read, ReplicaRead(reads));
  if (read == nullptr) return MainRoute();
  return RouteTo(read->second->replica(), read->second->id());
}

namespace {
thread_local std::string current_traceparent;
}  // namespace

TraceScope::TraceScope(std::string traceparent)
    : previous_(std::exchange(current_traceparent, std::move(traceparent))) {}
TraceScope::~TraceScope() { current_traceparent = std::move(previous_); }
const std::string& TraceScope::Current() { return current_traceparent; }

absl::Status Client::Prepare(grpc::ClientContext& context) const {
  RETURN_IF_ERROR(target_status_);
  if (!current_traceparent.empty()) context.AddMetadata("traceparent", current_traceparent);
  if (options_.deadline != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.deadline));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Client::CheckHealth(const std::string& service) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health_stub_->Check(&context, request, &response);
  if (!status.ok()) return Failed(status, MainRoute());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

absl::Status Client::Failed(const grpc::Status& status, const Route& route) const {
  absl::Status failed =
      ExplainClosedConnection(FromGrpcStatus(status), options_.security.enabled());
  // A replica that answered UNAVAILABLE itself did so over a ready
  // connection; any other state means the call never got through.
  if (route.replica.empty() || failed.code() != absl::StatusCode::kUnavailable ||
      route.channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
    return failed;
  }
  return absl::UnavailableError(absl::StrCat("replica ", route.replica, route.holding,
                                             " is unreachable: ", failed.message()));
}

void Client::Report(Progress::Direction direction, int64_t done, int64_t total) const {
  if (options_.progress) options_.progress(Progress{direction, done, total});
}

absl::StatusOr<Result> Client::Run(const v1::RunRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  ASSIGN_OR_RETURN(const Route route, RouteFor(request));
  v1::RunResponse response;
  const grpc::Status status = route.stub->Run(&context, request, &response);
  if (!status.ok()) return Failed(status, route);
  return ResultFromResponse(response, &request);
}

absl::StatusOr<v1::SharedMemoryRegion> Client::RegisterSharedMemory(const std::string& region,
                                                                    const std::string& key,
                                                                    int64_t byte_size) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::RegisterSharedMemoryRequest request;
  request.set_region(region);
  request.set_key(key);
  request.set_byte_size(byte_size);
  v1::RegisterSharedMemoryResponse response;
  const grpc::Status status = stub_->RegisterSharedMemory(&context, request, &response);
  if (!status.ok()) return Failed(status, MainRoute());
  return response.region();
}

absl::Status Client::UnregisterSharedMemory(const std::string& region) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::UnregisterSharedMemoryRequest request;
  request.set_region(region);
  v1::UnregisterSharedMemoryResponse response;
  const grpc::Status status = stub_->UnregisterSharedMemory(&context, request, &response);
  if (!status.ok()) return Failed(status, MainRoute());
  return absl::OkStatus();
}

absl::StatusOr<v1::SharedMemoryStatusResponse> Client::SharedMemoryStatus(
    const std::string& region) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::SharedMemoryStatusRequest request;
  request.set_region(region);
  v1::SharedMemoryStatusResponse response;
  const grpc::Status status = stub_->SharedMemoryStatus(&context, request, &response);
  if (!status.ok()) return Failed(status, MainRoute());
  return response;
}

// Reassembles ResultParts: for each output in order, a header and then exactly
// byte_length bytes of chunks. Anything else cancels the call.
template <typename Stream>
absl::StatusOr<Result> Client::ReadResultParts(grpc::ClientContext& context, Stream& stream,
                                               const Route& route) {
  Result result;
  int64_t remaining = 0;  // bytes still due for the last output
  int64_t done = 0;
  int64_t total = 0;
  absl::Status broken;
  v1::ResultPart part;
  while (broken.ok() && stream.Read(&part)) {
    switch (part.part_case()) {
      case v1::ResultPart::kHeader: {
        v1::OutputHeader& header = *part.mutable_header();
        if (remaining != 0) {
          broken = ProtocolError(absl::StrCat("header of output ", header.index(), " arrived ",
                                              remaining, " bytes before output ",
                                              result.outputs.size() - 1, " was complete"));
        } else if (header.index() != static_cast<int64_t>(result.outputs.size())) {
          broken =
              ProtocolError(absl::StrCat("expected the header of output ", result.outputs.size(),
                                         ", got output ", header.index()));
        } else if (header.byte_length() < 0 ||
                   __builtin_add_overflow(total, header.byte_length(), &total)) {
          broken = ProtocolError(
              absl::StrCat("output ", header.index(), " has byte_length ", header.byte_length()));
        } else {
          if (result.outputs.empty()) result.backend = header.backend();
          HostTensor& tensor = result.outputs.emplace_back();
          tensor.dtype = header.dtype();
          tensor.sizes.assign(header.sizes().begin(), header.sizes().end());
          tensor.strides.assign(header.strides().begin(), header.strides().end());
          tensor.data.reserve(std::min(header.byte_length(), kMaxReserveBytes));
          remaining = header.byte_length();
          if (header.has_handle()) {
            tensor.handle = std::move(*header.mutable_handle());
            if (remaining != 0) {
              broken = ProtocolError(absl::StrCat("output ", header.index(), " was kept, yet ",
                                                  remaining, " bytes are announced for it"));
            }
          }
        }
        break;
      }
      case v1::ResultPart::kChunk: {
        const int64_t size = static_cast<int64_t>(part.chunk().size());
        if (result.outputs.empty() || size > remaining) {
          broken = ProtocolError(absl::StrCat("a chunk of ", size, " bytes exceeds what the ",
                                              "headers announced by ", size - remaining));
        } else {
          result.outputs.back().data.append(part.chunk());
          remaining -= size;
          done += size;
          Report(Progress::Direction::kDownload, done, total);
        }
        break;
      }
      case v1::ResultPart::PART_NOT_SET:
        broken = ProtocolError("an empty ResultPart");
        break;
    }
  }
  if (!broken.ok()) {
    // Cancel, drain what is already in flight, and collect the (CANCELLED) status
    // so the call is cleanly over; our own error is the one worth reporting.
    context.TryCancel();
    while (stream.Read(&part)) {
    }
    (void)stream.Finish();
    return broken;
  }
  const grpc::Status status = stream.Finish();
  if (!status.ok()) return Failed(status, route);
  if (remaining != 0) {
    return ProtocolError(absl::StrCat("the stream ended ", remaining, " bytes short of output ",
                                      result.outputs.size() - 1));
  }
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    if (result.outputs[i].handle.has_value()) continue;
    if (absl::StatusOr<int64_t> checked = CheckLayout(result.outputs[i]); !checked.ok()) {
      return ProtocolError(absl::StrCat("output ", i, ": ", checked.status().message()));
    }
  }
  return result;
}

absl::StatusOr<Result> Client::RunStream(const v1::RunRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  ASSIGN_OR_RETURN(const Route route, RouteFor(request));
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader =
      route.stub->RunStream(&context, request);
  return ReadResultParts(context, *reader, route);
}

absl::StatusOr<Result> Client::RunChain(const v1::RunChainRequest& chain) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  ASSIGN_OR_RETURN(const Route route, RouteFor(chain));
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader =
      route.stub->RunChain(&context, chain);
  return ReadResultParts(context, *reader, route);
}

absl::StatusOr<Result> Client::RunChunked(const v1::RunRequest& request, int64_t chunk_bytes) {
  if (chunk_bytes <= 0) chunk_bytes = options_.chunk_bytes;
  if (chunk_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes must be positive, got ", chunk_bytes));
  }
  // The header: the request with each input's data left out. Inputs go in name
  // order so the upload is deterministic (map order is not).
  v1::RequestPart first;
  v1::RunRequest& header = *first.mutable_request();
  CopyAllFieldsExcept(request, "inputs", &header);
  std::vector<std::pair<std::string, const std::string*>> uploads;
  int64_t total = 0;
  for (const auto& [name, tensor] : request.inputs()) {
    CopyAllFieldsExcept(tensor, "data", &(*header.mutable_inputs())[name]);
    uploads.emplace_back(name, &tensor.data());
    total += static_cast<int64_t>(tensor.data().size());
  }
  std::sort(uploads.begin(), uploads.end());

  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  ASSIGN_OR_RETURN(const Route route, RouteFor(request));
  std::unique_ptr<grpc::ClientReaderWriter<v1::RequestPart, v1::ResultPart>> stream =
      route.stub->RunChunked(&context);
  // A failed Write means the call is over (the server answered early, say with
  // INVALID_ARGUMENT for the header); Finish below reports why.
  bool writing = stream->Write(first);
  int64_t done = 0;
  Report(Progress::Direction::kUpload, done, total);
  for (const auto& [name, data] : uploads) {
    writing = writing && WriteChunks<v1::RequestPart>(
                             *stream, *data, chunk_bytes,
                             [&input = name](v1::RequestPart& part, absl::string_view piece) {
                               v1::InputChunk& chunk = *part.mutable_chunk();
                               chunk.set_input(input);
                               chunk.set_data(std::string(piece));
                             },
                             done, total);
  }
  if (writing) stream->WritesDone();
  return ReadResultParts(context, *stream, route);
}

template <typename Part, typename Stream, typename SetChunk>
bool Client::WriteChunks(Stream& stream, absl::string_view data, int64_t chunk_bytes,
                         SetChunk set_chunk, int64_t& done, int64_t total) const {
  Part part;
  for (size_t at = 0; at < data.size(); at += static_cast<size_t>(chunk_bytes)) {
    const absl::string_view piece = data.substr(at, static_cast<size_t>(chunk_bytes));
    set_chunk(part, piece);
    if (!stream.Write(part)) return false;
    done += static_cast<int64_t>(piece.size());
    Report(Progress::Direction::kUpload, done, total);
  }
  return true;
}

absl::StatusOr<v1::TensorHandle> Client::Put(const HostTensor& tensor, const PutOptions& options) {
  const int64_t chunk_bytes = options.chunk_bytes > 0 ? options.chunk_bytes : options_.chunk_bytes;
  if (chunk_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes must be positive, got ", chunk_bytes));
  }
  v1::PutPart first;
  v1::PutHeader& header = *first.mutable_header();
  header.set_dtype(tensor.dtype);
  header.mutable_sizes()->Assign(tensor.sizes.begin(), tensor.sizes.end());
  header.mutable_strides()->Assign(tensor.strides.begin(), tensor.strides.end());
  header.set_backend(options.backend);
  if (options.device_index.has_value()) header.set_device_index(*options.device_index);
  header.set_ttl_seconds(options.ttl_seconds);
  // Put takes exactly the layout's bytes; a strided tensor may hold more
  // (never read). Anything else goes as it is, for the server to judge.
  absl::string_view data = tensor.data;
  if (absl::StatusOr<int64_t> bytes = LayoutBytes(tensor);
      bytes.ok() && !tensor.strides.empty() && *bytes < static_cast<int64_t>(data.size())) {
    data = data.substr(0, static_cast<size_t>(*bytes));
  }
  const int64_t total = static_cast<int64_t>(data.size());

  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  const Route route = RouteTo(options.replica, "");
  v1::TensorHandle handle;
  std::unique_ptr<grpc::ClientWriter<v1::PutPart>> stream = route.stub->Put(&context, &handle);
  int64_t done = 0;
  Report(Progress::Direction::kUpload, done, total);
  if (stream->Write(first) &&
      WriteChunks<v1::PutPart>(
          *stream, data, chunk_bytes,
          [](v1::PutPart& part, absl::string_view piece) { part.set_chunk(std::string(piece)); },
          done, total)) {
    stream->WritesDone();
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) return Failed(status, route);
  return handle;
}

absl::StatusOr<HostTensor> Client::Fetch(const v1::TensorHandle& handle,
                                         absl::Span<const int64_t> strides) {
  return FetchVia(RouteTo(handle.replica(), handle.id()), handle.id(), strides);
}

absl::StatusOr<HostTensor> Client::Fetch(const std::string& id, absl::Span<const int64_t> strides) {
  return FetchVia(MainRoute(), id, strides);
}

absl::StatusOr<HostTensor> Client::FetchVia(const Route& route, const std::string& id,
                                            absl::Span<const int64_t> strides) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::FetchRequest request;
  request.set_id(id);
  request.mutable_strides()->Assign(strides.begin(), strides.end());
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = route.stub->Fetch(&context, request);
  ASSIGN_OR_RETURN(Result result, ReadResultParts(context, *reader, route));
  if (result.outputs.size() != 1 || result.outputs[0].handle.has_value()) {
    return ProtocolError(absl::StrCat("Fetch answered ", result.outputs.size(),
                                      " outputs; expected one tensor with its data"));
  }
  return std::move(result.outputs[0]);
}

}  // namespace tensorop::client
