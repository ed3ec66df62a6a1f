// grpc.health.v1 for tensord's servers (the main one and the plaintext
// --health_address listener): Check and Watch answer the statuses set here,
// whichever server the call came to.
//
// Why not gRPC's default health service: at Shutdown it answers NOT_SERVING
// but leaves every Watch stream open (gRPC 1.51), and Server::Shutdown then
// waits for them until --shutdown_grace_seconds runs out. A client doing
// client-side health checking (tensorop's C++ client, through its service
// config) keeps one Watch per connection, so every stop took the whole grace
// period while one was connected. Here Shutdown ends every Watch.
#ifndef TENSOROP_SERVER_SECURITY_HEALTH_STATUSES_H_
#define TENSOROP_SERVER_SECURITY_HEALTH_STATUSES_H_

#include <memory>
#include <string>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/service_type.h>

namespace tensorop::server {

class HealthStatuses : public grpc::HealthCheckServiceInterface {
 public:
  HealthStatuses();
  ~HealthStatuses() override;
  HealthStatuses(const HealthStatuses&) = delete;
  HealthStatuses& operator=(const HealthStatuses&) = delete;

  // A grpc.health.v1.Health service answering from these statuses, for one
  // server (a gRPC service is registered with one server); it must outlive
  // that server.
  std::unique_ptr<grpc::Service> NewService();

  // `service_name` ("" is the server as a whole) is SERVING or NOT_SERVING;
  // every Watch of it is told. Ignored after Shutdown.
  void SetServingStatus(const std::string& service_name, bool serving) override;
  // Every service set so far.
  void SetServingStatus(bool serving) override;
  // Every service NOT_SERVING from now on, and every Watch told so and then
  // ended (UNAVAILABLE), so that no stop waits for them.
  void Shutdown() override;

  struct State;
  class Watch;  // one Watch call

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_HEALTH_STATUSES_H_
