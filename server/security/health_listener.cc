#include "server/security/health_listener.h"

#include <algorithm>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

class WithoutReflectionOption : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string reflection = grpc::reflection::ProtoServerReflectionPlugin().name();
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [&](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == reflection;
                                  }),
                   plugins->end());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection() {
  return std::make_unique<WithoutReflectionOption>();
}

void HealthMirror::SetServingStatus(const std::string& service_name, bool serving) {
  for (grpc::HealthCheckServiceInterface* target : targets_) {
    target->SetServingStatus(service_name, serving);
  }
}

void HealthMirror::SetServingStatus(bool serving) {
  for (grpc::HealthCheckServiceInterface* target : targets_) target->SetServingStatus(serving);
}

void HealthMirror::Shutdown() {
  for (grpc::HealthCheckServiceInterface* target : targets_) target->Shutdown();
}

absl::StatusOr<HealthListener> StartHealthListener(const std::string& address) {
  // The default health service comes with every server once
  // grpc::EnableDefaultHealthCheckService(true) was called; this one has no
  // other service.
  grpc::ServerBuilder builder;
  builder.SetOption(WithoutReflection());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
  HealthListener listener;
  listener.others = std::make_unique<grpc::CallbackGenericService>();
  builder.RegisterCallbackGenericService(listener.others.get());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &listener.port);
  listener.server = builder.BuildAndStart();
  if (listener.server == nullptr || listener.port == 0 ||
      listener.server->GetHealthCheckService() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--health_address=", address, ": cannot listen there"));
  }
  return listener;
}

}  // namespace tensorop::server
