#include "client/client.h"

#include <algorithm>
#include <map>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
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

HostTensor HostTensorFromProto(v1::Tensor& tensor) {
  HostTensor host;
  host.dtype = tensor.dtype();
  host.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  host.strides.assign(tensor.strides().begin(), tensor.strides().end());
  host.data = std::move(*tensor.mutable_data());
  return host;
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

absl::Status ProtocolError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("server broke the protocol: ", what));
}

}  // namespace

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
    const bool in_region = request != nullptr && i < request->outputs_size() &&
                           request->outputs(i).has_shared_memory();
    if (in_region) {
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
  Connect(CreateChannel(channel_target.ok() ? *channel_target : std::string(target),
                        options_.max_message_bytes, options_.skip_unhealthy_replicas,
                        credentials.ok() ? *credentials : nullptr));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : options_(std::move(options)) {
  Connect(std::move(channel));
}

void Client::Connect(std::shared_ptr<grpc::Channel> channel) {
  stub_ = v1::TensorOp::NewStub(channel);
  health_stub_ = grpc::health::v1::Health::NewStub(std::move(channel));
}

absl::Status Client::Prepare(grpc::ClientContext& context) const {
  RETURN_IF_ERROR(target_status_);
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
  if (!status.ok()) return Failed(status);
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

absl::Status Client::Failed(const grpc::Status& status) const {
  return ExplainClosedConnection(FromGrpcStatus(status), options_.security.enabled());
}

void Client::Report(Progress::Direction direction, int64_t done, int64_t total) const {
  if (options_.progress) options_.progress(Progress{direction, done, total});
}

absl::StatusOr<Result> Client::Run(const v1::RunRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::RunResponse response;
  const grpc::Status status = stub_->Run(&context, request, &response);
  if (!status.ok()) return Failed(status);
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
  if (!status.ok()) return Failed(status);
  return response.region();
}

absl::Status Client::UnregisterSharedMemory(const std::string& region) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::UnregisterSharedMemoryRequest request;
  request.set_region(region);
  v1::UnregisterSharedMemoryResponse response;
  const grpc::Status status = stub_->UnregisterSharedMemory(&context, request, &response);
  if (!status.ok()) return Failed(status);
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
  if (!status.ok()) return Failed(status);
  return response;
}

// Reassembles ResultParts: for each output in order, a header and then exactly
// byte_length bytes of chunks. Anything else cancels the call.
template <typename Stream>
absl::StatusOr<Result> Client::ReadResultParts(grpc::ClientContext& context, Stream& stream) {
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
  if (!status.ok()) return Failed(status);
  if (remaining != 0) {
    return ProtocolError(absl::StrCat("the stream ended ", remaining, " bytes short of output ",
                                      result.outputs.size() - 1));
  }
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    if (absl::StatusOr<int64_t> checked = CheckLayout(result.outputs[i]); !checked.ok()) {
      return ProtocolError(absl::StrCat("output ", i, ": ", checked.status().message()));
    }
  }
  return result;
}

absl::StatusOr<Result> Client::RunStream(const v1::RunRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  std::unique_ptr<grpc::ClientReader<v1::ResultPart>> reader = stub_->RunStream(&context, request);
  return ReadResultParts(context, *reader);
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
  std::unique_ptr<grpc::ClientReaderWriter<v1::RequestPart, v1::ResultPart>> stream =
      stub_->RunChunked(&context);
  // A failed Write means the call is over (the server answered early, say with
  // INVALID_ARGUMENT for the header); Finish below reports why.
  bool writing = stream->Write(first);
  int64_t done = 0;
  Report(Progress::Direction::kUpload, done, total);
  v1::RequestPart part;
  for (const auto& [name, data] : uploads) {
    for (size_t at = 0; writing && at < data->size(); at += static_cast<size_t>(chunk_bytes)) {
      v1::InputChunk& chunk = *part.mutable_chunk();
      chunk.set_input(name);
      chunk.set_data(data->substr(at, static_cast<size_t>(chunk_bytes)));
      writing = stream->Write(part);
      if (writing) {
        done += static_cast<int64_t>(chunk.data().size());
        Report(Progress::Direction::kUpload, done, total);
      }
    }
  }
  if (writing) stream->WritesDone();
  return ReadResultParts(context, *stream);
}

std::vector<absl::StatusOr<Result>> Client::RunBidi(const std::vector<v1::RunRequest>& requests) {
  // Every element is overwritten: by its answer, or by the reason it has none.
  std::vector<absl::StatusOr<Result>> results(requests.size(), absl::UnknownError(""));
  std::map<std::string, size_t, std::less<>> pending;  // id -> index of the request
  for (size_t i = 0; i < requests.size(); ++i) {
    auto [it, inserted] = pending.emplace(requests[i].id(), i);
    if (!inserted) {
      const absl::Status duplicate = absl::InvalidArgumentError(
          absl::StrCat("RunBidi matches answers by id, and requests ", it->second, " and ", i,
                       " share the id \"", requests[i].id(), "\""));
      std::fill(results.begin(), results.end(), duplicate);
      return results;
    }
  }
  if (requests.empty()) return results;

  grpc::ClientContext context;
  if (absl::Status prepared = Prepare(context); !prepared.ok()) {
    std::fill(results.begin(), results.end(), prepared);
    return results;
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::RunRequest, v1::RunResponse>> stream =
      stub_->RunBidi(&context);
  // Write on a second thread while this one reads: the server answers as it
  // goes, and not reading while writing could fill both directions' windows.
  std::thread writer([&stream, &requests] {
    for (const v1::RunRequest& request : requests) {
      if (!stream->Write(request)) return;  // the call is over; Finish says why
    }
    stream->WritesDone();
  });
  absl::Status broken;
  v1::RunResponse response;
  while (stream->Read(&response)) {
    auto it = pending.find(response.id());
    if (it == pending.end()) {
      broken = ProtocolError(absl::StrCat("an answer for id \"", response.id(),
                                          "\", which no unanswered request has"));
      context.TryCancel();
      break;
    }
    const size_t index = it->second;
    pending.erase(it);
    if (response.status().code() != 0) {
      results[index] =
          absl::Status(StatusCodeFromWire(response.status().code()), response.status().message());
    } else {
      results[index] = ResultFromResponse(response, &requests[index]);
    }
  }
  if (!broken.ok()) {
    while (stream->Read(&response)) {
    }
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  if (broken.ok()) {
    broken = status.ok() ? ProtocolError("the stream ended without answering this request")
                         : Failed(status);
  }
  for (const auto& [id, index] : pending) results[index] = broken;
  return results;
}

}  // namespace tensorop::client
