// TensorOp.RunChunked: a RequestPart stream (the request, then input chunks)
// answered like RunStream.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/checked_math.h"
#include "core/dtype.h"
#include "core/guarded.h"
#include "core/operator.h"
#include "core/plan/byte_range.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"
#include "server/memory/buffer_pool.h"
#include "server/memory/memory_budget.h"
#include "server/memory/zero_bytes.h"
#include "server/native/result_writer.h"
#include "server/native/service.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/response_writer.h"
#include "server/placement/scheduler.h"
#include "server/security/auth.h"
#include "server/security/call_origin.h"
#include "server/telemetry/request_log.h"
#include "server/transport/idle_watchdog.h"
#include "server/wire/chunk_part.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {
namespace {

// The data bytes `tensor` declares (packed, or spanned by its strides), when
// that is computable; used only to size buffers ahead.
std::optional<int64_t> DeclaredBytes(const v1::Tensor& tensor) {
  std::optional<DType> dtype = DTypeFromInt(tensor.dtype());
  if (!dtype.has_value()) return std::nullopt;
  const bool packed = tensor.strides_size() == 0;
  if (!packed && tensor.strides_size() != tensor.sizes_size()) return std::nullopt;
  std::optional<int64_t> elements = 1;
  for (int i = 0; i < tensor.sizes_size() && elements.has_value(); ++i) {
    const int64_t size = tensor.sizes(i);
    if (size <= 0) return std::nullopt;
    if (packed) {
      elements = CheckedMul(*elements, size);
    } else {
      if (tensor.strides(i) < 0) return std::nullopt;
      std::optional<int64_t> span = CheckedMul(size - 1, tensor.strides(i));
      elements = span.has_value() ? CheckedAdd(*elements, *span) : std::nullopt;
    }
  }
  if (!elements.has_value()) return std::nullopt;
  return CheckedMul(*elements, ElementSize(*dtype));
}

}  // namespace

// ---------------------------------------------------------------------------
// RunChunked
//
// The request part is reserved before it is parsed and each chunk before it is
// stored, as the upload grows (never the total the request declares); the
// upload is cancelled when no part arrives for --idle_timeout_seconds. Where
// the op's plan is known before the bytes arrive, only the bytes it reads are
// stored (ReadWindow).

class TensorOpService::ChunkedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ChunkedReactor(TensorOpService* service, grpc::CallbackServerContext* context)
      : service_(service),
        stop_(CallStopCheck(context)),
        watch_(service->engine_.idle().Watch(context)),
        reservation_(open_call_.Reservation()),
        handles_{.store = service->engine_.options().handles, .caller = CallerOf(*context)} {
    record_.method = "RunChunked";
    SetCallOrigin(*context, record_);
    watch_->Arm();
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    watch_->Touch();
    if (!ok) {
      watch_->Disarm();
      HalfClosed();
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

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    if (!ok) {
      writer_.Fail(watch_->expired() ? service_->engine_.idle().IdleStatus() : WriteFailure(stop_));
      return;
    }
    writer_.WriteNext();
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // Parses the part in read_buffer_ and takes it in.
  absl::Status Read() {
    RETURN_IF_ERROR(CheckReceivedBytes(read_buffer_, service_->engine_.options().max_message_bytes,
                                       absl::StrCat("RunChunked: part ", parts_read_)));
    if (have_request_) {
      // The common chunk, appended from the received slices (no parse copy);
      // any other part, or a name that is no input, goes through the parser.
      if (std::optional<ChunkPartView> chunk = ChunkPartView::Of(read_buffer_)) {
        auto upload = uploads_.find(chunk->input());
        if (upload != uploads_.end()) {
          bytes_in_ += chunk->data_bytes();
          RETURN_IF_ERROR(CheckBytes());
          return Take(upload->first, upload->second, chunk->data_bytes(),
                      [&](int64_t from, int64_t length, std::byte* out) {
                        chunk->CopyDataTo(from, length, out);
                      });
        }
      }
    }
    v1::RequestPart part;
    if (!have_request_) {
      // The request part: reserved (bounded from its tags) before parsing, and
      // kept, since the request is held until the call ends.
      absl::StatusOr<int64_t> bound =
          ParsedBytesBound(read_buffer_, *v1::RequestPart::descriptor());
      if (bound.ok()) {
        RETURN_IF_ERROR(
            ReserveParsing(*bound, "RunChunked: parsing the request part", reservation_));
      }
    }
    if (!grpc::SerializationTraits<v1::RequestPart>::Deserialize(&read_buffer_, &part).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("RunChunked: part ", parts_read_,
                                                     " is not a valid tensorop.v1.RequestPart"));
    }
    return Accept(part);
  }

  // Takes one part in; a non-OK status ends the call with it.
  absl::Status Accept(v1::RequestPart& part) {
    if (!have_request_) {
      if (!part.has_request()) {
        return absl::InvalidArgumentError(
            "RunChunked: the first part must be a request, not a chunk");
      }
      RETURN_IF_ERROR(CheckIdBytes(part.request().id(), "request.id"));
      request_ = std::move(*part.mutable_request());
      have_request_ = true;
      Redescribe(record_, DescribeRequest("RunChunked", request_));
      for (const auto& [name, tensor] : request_.inputs()) {
        bytes_in_ += static_cast<int64_t>(tensor.data().size());
      }
      RETURN_IF_ERROR(CheckBytes());
      RETURN_IF_ERROR(ReservePlanning(request_.outputs_size(), "RunChunked", "request",
                                      request_.id(), reservation_));
      SizeUploads();
      // Bytes the request part carries inline start their input's upload.
      for (auto& [name, tensor] : *request_.mutable_inputs()) {
        const std::string& data = tensor.data();
        const int64_t inline_bytes = static_cast<int64_t>(data.size());
        if (inline_bytes == 0) continue;
        // Reserved with the request part: the upload takes that over.
        InputBuffer& upload = uploads_.find(name)->second;
        upload.TakeOver(reservation_, inline_bytes);
        RETURN_IF_ERROR(
            Take(name, upload, inline_bytes, [&](int64_t from, int64_t length, std::byte* out) {
              std::memcpy(out, data.data() + from, static_cast<size_t>(length));
            }));
        std::string().swap(*tensor.mutable_data());  // freed, not only cleared
      }
      return absl::OkStatus();
    }
    switch (part.part_case()) {
      case v1::RequestPart::kChunk: {
        const v1::InputChunk& chunk = part.chunk();
        auto upload = uploads_.find(chunk.input());
        if (upload == uploads_.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("chunk.input: \"", chunk.input(), "\" is not an input of the request"));
        }
        const int64_t bytes = static_cast<int64_t>(chunk.data().size());
        bytes_in_ += bytes;
        RETURN_IF_ERROR(CheckBytes());
        return Take(upload->first, upload->second, bytes,
                    [&](int64_t from, int64_t length, std::byte* out) {
                      std::memcpy(out, chunk.data().data() + from, static_cast<size_t>(length));
                    });
      }
      case v1::RequestPart::kRequest:
        return absl::InvalidArgumentError(absl::StrCat(
            "RunChunked: part ", parts_read_, " is a second request; only the first part is one"));
      case v1::RequestPart::PART_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("RunChunked: part ", parts_read_, " has neither a request nor a chunk"));
  }

  // Takes `bytes` more of input `name` into `upload`; copy(from, length, out)
  // copies `length` of them, from the `from`th on, to `out`. An input with a
  // read window stores only the bytes in it, at their place in the buffer
  // (reserved as they come); the others are counted and dropped: no copy, and
  // no memory, since the buffer's untouched pages never become resident.
  // Bytes past the buffer are only counted: Work refuses such an input's size.
  template <typename CopyFn>
  absl::Status Take(const std::string& name, InputBuffer& upload, int64_t bytes, CopyFn copy) {
    auto window = windows_.find(name);
    if (window == windows_.end()) {
      RETURN_IF_ERROR(Reserve(name, bytes, upload));
      copy(0, bytes, upload.Extend(bytes));
      return absl::OkStatus();
    }
    const ByteRange read = window->second.read;
    const int64_t start = window->second.received;
    window->second.received += bytes;
    const int64_t from = std::max(start, read.begin);
    const int64_t to = std::min(window->second.received, read.end);
    if (from >= to) return absl::OkStatus();
    const int64_t stored = to - read.begin;  // the window fills front to back
    RETURN_IF_ERROR(upload.HoldAtLeast(stored, What(name, stored)));
    copy(from - start, to - from, upload.At(from));
    return absl::OkStatus();
  }

  // The read window of each input whose bytes the op reads only in part, where
  // that is known before they arrive: not a scatter or gather (its plan
  // depends on the indices' values), every input carried in the call and packed (so a wrong
  // size is refused whatever the bytes), and the request planned with zeros
  // standing in for them (address space only). Inputs under
  // BufferPool::kMinBytes, and those the op reads more than half of, are
  // stored whole, in the pool's resident buffers: a fresh buffer's page
  // faults would cost more than the copy they save.
  // This runs in a reaction, so only for requests whose planning is small
  // (at most 64 outputs: a split may ask for millions).
  void FindReadWindows() {
    constexpr int kMaxPlannedOutputs = 64;
    if (!ValuesInputOf(request_).empty() || request_.outputs_size() > kMaxPlannedOutputs) return;
    absl::StatusOr<OpRequest> op = ToOpRequest(request_);
    if (!op.ok()) return;
    std::map<std::string, int64_t, std::less<>> declared;
    for (NamedTensor& input : op->inputs) {
      auto tensor = request_.inputs().find(input.name);
      if (tensor == request_.inputs().end() || tensor->second.has_shared_memory() ||
          tensor->second.has_handle() || tensor->second.strides_size() != 0) {
        return;
      }
      std::optional<int64_t> bytes = DeclaredBytes(tensor->second);
      if (!bytes.has_value()) return;
      absl::StatusOr<std::span<const std::byte>> stand_in = ZeroBytes(*bytes);
      if (!stand_in.ok()) return;
      input.tensor.data = *stand_in;
      declared.emplace(input.name, *bytes);
    }
    absl::StatusOr<ExecutionPlan> plan = PlanOperator(*op, service_->engine_.options().limits);
    if (!plan.ok()) return;
    const std::vector<ByteRange> reads = InputReadRanges(*plan);
    for (size_t slot = 0; slot < reads.size(); ++slot) {
      const int64_t bytes = declared.find(plan->input_names[slot])->second;
      if (bytes >= static_cast<int64_t>(BufferPool::kMinBytes) && reads[slot].size() <= bytes / 2) {
        windows_.emplace(std::string(plan->input_names[slot]), ReadWindow{.read = reads[slot]});
      }
    }
  }

  // Makes room in `upload` (input `name`) for `chunk_bytes` more, reserving
  // first what its buffer comes to hold: its bytes as they arrive while they
  // fit the capacity sized ahead (address space whose pages only the bytes
  // touch), else the doubled capacity, with the old buffer for the moment of
  // the copy.
  absl::Status Reserve(const std::string& name, int64_t chunk_bytes, InputBuffer& upload) {
    const int64_t needed = upload.size() + chunk_bytes;
    if (needed <= upload.capacity()) return upload.HoldAtLeast(needed, What(name, needed));
    return upload.Resize(std::max(needed, 2 * upload.capacity()),
                         service_->engine_.options().buffer_pool, What(name, needed));
  }

  std::string What(const std::string& name, int64_t bytes) const {
    return absl::StrCat("RunChunked: input ", Quoted(name), " of request ", Quoted(request_.id()),
                        " at ", bytes, " bytes");
  }

  // Refused as soon as the uploaded bytes pass the limit, not after storing them.
  absl::Status CheckBytes() const {
    const int64_t limit = service_->engine_.options().limits.max_request_bytes;
    if (bytes_in_ <= limit) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat("RunChunked: the inputs reached ", bytes_in_,
                                                     " bytes, more than the server's limit of ",
                                                     limit, " bytes (--max_request_bytes)"));
  }

  // An upload per input, sized for the bytes its description declares so the
  // chunks append without moving, but only when the declared total fits the
  // request limit and what the buffers come to hold (an input's read window,
  // else all its bytes) fits the memory budget, so a declaration alone never
  // allocates what the server could not hold. Fresh buffers are address space
  // (pages are touched, and reserved in the budget, as bytes arrive); a
  // buffer pool's resident one is reserved whole at once, as the pool held it.
  void SizeUploads() {
    std::map<std::string, int64_t, std::less<>> declared;
    std::optional<int64_t> total = 0;
    for (auto& [name, tensor] : *request_.mutable_inputs()) {
      uploads_.try_emplace(name, reservation_.Sibling());
      std::optional<int64_t> bytes = DeclaredBytes(tensor);
      if (!bytes.has_value()) continue;
      declared.emplace(name, *bytes);
      total = total.has_value() ? CheckedAdd(*total, *bytes) : std::nullopt;
    }
    if (!total.has_value() || *total > service_->engine_.options().limits.max_request_bytes) return;
    FindReadWindows();
    int64_t held = 0;
    for (const auto& [name, bytes] : declared) {
      auto window = windows_.find(name);
      held += window != windows_.end() ? window->second.read.size() : bytes;
    }
    if (held > service_->engine_.budget().limit()) {
      windows_.clear();
      return;
    }
    for (const auto& [name, bytes] : declared) {
      // A read window's buffer is fresh address space, never a pool's kept
      // one: the bytes it drops are never touched. Else, where the buffer
      // cannot be had, it is sized as chunks come.
      const bool windowed = windows_.contains(name);
      if (!uploads_.find(name)->second.SizeAhead(
              bytes, windowed ? nullptr : service_->engine_.options().buffer_pool,
              What(name, bytes))) {
        windows_.erase(name);
      }
    }
  }

  void HalfClosed() {
    if (absl::Status stop = stop_(); !stop.ok()) {
      Done(watch_->expired() ? service_->engine_.idle().IdleStatus() : stop);
      return;
    }
    if (!have_request_) {
      Done(absl::InvalidArgumentError("RunChunked: the stream ended before a request part"));
      return;
    }
    absl::Status status = service_->engine_.Dispatch(
        request_, record_, [this](Placement& placement) { Work(placement); });
    if (!status.ok()) Done(status);
  }

  // On a scheduler worker.
  // The result goes out while it is computed where it can, as RunStream's.
  void Work(Placement& placement) {
    StreamWhileComputing streaming = writer_.Streaming(4 * service_->engine_.options().chunk_bytes);
    std::optional<ResultParts> computed;
    absl::Status status = Guarded([&]() -> absl::Status {
      UploadedInputs uploaded = Spans(uploads_);
      for (const auto& [name, window] : windows_) {
        // All its bytes came: the buffer whole, what the op reads in place.
        // Else zeros of the size that came, which validation refuses (the
        // input is packed) before anything is read.
        const InputBuffer& upload = uploads_.find(name)->second;
        if (window.received == upload.capacity()) {
          uploaded[name] = InputSource::Uploaded(upload.Room());
        } else {
          ASSIGN_OR_RETURN(const std::span<const std::byte> zeros, ZeroBytes(window.received));
          uploaded[name] = InputSource::Uploaded(zeros);
        }
      }
      CallContext call = service_->engine_.Call(request_, placement, stop_, reservation_);
      call.uploaded = &uploaded;
      call.handles = &handles_;
      absl::StatusOr<ResultParts> parts =
          Execute(call, IntoParts{.record = &record_, .streaming = &streaming});
      // The uploaded inputs are done with: freed, and with them their
      // reservations, while the rest of the result streams.
      uploads_.clear();
      request_.Clear();
      if (!parts.ok()) return parts.status();
      computed.emplace(*std::move(parts));
      return absl::OkStatus();
    });
    if (streaming.started) {
      // The writer runs already; it finishes the call once this ends.
      streaming.progress->Finish(status);
      return;
    }
    if (!status.ok()) {
      Done(status);
      return;
    }
    writer_.Start(*std::move(computed));
  }

  void Done(const absl::Status& status) {
    record_.bytes_in = bytes_in_;
    service_->engine_.RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const Engine::OpenCall open_call_{service_->engine_, "RunChunked"};
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  const HandleAccess handles_;
  CallRecord record_;
  int64_t parts_read_ = 0;
  bool have_request_ = false;
  v1::RunRequest request_;  // the request part, its inputs' bytes moved to uploads_
  InputBuffers uploads_;    // every input's bytes, while the task runs
  // An input whose op reads only `read` of its bytes: `received` counts them
  // all, the buffer holds those in `read`.
  struct ReadWindow {
    ByteRange read;
    int64_t received = 0;
  };
  std::map<std::string, ReadWindow, std::less<>> windows_;
  int64_t bytes_in_ = 0;
  grpc::ByteBuffer read_buffer_;
  ResultWriter writer_{[this](const grpc::ByteBuffer* part) {
                         watch_->Arm();
                         StartWrite(part);
                       },
                       [this](const absl::Status& status, int64_t bytes_out) {
                         if (status.ok()) record_.bytes_out = bytes_out;
                         Done(status);
                       }};
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* TensorOpService::RunChunked(
    grpc::CallbackServerContext* context) {
  return new ChunkedReactor(this, context);
}

}  // namespace tensorop::server
