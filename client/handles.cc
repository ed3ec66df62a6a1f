// The handle calls (Release, ListHandles) and the helpers built on them that
// run a request with its inputs put and its outputs kept, then fetched.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/protocol_error.h"
#include "client/status_macros.h"
#include "proto/operator_oneof.h"

namespace tensorop::client {

absl::Status Client::Release(absl::Span<const v1::TensorHandle> handles) {
  std::map<std::string, std::vector<std::string>> by_replica;
  for (const v1::TensorHandle& handle : handles) {
    by_replica[handle.replica()].push_back(handle.id());
  }
  absl::Status first_error;
  for (const auto& [replica, ids] : by_replica) {
    absl::Status released = ReleaseVia(RouteTo(replica, ids.front()), ids);
    if (first_error.ok()) first_error = released;
  }
  return first_error;
}

absl::Status Client::Release(const std::vector<std::string>& ids) {
  return ReleaseVia(MainRoute(), ids);
}

absl::Status Client::ReleaseVia(const Route& route, const std::vector<std::string>& ids) {
  // The server takes at most kMaxReleaseIds ids a call (an empty list is one call).
  size_t begin = 0;
  do {
    const size_t end = std::min(ids.size(), begin + kMaxReleaseIds);
    grpc::ClientContext context;
    RETURN_IF_ERROR(Prepare(context));
    v1::ReleaseRequest request;
    request.mutable_ids()->Assign(ids.begin() + static_cast<std::ptrdiff_t>(begin),
                                  ids.begin() + static_cast<std::ptrdiff_t>(end));
    v1::ReleaseResponse response;
    const grpc::Status status = route.stub->Release(&context, request, &response);
    if (!status.ok()) return Failed(status, route);
    begin = end;
  } while (begin < ids.size());
  return absl::OkStatus();
}

absl::StatusOr<v1::ListHandlesResponse> Client::ListHandles(int page_size,
                                                            const std::string& page_token) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(context));
  v1::ListHandlesRequest request;
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  v1::ListHandlesResponse response;
  const grpc::Status status = stub_->ListHandles(&context, request, &response);
  if (!status.ok()) return Failed(status, MainRoute());
  return response;
}

absl::StatusOr<std::vector<v1::TensorHandle>> Client::ListAllHandles() {
  std::vector<v1::TensorHandle> handles;
  std::string token;
  do {
    ASSIGN_OR_RETURN(v1::ListHandlesResponse page, ListHandles(0, token));
    if (!page.next_page_token().empty() && page.next_page_token() == token) {
      return ProtocolError(
          absl::StrCat("ListHandles answered page token \"", token, "\" with itself"));
    }
    std::move(page.mutable_handles()->begin(), page.mutable_handles()->end(),
              std::back_inserter(handles));
    token = page.next_page_token();
  } while (!token.empty());
  return handles;
}

namespace {

// Every operator but slice and split derives its one output's sizes, so a
// request may leave `outputs` empty.
bool DerivesItsOutput(const v1::RunRequest& request) {
  return request.op_case() != v1::RunRequest::OP_NOT_SET && !request.has_slice() &&
         !request.has_split();
}

}  // namespace

void DescribeOutputs(Client& client, v1::RunRequest& request) {
  if (request.outputs_size() != 0 || !DerivesItsOutput(request)) return;
  if (request.has_scatter_elements() && request.inputs().contains("input")) {
    request.add_outputs()->mutable_sizes()->CopyFrom(request.inputs().at("input").sizes());
  } else {
    absl::StatusOr<Result> probe = client.Run(request);
    if (!probe.ok()) return;
    for (const HostTensor& output : probe->outputs) {
      request.add_outputs()->mutable_sizes()->Assign(output.sizes.begin(), output.sizes.end());
    }
  }
}

void KeepOutputs(v1::RunRequest& request) {
  // An operator that derives its one output: described by an empty entry (no
  // sizes: not given), which may then be kept.
  if (request.outputs_size() == 0 && DerivesItsOutput(request)) request.add_outputs();
  for (v1::OutputDesc& desc : *request.mutable_outputs()) desc.set_keep(true);
}

v1::ChainStep ChainStepOf(const v1::RunRequest& request) {
  v1::ChainStep step;
  CopyOperator(request, &step);
  for (const auto& [name, tensor] : request.inputs()) {
    *(*step.mutable_inputs())[name].mutable_tensor() = tensor;
  }
  *step.mutable_outputs() = request.outputs();
  return step;
}

v1::RunChainRequest OneStepChain(const v1::RunRequest& request) {
  return ChainOf({&request, 1}, {});
}

v1::RunChainRequest ChainOf(absl::Span<const v1::RunRequest> steps, absl::Span<const int> from) {
  v1::RunChainRequest chain;
  const v1::RunRequest& first = steps.front();
  chain.set_id(first.id());
  chain.set_backend(first.backend());
  if (first.has_device_index()) chain.set_device_index(first.device_index());
  for (size_t i = 0; i < steps.size(); ++i) {
    v1::ChainStep& step = *chain.add_steps() = ChainStepOf(steps[i]);
    if (i == 0) continue;
    v1::StepOutput& input = *(*step.mutable_inputs())["input"].mutable_step();
    input.set_step(static_cast<int>(i) - 1);
    input.set_output(i - 1 < from.size() ? from[i - 1] : 0);
  }
  const v1::RunRequest& last = steps.back();
  const int outputs = last.has_split() ? last.outputs_size() : 1;
  for (int k = 0; k < outputs; ++k) {
    v1::ChainResult& result = *chain.add_results();
    result.set_step(static_cast<int>(steps.size()) - 1);
    result.set_output(k);
  }
  return chain;
}

void ReferTo(const v1::TensorHandle& handle, v1::Tensor& tensor) {
  v1::TensorHandle& named = *tensor.mutable_handle();
  named.set_id(handle.id());
  named.set_replica(handle.replica());
}

absl::StatusOr<Result> RunWithHandles(Client& client, const v1::RunRequest& request,
                                      const PutOptions& put) {
  v1::RunRequest run = request;
  std::vector<v1::TensorHandle> made;  // every handle made, to release
  absl::StatusOr<Result> result = [&]() -> absl::StatusOr<Result> {
    // A call reads handles of one replica: every Put goes where the first
    // handle lives.
    PutOptions on_one = put;
    std::vector<std::string> names;
    for (const auto& [name, tensor] : run.inputs()) {
      names.push_back(name);
      if (tensor.has_handle() && on_one.replica.empty()) on_one.replica = tensor.handle().replica();
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      // The layout stays beside the handle (equal to the handle's).
      v1::Tensor& tensor = (*run.mutable_inputs())[name];
      if (tensor.has_handle()) continue;  // already on the server
      ASSIGN_OR_RETURN(v1::TensorHandle handle, client.Put(HostTensorFromProto(tensor), on_one));
      on_one.replica = handle.replica();
      ReferTo(handle, tensor);
      made.push_back(std::move(handle));
    }
    KeepOutputs(run);
    ASSIGN_OR_RETURN(Result kept, client.Run(run));
    for (size_t i = 0; i < kept.outputs.size(); ++i) {
      HostTensor& output = kept.outputs[i];
      if (!output.handle.has_value()) continue;
      made.push_back(*output.handle);
      const int index = static_cast<int>(i);
      ASSIGN_OR_RETURN(
          output,
          client.Fetch(made.back(), index < run.outputs_size()
                                        ? absl::Span<const int64_t>(run.outputs(index).strides())
                                        : absl::Span<const int64_t>()));
    }
    return kept;
  }();
  if (!made.empty()) {
    const absl::Status released = client.Release(made);
    if (result.ok() && !released.ok()) return released;
  }
  return result;
}

}  // namespace tensorop::client
