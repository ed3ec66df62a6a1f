// RunBidi: one stream per replica holding the requests' handles, written on a
// second thread while this one matches answers to requests by id.
#include <algorithm>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/protocol_error.h"
#include "client/status_macros.h"

namespace tensorop::client {

std::vector<absl::StatusOr<Result>> Client::RunBidi(const std::vector<v1::RunRequest>& requests) {
  // Every element is overwritten: by its answer, or by the reason it has none.
  std::vector<absl::StatusOr<Result>> results(requests.size(), absl::UnknownError(""));
  std::map<std::string, size_t, std::less<>> ids;  // id -> index of the request
  for (size_t i = 0; i < requests.size(); ++i) {
    auto [it, inserted] = ids.emplace(requests[i].id(), i);
    if (!inserted) {
      const absl::Status duplicate = absl::InvalidArgumentError(
          absl::StrCat("RunBidi matches answers by id, and requests ", it->second, " and ", i,
                       " share the id \"", requests[i].id(), "\""));
      std::fill(results.begin(), results.end(), duplicate);
      return results;
    }
  }
  // Requests reading handles go to the replica holding them: one stream per
  // replica, and one over the target for the others.
  std::map<std::string, std::pair<Route, std::vector<size_t>>> streams;
  for (size_t i = 0; i < requests.size(); ++i) {
    absl::StatusOr<Route> route = RouteFor(requests[i]);
    if (!route.ok()) {
      results[i] = route.status();
      continue;
    }
    auto& [stream_route, indices] = streams[route->replica];
    if (indices.empty()) stream_route = *std::move(route);
    indices.push_back(i);
  }
  for (const auto& [replica, stream] : streams) {
    RunBidiOn(stream.first, requests, stream.second, results);
  }
  return results;
}

void Client::RunBidiOn(const Route& route, const std::vector<v1::RunRequest>& requests,
                       const std::vector<size_t>& indices,
                       std::vector<absl::StatusOr<Result>>& results) {
  grpc::ClientContext context;
  if (absl::Status prepared = Prepare(context); !prepared.ok()) {
    for (size_t index : indices) results[index] = prepared;
    return;
  }
  std::map<std::string, size_t, std::less<>> pending;  // id -> index of the request
  for (size_t index : indices) pending.emplace(requests[index].id(), index);
  std::unique_ptr<grpc::ClientReaderWriter<v1::RunRequest, v1::RunResponse>> stream =
      route.stub->RunBidi(&context);
  // Write on a second thread while this one reads: the server answers as it
  // goes, and not reading while writing could fill both directions' windows.
  std::thread writer([&stream, &requests, &indices] {
    for (size_t index : indices) {
      if (!stream->Write(requests[index])) return;  // the call is over; Finish says why
    }
    stream->WritesDone();
  });
  absl::Status broken;
  v1::RunResponse response;
  while (stream->Read(&response)) {
    auto it = pending.find(response.id());
    if (it == pending.end()) {
      broken = ProtocolError(absl::StrCat("an answer for id \"", response.id(),
                                          "\", which no unanswered request has"));
      context.TryCancel();
      break;
    }
    const size_t index = it->second;
    pending.erase(it);
    if (response.status().code() != 0) {
      results[index] =
          absl::Status(StatusCodeFromWire(response.status().code()), response.status().message());
    } else {
      results[index] = ResultFromResponse(response, &requests[index]);
    }
  }
  if (!broken.ok()) {
    while (stream->Read(&response)) {
    }
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  if (broken.ok()) {
    broken = status.ok() ? ProtocolError("the stream ended without answering this request")
                         : Failed(status, route);
  }
  for (const auto& [id, index] : pending) results[index] = broken;
}

}  // namespace tensorop::client
