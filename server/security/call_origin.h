// Who made a gRPC call and the trace it joined, for its request log line.
#ifndef TENSOROP_SERVER_SECURITY_CALL_ORIGIN_H_
#define TENSOROP_SERVER_SECURITY_CALL_ORIGIN_H_

#include <grpcpp/grpcpp.h>

#include "server/telemetry/request_log.h"
#include "server/telemetry/trace_context.h"

namespace tensorop::server {

// The trace the call's "traceparent" metadata names (server/telemetry/
// trace_context.h); when there is one, the traceparent of tensord's span is
// added to the call's initial metadata, so call this before that is sent.
TraceContext JoinCallTrace(grpc::ServerContextBase& context);

// record.identity (PeerIdentity), record.trace (JoinCallTrace) and
// record.peer (gRPC's name of the peer's address).
void SetCallOrigin(grpc::ServerContextBase& context, CallRecord& record);

// A record of a call to `method` (a string literal or other that outlives
// the call's log line) with its origin set as SetCallOrigin sets it.
CallRecord CallOrigin(grpc::ServerContextBase& context, absl::string_view method);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_SECURITY_CALL_ORIGIN_H_
