// The pieces server/process/server.cc puts together for transport security: a plaintext
// listener that serves only grpc.health.v1 (--health_address: kubelet gRPC
// probes cannot do TLS) from the main server's health statuses, and a builder
// option that leaves server reflection out (--reflection=off, and always on
// the health listener).
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
#include "server/security/health_statuses.h"

namespace tensorop::server {

// A ServerBuilder option removing the server reflection plugin, which gRPC's
// reflection library adds to every builder of the process.
std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection();

struct HealthListener {
  // grpc.health.v1, answering from the main server's statuses; declared
  // before the server, which must not outlive it.
  std::unique_ptr<grpc::Service> health;
  // Answers every other method UNIMPLEMENTED.
  std::unique_ptr<grpc::CallbackGenericService> others;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// A plaintext server on `address` (HOST:PORT, port 0: any) serving `statuses`
// and nothing else; FAILED_PRECONDITION naming the address when it cannot
// listen.
absl::StatusOr<HealthListener> StartHealthListener(const std::string& address,
                                                   HealthStatuses& statuses);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_HEALTH_LISTENER_H_
