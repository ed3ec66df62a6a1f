// The pieces server/process/server.cc puts together for transport security: a plaintext
// listener that serves only grpc.health.v1 (--health_address: kubelet gRPC
// probes cannot do TLS), a health service that mirrors every status into it,
// and a builder option that leaves server reflection out (--reflection=off, and
// always on the health listener).
#ifndef TENSOROP_SERVER_SECURITY_HEALTH_LISTENER_H_
#define TENSOROP_SERVER_SECURITY_HEALTH_LISTENER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/server.h>

#include "absl/status/statusor.h"

namespace tensorop::server {

// A ServerBuilder option removing the server reflection plugin, which gRPC's
// reflection library adds to every builder of the process.
std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection();

// Sets every status on all of `targets` (the main server's health service and
// the health listener's), so both always say the same.
class HealthMirror : public grpc::HealthCheckServiceInterface {
 public:
  explicit HealthMirror(std::vector<grpc::HealthCheckServiceInterface*> targets)
      : targets_(std::move(targets)) {}
  void SetServingStatus(const std::string& service_name, bool serving) override;
  void SetServingStatus(bool serving) override;
  void Shutdown() override;

 private:
  std::vector<grpc::HealthCheckServiceInterface*> targets_;
};

struct HealthListener {
  // Answers every other method UNIMPLEMENTED; it also gives the server the
  // callback completion queue that gRPC's default health service runs on.
  std::unique_ptr<grpc::CallbackGenericService> others;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// A plaintext server on `address` (HOST:PORT, port 0: any) with gRPC's default
// health service and nothing else; FAILED_PRECONDITION naming the address when
// it cannot listen.
absl::StatusOr<HealthListener> StartHealthListener(const std::string& address);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_HEALTH_LISTENER_H_
