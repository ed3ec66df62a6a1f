#include "server/security/health_statuses.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tensorop::server {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ServingStatus = HealthCheckResponse::ServingStatus;

}  // namespace

struct HealthStatuses::State {
  std::mutex mu;
  bool shut_down = false;
  std::map<std::string, bool> serving;  // by service name; "" is the server
  // The open Watch calls: held weakly, each one's reactor owns itself until
  // gRPC is done with it (OnDone).
  std::map<Watch*, std::weak_ptr<Watch>> watches;

  // What `service` is, for Check and Watch (under `mu`); nullopt: unknown.
  std::optional<ServingStatus> StatusOf(const std::string& service) const {
    if (shut_down) return HealthCheckResponse::NOT_SERVING;
    auto found = serving.find(service);
    if (found == serving.end()) return std::nullopt;
    return found->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  }

  // The watches of `service` (every one when null), kept alive while told.
  std::vector<std::shared_ptr<Watch>> WatchesOf(const std::string* service) const;
};

// One Watch call: the service's status now and at every change, one write at
// a time (a change during a write is sent after it, only the latest).
class HealthStatuses::Watch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watch(std::shared_ptr<State> state, std::string service)
      : state_(std::move(state)), service_(std::move(service)) {}

  const std::string& service() const { return service_; }

  // Registers the call and sends the service's status (SERVICE_UNKNOWN until
  // it is set); `self` is gRPC's hold on this reactor until OnDone.
  void Start(std::shared_ptr<Watch> self) {
    self_ = std::move(self);
    ServingStatus status = HealthCheckResponse::SERVICE_UNKNOWN;
    bool shut_down = false;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->watches.emplace(this, self_);
      status = state_->StatusOf(service_).value_or(HealthCheckResponse::SERVICE_UNKNOWN);
      shut_down = state_->shut_down;
    }
    Send(status, /*then_end=*/shut_down);
  }

  // Sends `status`; with `then_end`, ends the call once it went out.
  void Send(ServingStatus status, bool then_end) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    end_after_write_ = end_after_write_ || then_end;
    if (writing_) {
      pending_ = status;
      return;
    }
    WriteLocked(status);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the health watch stopped"));
    } else if (pending_.has_value()) {
      WriteLocked(*std::exchange(pending_, std::nullopt));
    } else if (end_after_write_) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "tensord is stopping"));
    }
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the watch"));
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->watches.erase(this);
    }
    self_.reset();  // the last hold but a Shutdown's, which may still be telling it
  }

 private:
  void WriteLocked(ServingStatus status) {
    response_.set_status(status);
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  const std::shared_ptr<State> state_;
  const std::string service_;
  std::shared_ptr<Watch> self_;
  std::mutex mu_;
  HealthCheckResponse response_;  // the write in flight
  bool writing_ = false;
  bool finished_ = false;
  bool end_after_write_ = false;
  std::optional<ServingStatus> pending_;
};

namespace {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(std::shared_ptr<HealthStatuses::State> state) : state_(std::move(state)) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    std::optional<ServingStatus> status;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      status = state_->StatusOf(request->service());
    }
    if (!status.has_value()) {
      // gRPC's default service's words, which tools and tests match.
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown"));
    } else {
      response->set_status(*status);
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  grpc::ServerWriteReactor<HealthCheckResponse>* Watch(grpc::CallbackServerContext* /*context*/,
                                                       const HealthCheckRequest* request) override {
    auto reactor = std::make_shared<HealthStatuses::Watch>(state_, request->service());
    HealthStatuses::Watch* raw = reactor.get();
    raw->Start(std::move(reactor));
    return raw;
  }

 private:
  const std::shared_ptr<HealthStatuses::State> state_;
};

}  // namespace

std::vector<std::shared_ptr<HealthStatuses::Watch>> HealthStatuses::State::WatchesOf(
    const std::string* service) const {
  std::vector<std::shared_ptr<Watch>> told;
  for (const auto& [raw, watch] : watches) {
    if (service != nullptr && raw->service() != *service) continue;
    if (std::shared_ptr<Watch> alive = watch.lock()) told.push_back(std::move(alive));
  }
  return told;
}

HealthStatuses::HealthStatuses() : state_(std::make_shared<State>()) {}

HealthStatuses::~HealthStatuses() = default;

std::unique_ptr<grpc::Service> HealthStatuses::NewService() {
  return std::make_unique<HealthService>(state_);
}

void HealthStatuses::SetServingStatus(const std::string& service_name, bool serving) {
  std::vector<std::shared_ptr<Watch>> told;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->shut_down) return;
    state_->serving[service_name] = serving;
    told = state_->WatchesOf(&service_name);
  }
  // Told outside the lock: a write may complete, and its reactor finish,
  // on this thread.
  const ServingStatus status =
      serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  for (const std::shared_ptr<Watch>& watch : told) watch->Send(status, false);
}

void HealthStatuses::SetServingStatus(bool serving) {
  std::vector<std::string> services;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (const auto& [name, unused] : state_->serving) services.push_back(name);
  }
  for (const std::string& name : services) SetServingStatus(name, serving);
}

void HealthStatuses::Shutdown() {
  std::vector<std::shared_ptr<Watch>> told;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->shut_down) return;
    state_->shut_down = true;
    told = state_->WatchesOf(nullptr);
  }
  for (const std::shared_ptr<Watch>& watch : told) {
    watch->Send(HealthCheckResponse::NOT_SERVING, /*then_end=*/true);
  }
}

}  // namespace tensorop::server
