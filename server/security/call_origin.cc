#include "server/security/call_origin.h"

#include <string>

#include "server/security/auth.h"

namespace tensorop::server {

TraceContext JoinCallTrace(grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto found =
      metadata.find(grpc::string_ref(kTraceparentHeader.data(), kTraceparentHeader.size()));
  if (found == metadata.end()) return {};
  TraceContext trace = JoinTrace(absl::string_view(found->second.data(), found->second.size()));
  if (!trace.empty()) {
    context.AddInitialMetadata(std::string(kTraceparentHeader), TraceparentOf(trace));
  }
  return trace;
}

void SetCallOrigin(grpc::ServerContextBase& context, CallRecord& record) {
  record.identity = PeerIdentity(context);
  record.trace = JoinCallTrace(context);
  record.peer = context.peer();
}

CallRecord CallOrigin(grpc::ServerContextBase& context, absl::string_view method) {
  CallRecord record;
  record.method = method;
  SetCallOrigin(context, record);
  return record;
}

}  // namespace tensorop::server
