// Unary methods answered from raw bytes, at once in the reaction (small
// requests and answers, no work: larger requests are refused unparsed). gRPC's typed callback
// handler answers bytes that are no request message UNIMPLEMENTED with an empty message, and parses
// before the memory budget can be asked; a method registered raw (WithRawCallbackMethod_*) and
// answered through AnswerRaw parses them itself, within the budget: INVALID_ARGUMENT "METHOD: the N
// bytes received are not a valid TYPE", as every other method answers.
#ifndef TENSOROP_SERVER_PIPELINE_RAW_UNARY_H_
#define TENSOROP_SERVER_PIPELINE_RAW_UNARY_H_

#include <cstdint>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/guarded.h"
#include "core/status_macros.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/pipeline.h"
#include "server/telemetry/request_log.h"
#include "server/wire/status_map.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {

// The largest request a raw unary method takes: each one's fields are a few
// names, numbers and ids (Release's at most kMaxReleaseIds of 32 hex digits),
// so refusing anything larger before parsing keeps the work done on gRPC's
// thread bounded by a constant.
inline constexpr int64_t kMaxRawRequestBytes = 128 << 10;

// RESOURCE_EXHAUSTED naming `method` when a request of `bytes` is over the
// server's message limit (`max_message_bytes`, named) or kMaxRawRequestBytes
// (refused before it is parsed), else OK.
inline absl::Status CheckRawRequestBytes(int64_t bytes, int64_t max_message_bytes,
                                         absl::string_view method) {
  RETURN_IF_ERROR(CheckReceivedBytes(bytes, max_message_bytes, method));
  if (bytes <= kMaxRawRequestBytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(method, ": a ", bytes,
                                                   "-byte request; this method takes at most ",
                                                   kMaxRawRequestBytes, " bytes"));
}

// Parses `request_bytes` as a Request for the method `record` names, then
// `answer(request, response)` (a status); the Response serialized into `out`
// when it is OK. A request over `max_message_bytes` or kMaxRawRequestBytes is
// refused unparsed. The call's line goes to the request log with `record` (its
// caller: CallOrigin).
template <typename Request, typename Response, typename AnswerFn>
grpc::ServerUnaryReactor* AnswerRaw(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* out,
                                    MemoryBudget& budget, int64_t max_message_bytes,
                                    CallRecord record, AnswerFn answer) {
  const absl::string_view method = record.method;
  MemoryBudget::Reservation parsing = budget.Empty();
  const absl::Status status = Guarded([&]() -> absl::Status {
    RETURN_IF_ERROR(CheckRawRequestBytes(static_cast<int64_t>(request_bytes->Length()),
                                         max_message_bytes, method));
    Request request;
    RETURN_IF_ERROR(ParseMessage(*request_bytes, method, parsing, &request));
    Response response;
    RETURN_IF_ERROR(answer(request, response));
    SerializeInto(response, out);
    return absl::OkStatus();
  });
  record.bytes_in = static_cast<int64_t>(request_bytes->Length());
  LogCall(record, status);
  return Answer(context, status);
}

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_RAW_UNARY_H_
