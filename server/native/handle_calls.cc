// TensorOp.Put, Release and ListHandles: tensors that stay on the server
// (server/data/handle_store.h). Fetch is a RunStream of the handle
// (server/native/run_stream_reactor.cc).
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "core/validate/tensor.h"
#include "server/data/handle_store.h"
#include "server/memory/input_buffer.h"
#include "server/memory/memory_budget.h"
#include "server/native/service.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/raw_unary.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/request_log.h"
#include "server/transport/idle_watchdog.h"
#include "server/wire/convert.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {
namespace {

// The ranks a handle may have: any that some operator takes.
constexpr RankRule kPutRanks{.min_rank = 1, .max_rank = 32, .allow_zero_sizes = true, .op = "Put"};

absl::Status NoStore() { return absl::FailedPreconditionError("this server keeps no handles"); }

}  // namespace

// ---------------------------------------------------------------------------
// Put
//
// The header's layout is validated and its bytes counted in the client's
// quota before any chunk is taken; the memory budget gets them as they
// arrive (a Put that announces a large tensor and trickles holds what it
// sent, not what it announced); each part is reserved while it is parsed;
// the upload is cancelled when no part arrives for --idle_timeout_seconds.
// Chunks are copied into the handle's buffer as they arrive, so a Put holds
// its tensor once.

class TensorOpService::PutReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PutReactor(TensorOpService* service, grpc::CallbackServerContext* context,
             grpc::ByteBuffer* response)
      : service_(service),
        response_(response),
        watch_(service->engine_.idle().Watch(context)),
        caller_(CallerOf(*context)) {
    record_.method = "Put";
    SetCallOrigin(*context, record_);
    if (service_->engine_.options().handles == nullptr) {
      Done(NoStore());
      return;
    }
    // A draining replica makes no new handles: they would go with it.
    if (absl::Status admitted = service_->engine_.options().handles->Admit(/*reads_handle=*/false);
        !admitted.ok()) {
      Done(admitted);
      return;
    }
    watch_->Arm();
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    watch_->Touch();
    if (!ok) {
      watch_->Disarm();
      if (!staging_.has_value()) {
        Done(Guarded([&] { return Finished(); }));
        return;
      }
      // The upload to the device waits for it: a worker's work, not a reaction's.
      const absl::Status queued = service_->engine_.Submit([this] {
        Done(Guarded([&] {
          RETURN_IF_ERROR(Complete());
          RETURN_IF_ERROR(
              service_->engine_.options().handles->Upload(pending_, staging_->bytes(), NeverStop));
          staging_.reset();  // and its reservation
          return Finished();
        }));
      });
      if (!queued.ok()) Done(queued);
      return;
    }
    ++parts_read_;
    absl::Status status = Guarded([&] { return Read(); });
    read_buffer_.Clear();
    if (!status.ok()) {
      watch_->Disarm();
      Done(status);
      return;
    }
    StartRead(&read_buffer_);
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // Parses the part in read_buffer_ and takes it in.
  absl::Status Read() {
    // Reserved (bounded from its tags) only while the part is parsed and copied.
    MemoryBudget::Reservation parsing = open_call_.Reservation();
    v1::PutPart part;
    const std::string what = absl::StrCat("Put: part ", parts_read_);
    RETURN_IF_ERROR(
        CheckReceivedBytes(read_buffer_, service_->engine_.options().max_message_bytes, what));
    RETURN_IF_ERROR(ParseMessage(read_buffer_, what, parsing, &part));
    read_buffer_.Clear();  // the part's copy is what stays
    if (!pending_) {
      if (!part.has_header()) {
        return absl::InvalidArgumentError("Put: the first part must be a header, not a chunk");
      }
      return Begin(part.header());
    }
    if (part.has_header()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Put: part ", parts_read_, " is a second header; send one, then chunks"));
    }
    const std::string& chunk = part.chunk();
    const int64_t expected = pending_.layout().buffer_bytes();
    if (static_cast<int64_t>(chunk.size()) > expected - received_) {
      return absl::InvalidArgumentError(
          absl::StrCat("Put: part ", parts_read_, " brings the data to ", received_ + chunk.size(),
                       " bytes; the header's layout takes exactly ", expected));
    }
    const int64_t bytes = static_cast<int64_t>(chunk.size());
    RETURN_IF_ERROR(pending_.Written(bytes));
    if (staging_.has_value()) {
      RETURN_IF_ERROR(staging_->HoldAtLeast(received_ + bytes, StagingWhat()));
    }
    std::memcpy(staging_.has_value() ? staging_->Extend(bytes) : pending_.data() + received_,
                chunk.data(), chunk.size());
    received_ += static_cast<int64_t>(chunk.size());
    return absl::OkStatus();
  }

  // The OpenCL device a Put to `header` goes to, or -1 for host memory.
  absl::StatusOr<int> DeviceOf(const v1::PutHeader& header) const {
    switch (header.backend()) {
      case v1::AUTO:
      case v1::CPU:
        if (header.has_device_index()) {
          return absl::InvalidArgumentError(absl::StrCat("header.device_index is ",
                                                         header.device_index(),
                                                         ": a handle on the CPU has no device"));
        }
        return -1;
      case v1::OPENCL: {
        const DevicePool* devices = service_->engine_.options().handles->options().devices;
        if (devices == nullptr) {
          return absl::FailedPreconditionError(
              "header.backend is OPENCL, but this server has no OpenCL device");
        }
        absl::StatusOr<int> device =
            devices->Choose(header.has_device_index() ? header.device_index() : -1);
        if (device.status().code() == absl::StatusCode::kInvalidArgument) {
          return absl::InvalidArgumentError(absl::StrCat("header.", device.status().message()));
        }
        return device;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("header.backend: ", header.backend(), " is not a backend"));
    }
  }

  absl::Status Begin(const v1::PutHeader& header) {
    ASSIGN_OR_RETURN(const DType dtype, ToDType(header.dtype(), "header.dtype"));
    ASSIGN_OR_RETURN(const int device, DeviceOf(header));
    if (header.ttl_seconds() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("header.ttl_seconds must be >= 0, got ", header.ttl_seconds()));
    }
    const TensorDesc desc{.dtype = dtype,
                          .sizes = {header.sizes().begin(), header.sizes().end()},
                          .strides = {header.strides().begin(), header.strides().end()}};
    const Limits& limits = service_->engine_.options().limits;
    ASSIGN_OR_RETURN(const Layout layout, ValidateInputLayout(desc, "header", kPutRanks, limits));
    if (layout.buffer_bytes() > limits.max_request_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "header: the tensor takes ", layout.buffer_bytes(),
          " bytes, more than the server's request limit of ", limits.max_request_bytes, " bytes"));
    }
    ASSIGN_OR_RETURN(
        pending_,
        service_->engine_.options().handles->Reserve(
            caller_, layout,
            absl::StrCat("a Put of ", DTypeName(dtype), " ", FormatList(desc.sizes)), device,
            /*charge_as_written=*/true));
    if (device >= 0) {
      // The bytes gather in host memory (reserved as they arrive: its pages
      // are touched only as they are written), then go to the device in one
      // upload.
      staging_.emplace(open_call_.Reservation());
      if (!staging_->SizeAhead(std::max<int64_t>(layout.buffer_bytes(), 1), /*pool=*/nullptr,
                               StagingWhat())) {
        return absl::ResourceExhaustedError(absl::StrCat("out of memory for ", StagingWhat()));
      }
    }
    ttl_ = absl::Seconds(std::min<int64_t>(header.ttl_seconds(), int64_t{1} << 40));
    record_.dtype = std::string(DTypeName(dtype));
    record_.backend =
        device >= 0 ? service_->engine_.options().handles->options().devices->Label(device) : "cpu";
    return absl::OkStatus();
  }

  // What the staged bytes are reserved for.
  std::string StagingWhat() const {
    return absl::StrCat("Put: the bytes on their way to OpenCL device ", pending_.device_index());
  }

  // The client half-closed: whether every byte came.
  absl::Status Complete() const {
    if (!pending_) return absl::InvalidArgumentError("Put: the stream ended before a header");
    const int64_t expected = pending_.layout().buffer_bytes();
    if (received_ != expected) {
      return absl::InvalidArgumentError(absl::StrCat("Put: the stream ended after ", received_,
                                                     " of the ", expected,
                                                     " bytes the header's layout takes"));
    }
    return absl::OkStatus();
  }

  // Then the handle is made.
  absl::Status Finished() {
    RETURN_IF_ERROR(Complete());
    HandleStore& store = *service_->engine_.options().handles;
    std::shared_ptr<const ResidentTensor> tensor = store.Commit(std::move(pending_), ttl_);
    v1::TensorHandle handle;
    ToProtoHandle(*tensor, store.replica(), &handle);
    SerializeInto(handle, response_);
    record_.id = ShortId(tensor->id());
    record_.bytes_in = received_;
    return absl::OkStatus();
  }

  void Done(const absl::Status& status) {
    service_->engine_.RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const Engine::OpenCall open_call_{service_->engine_, "Put"};
  grpc::ByteBuffer* const response_;
  const std::shared_ptr<IdleWatch> watch_;
  const HandleCaller caller_;
  CallRecord record_;
  int64_t parts_read_ = 0;
  HandleStore::Pending pending_;  // the tensor's buffer, once the header came
  // For a tensor on a device: its bytes as they arrive, reserved as they
  // touch the buffer's pages.
  std::optional<InputBuffer> staging_;
  int64_t received_ = 0;
  absl::Duration ttl_;
  grpc::ByteBuffer read_buffer_;
};

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorOpService::Put(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PutReactor(this, context, response);
}

// ---------------------------------------------------------------------------
// Release and ListHandles: answered at once.

grpc::ServerUnaryReactor* TensorOpService::Release(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return AnswerRaw<v1::ReleaseRequest, v1::ReleaseResponse>(
      context, request, response, engine_.budget(), engine_.options().max_message_bytes,
      CallOrigin(*context, "Release"), [&](const auto& in, auto&) {
        return ReleaseAnswer(engine_.options().handles, CallerOf(*context), in);
      });
}

grpc::ServerUnaryReactor* TensorOpService::ListHandles(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return AnswerRaw<v1::ListHandlesRequest, v1::ListHandlesResponse>(
      context, request, response, engine_.budget(), engine_.options().max_message_bytes,
      CallOrigin(*context, "ListHandles"), [&](const auto& in, auto& out) {
        return ListHandlesAnswer(engine_.options().handles, CallerOf(*context), in, out);
      });
}

}  // namespace tensorop::server
