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

absl::StatusOr<HealthListener> StartHealthListener(const std::string& address,
                                                   HealthStatuses& statuses) {
  grpc::ServerBuilder builder;
  builder.SetOption(WithoutReflection());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
  HealthListener listener;
  listener.health = statuses.NewService();
  builder.RegisterService(listener.health.get());
  listener.others = std::make_unique<grpc::CallbackGenericService>();
  builder.RegisterCallbackGenericService(listener.others.get());
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &listener.port);
  listener.server = builder.BuildAndStart();
  if (listener.server == nullptr || listener.port == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--health_address=", address, ": cannot listen there"));
  }
  return listener;
}

}  // namespace tensorop::server
