// TensorOp.RunStream: one request, each output as a header then data chunks.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status_macros.h"
#include "server/auth.h"
#include "server/guarded.h"
#include "server/idle_watchdog.h"
#include "server/memory_budget.h"
#include "server/pipeline.h"
#include "server/request_log.h"
#include "server/response_writer.h"
#include "server/scheduler.h"
#include "server/service.h"
#include "server/status_map.h"

namespace tensorop::server {

// ---------------------------------------------------------------------------
// RunStream

class TensorOpService::StreamReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamReactor(TensorOpService* service, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer* request)
      : service_(service),
        request_bytes_(request),
        stop_(CallStopCheck(context)),
        watch_(service->idle_.Watch(context)),
        reservation_(service->budget_->Empty()) {
    record_.method = "RunStream";
    record_.identity = PeerIdentity(*context);
    absl::Status status = Guarded([&] {
      RETURN_IF_ERROR(reservation_.Grow(static_cast<int64_t>(request->Length()),
                                        "RunStream: the request as received"));
      return service_->Submit([this] { Work(); });
    });
    if (!status.ok()) Done(status);
  }

  void OnWriteDone(bool ok) override {
    watch_->Disarm();
    if (!ok) {
      Done(WriteFailed());
      return;
    }
    WriteNext();
  }

  void OnDone() override {
    watch_->Done();
    delete this;
  }

 private:
  // On a scheduler worker.
  void Work() {
    absl::Status status = Guarded([&]() -> absl::Status {
      RETURN_IF_ERROR(ParseRequest(*request_bytes_, "RunStream", reservation_, &request_));
      ReleaseRequestBytes(request_bytes_, reservation_);
      const absl::Time start = record_.start;
      std::string identity = std::move(record_.identity);
      record_ = DescribeRequest("RunStream", request_);
      record_.start = start;
      record_.identity = std::move(identity);
      ASSIGN_OR_RETURN(Placement placement, service_->Place(request_));
      record_.backend = placement.label;
      ASSIGN_OR_RETURN(ResultParts parts,
                       ExecuteIntoParts(request_, service_->options_, *service_->scheduler_,
                                        placement, stop_, reservation_, record_));
      parts_.emplace(std::move(parts));
      request_.Clear();  // the inputs are done with; only the outputs stream
      return absl::OkStatus();
    });
    if (!status.ok()) {
      Done(status);
      return;
    }
    WriteNext();
  }

  // One write in flight at a time: the next starts from OnWriteDone.
  void WriteNext() {
    const absl::StatusOr<bool> more = parts_->SerializeNext(&write_buffer_, reservation_);
    if (!more.ok()) {
      Done(more.status());
      return;
    }
    if (*more) {
      watch_->Arm();
      StartWrite(&write_buffer_);
      return;
    }
    record_.bytes_out = parts_->total_bytes();
    Done(absl::OkStatus());
  }

  absl::Status WriteFailed() const {
    return watch_->expired() ? service_->idle_.IdleStatus() : WriteFailure(stop_);
  }

  void Done(const absl::Status& status) {
    service_->RecordOutcome(record_, status);
    Finish(ToGrpcStatus(status));
  }

  TensorOpService* const service_;
  const OpenCall open_call_{service_->open_calls_};
  const grpc::ByteBuffer* const request_bytes_;  // owned by gRPC until OnDone
  const StopCheck stop_;
  const std::shared_ptr<IdleWatch> watch_;
  MemoryBudget::Reservation reservation_;
  v1::RunRequest request_;
  CallRecord record_;
  std::optional<ResultParts> parts_;
  grpc::ByteBuffer write_buffer_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* TensorOpService::RunStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new StreamReactor(this, context, request);
}

}  // namespace tensorop::server
