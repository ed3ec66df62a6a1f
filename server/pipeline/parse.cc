#include "server/pipeline/parse.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/wire/convert.h"
#include "server/wire/quoted.h"
#include "server/wire/wire_bound.h"

namespace tensorop::server {

absl::Status ReserveParse(const grpc::ByteBuffer& bytes,
                          const google::protobuf::Descriptor& descriptor, int64_t received_bytes,
                          absl::string_view method, MemoryBudget::Reservation& reservation) {
  absl::StatusOr<int64_t> bound = ParsedBytesBound(bytes, descriptor);
  if (!bound.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(method, ": ", bound.status().message()));
  }
  return ReserveParsing(
      *bound, [&] { return absl::StrCat(method, ": parsing a ", received_bytes, "-byte request"); },
      reservation);
}

absl::Status ReservePlanning(int outputs, absl::string_view method, absl::string_view kind,
                             absl::string_view id, MemoryBudget::Reservation& reservation) {
  return ReserveOutputOverhead(
      outputs,
      [&] {
        return absl::StrCat(method, ": planning the ", outputs, " outputs of ", kind, " ",
                            Quoted(id));
      },
      reservation);
}

namespace {

// DeserializeMessage for a RunRequest, and reserves the per-output overhead of
// planning it.
absl::Status Deserialize(const grpc::ByteBuffer& bytes, int64_t received_bytes,
                         absl::string_view method, MemoryBudget::Reservation& reservation,
                         v1::RunRequest* request) {
  RETURN_IF_ERROR(DeserializeMessage(bytes, received_bytes, method, request));
  return ReservePlanning(request->outputs_size(), method, "request", request->id(), reservation);
}

}  // namespace

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                          MemoryBudget::Reservation& reservation, v1::RunRequest* request) {
  const int64_t received_bytes = static_cast<int64_t>(bytes.Length());
  RETURN_IF_ERROR(
      ReserveParse(bytes, *v1::RunRequest::descriptor(), received_bytes, method, reservation));
  return Deserialize(bytes, received_bytes, method, reservation, request);
}

absl::Status ParseChainRequest(const grpc::ByteBuffer& bytes, absl::string_view method,
                               MemoryBudget::Reservation& reservation, v1::RunChainRequest* chain) {
  const int64_t received_bytes = static_cast<int64_t>(bytes.Length());
  RETURN_IF_ERROR(
      ReserveParse(bytes, *v1::RunChainRequest::descriptor(), received_bytes, method, reservation));
  RETURN_IF_ERROR(DeserializeMessage(bytes, received_bytes, method, chain));
  RETURN_IF_ERROR(CheckIdBytes(chain->id(), "id"));
  int outputs = 0;
  for (const v1::ChainStep& step : chain->steps()) outputs += std::max(1, step.outputs_size());
  return ReservePlanning(outputs, method, "chain", chain->id(), reservation);
}

UploadedInputs Spans(const InputBuffers& buffers) {
  UploadedInputs spans;
  for (const auto& [name, buffer] : buffers) {
    spans.emplace(name, InputSource::Uploaded(buffer.bytes()));
  }
  return spans;
}

int64_t InputBytes(const InputBuffers& buffers) {
  int64_t total = 0;
  for (const auto& [name, buffer] : buffers) total += buffer.size();
  return total;
}

absl::StatusOr<std::optional<RequestDataView>> ReservedView(
    size_t max_rest_bytes, absl::string_view method, MemoryBudget::Reservation& reservation,
    const std::function<std::optional<RequestDataView>(size_t max_rest_bytes)>& make) {
  std::optional<RequestDataView> view;
  RETURN_IF_ERROR(reservation.GrowWhileMaking(
      static_cast<int64_t>(max_rest_bytes),
      [&] {
        return absl::StrCat(method, ": reading the fields of a large request besides its data");
      },
      [&]() -> absl::StatusOr<int64_t> {
        view = make(max_rest_bytes);
        return view.has_value() ? static_cast<int64_t>(view->rest().capacity()) : 0;
      }));
  return view;
}

namespace {

// Requests from this size are read with a RequestDataView; smaller ones are
// parsed by protobuf.
constexpr size_t kLiftFromBytes = size_t{1} << 20;
// A large request whose fields besides its inputs' data take more than this
// is parsed by protobuf: a few inputs' sizes, strides and names take far less.
constexpr size_t kMaxRestBytes = 64 << 10;

// A view of `bytes` (at least kLiftFromBytes) whose fields besides the data
// take at most `max_rest_bytes`, those fields parsed into `request` and
// reserved as parsed; the data stays covered by the reservation of the
// received bytes, so a call never reserves its data twice. nullopt, having
// reserved nothing, where there is no such view.
absl::StatusOr<std::optional<RequestDataView>> ParseAroundData(
    const grpc::ByteBuffer& bytes, absl::string_view method, size_t max_rest_bytes,
    MemoryBudget::Reservation& reservation, v1::RunRequest* request) {
  ASSIGN_OR_RETURN(std::optional<RequestDataView> view,
                   ReservedView(max_rest_bytes, method, reservation,
                                [&](size_t most) { return RequestDataView::Of(bytes, most); }));
  if (!view.has_value()) return view;
  const grpc::Slice rest_slice(view->rest().data(), view->rest().size());
  const grpc::ByteBuffer rest(&rest_slice, 1);
  const int64_t received_bytes = static_cast<int64_t>(bytes.Length());
  RETURN_IF_ERROR(
      ReserveParse(rest, *v1::RunRequest::descriptor(), received_bytes, method, reservation));
  RETURN_IF_ERROR(Deserialize(rest, received_bytes, method, reservation, request));
  return view;
}

// What ParseReceivedRun adds to a parsed `run`: its inputs' bytes, for
// planning, and their count.
void NoteInputBytes(ReceivedRun* run) {
  run->uploaded = Spans(run->inputs);
  run->data_bytes = InputBytes(run->inputs);
  if (!run->received.view.has_value()) return;
  RequestDataView& view = *run->received.view;
  for (size_t i = 0; i < view.inputs().size(); ++i) {
    const RequestDataView::InputData& input = view.inputs()[i];
    if (input.bytes == 0) continue;
    auto tensor = run->request.inputs().find(input.input);
    const std::optional<DType> dtype =
        tensor != run->request.inputs().end() ? DTypeFromInt(tensor->second.dtype()) : std::nullopt;
    run->uploaded.emplace(input.input, InputSource::Received(view.ElementPieces(
                                           i, dtype.has_value() ? ElementSize(*dtype) : 1)));
    run->data_bytes += input.bytes;
  }
}

}  // namespace

namespace {

// The inputs' data of `view`, a view of `received`, copied into a buffer
// each, reserved before the received bytes (held by the view now) are given
// back.
absl::Status CopyInputs(ReceivedBytes& received, RequestDataView& view, absl::string_view method,
                        MemoryBudget::Reservation& reservation, BufferPool* pool,
                        InputBuffers* inputs) {
  for (const RequestDataView::InputData& input : view.inputs()) {
    if (input.bytes == 0) continue;
    InputBuffer& buffer = inputs->try_emplace(input.input, reservation.Sibling()).first->second;
    RETURN_IF_ERROR(buffer.Resize(
        input.bytes, pool,
        absl::StrCat(method, ": the ", input.bytes, " bytes of input ", Quoted(input.input))));
  }
  received.Release();
  for (size_t i = 0; i < view.inputs().size(); ++i) {
    const RequestDataView::InputData& input = view.inputs()[i];
    if (input.bytes == 0) continue;
    view.MoveDataTo(i, inputs->find(input.input)->second.Extend(input.bytes));
  }
  return absl::OkStatus();
}

// `view` of `received` kept as `run`'s received data: the received slices but
// those it holds let go, and the reservation of those moved to its cover.
void KeepReceived(ReceivedBytes& received, RequestDataView view, ReceivedRun* run) {
  run->received.cover = received.ReleaseKeeping(view.DataBytes());
  run->received.view.emplace(std::move(view));
}

// `received` parsed into `request` around its data (ParseAroundData), its
// view returned; or, where there is no such view, parsed whole and released.
absl::StatusOr<std::optional<RequestDataView>> ParseLarge(ReceivedBytes& received,
                                                          absl::string_view method,
                                                          MemoryBudget::Reservation& reservation,
                                                          v1::RunRequest* request) {
  if (received.length() >= kLiftFromBytes) {
    ASSIGN_OR_RETURN(
        std::optional<RequestDataView> view,
        ParseAroundData(received.bytes(), method, kMaxRestBytes, reservation, request));
    if (view.has_value()) return view;
  }
  RETURN_IF_ERROR(ParseRequest(received.bytes(), method, reservation, request));
  received.Release();
  return std::nullopt;
}

}  // namespace

absl::Status ParseRequestAndInputs(ReceivedBytes& received, absl::string_view method,
                                   MemoryBudget::Reservation& reservation, BufferPool* pool,
                                   v1::RunRequest* request, InputBuffers* inputs) {
  ASSIGN_OR_RETURN(std::optional<RequestDataView> view,
                   ParseLarge(received, method, reservation, request));
  if (!view.has_value()) return absl::OkStatus();
  return CopyInputs(received, *view, method, reservation, pool, inputs);
}

void ReceivedRun::Free() {
  uploaded = UploadedInputs();
  inputs.clear();
  received.Release();
  request.Clear();
}

absl::Status ParseReceivedRun(ReceivedBytes& received, absl::string_view method,
                              MemoryBudget::Reservation& reservation, BufferPool* pool,
                              ReceivedRun* run) {
  ASSIGN_OR_RETURN(std::optional<RequestDataView> view,
                   ParseLarge(received, method, reservation, &run->request));
  // Parsed whole (no view), nothing is held apart; a scatter's data is
  // copied out, since planning reads its indices.
  if (view.has_value() && ValuesInputOf(run->request).empty()) {
    KeepReceived(received, *std::move(view), run);
  } else if (view.has_value()) {
    RETURN_IF_ERROR(CopyInputs(received, *view, method, reservation, pool, &run->inputs));
  }
  RETURN_IF_ERROR(CheckIdBytes(run->request.id(), "id"));
  NoteInputBytes(run);
  return absl::OkStatus();
}

absl::StatusOr<bool> ParseReceivedRunIfLight(ReceivedBytes& received, absl::string_view method,
                                             MemoryBudget::Reservation& reservation,
                                             size_t max_rest_bytes, ReceivedRun* run) {
  if (received.length() < kLiftFromBytes) return false;
  // What parsing reserves, in a reservation of its own until the request is taken.
  MemoryBudget::Reservation parsing = reservation.Sibling();
  ASSIGN_OR_RETURN(
      std::optional<RequestDataView> view,
      ParseAroundData(received.bytes(), method, max_rest_bytes, parsing, &run->request));
  if (!view.has_value()) return false;
  if (!ValuesInputOf(run->request).empty()) {  // its indices are copied out for planning
    run->request.Clear();
    return false;
  }
  reservation.Absorb(std::move(parsing));
  KeepReceived(received, *std::move(view), run);
  RETURN_IF_ERROR(CheckIdBytes(run->request.id(), "id"));
  NoteInputBytes(run);
  return true;
}

}  // namespace tensorop::server
