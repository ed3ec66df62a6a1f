// Where a request meets the handle store (server/data/handle_store.h): its
// inputs resolved from handles, what its kept outputs add, handles as the API
// shows them, and the answers of Release and ListHandles. The store itself is
// handle_store.cc.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "server/data/handle_store.h"

namespace tensorop::server {

namespace {

// INVALID_ARGUMENT unless `given` is empty or equal to the handle's `held`.
absl::Status CheckSameOrEmpty(const google::protobuf::RepeatedField<int64_t>& given,
                              const std::vector<int64_t>& held, absl::string_view field,
                              absl::string_view handle) {
  if (given.empty() || std::equal(given.begin(), given.end(), held.begin(), held.end())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is [", absl::StrJoin(given, ", "), "] but handle ", handle, " has [",
                   absl::StrJoin(held, ", "), "]; leave it empty or give the handle's"));
}

}  // namespace

absl::Status ResolveHandleInputs(const v1::RunRequest& request, const HandleAccess* access,
                                 OpRequest& op, HandlePins& pins, DeviceInputs& on_device) {
  const size_t pinned_before = pins.size();
  for (NamedTensor& input : op.inputs) {
    auto found = request.inputs().find(input.name);
    if (found == request.inputs().end() || !found->second.has_handle()) continue;
    const v1::Tensor& tensor = found->second;
    const std::string prefix = absl::StrCat("inputs[\"", absl::CHexEscape(input.name), "\"]");
    if (access == nullptr || access->store == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(prefix, ".handle: this call does not take handles"));
    }
    if (!input.tensor.data.empty()) {  // uploaded bytes (RunChunked) for the input
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": data (", input.tensor.data.size(),
                                                     " bytes) and handle are both set; send one"));
    }
    ASSIGN_OR_RETURN(
        std::shared_ptr<const ResidentTensor> resident,
        access->store->Use(access->caller, tensor.handle().id(), absl::StrCat(prefix, ".handle")));
    const Layout& layout = resident->layout();
    const std::string handle = ShortId(resident->id());
    if (tensor.dtype() != v1::DTYPE_UNSPECIFIED &&
        tensor.dtype() != static_cast<int>(layout.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".dtype is ", v1::DType_Name(tensor.dtype()), " but handle ", handle,
                       " holds ", v1::DType_Name(static_cast<v1::DType>(layout.dtype)),
                       "; leave it empty or give the handle's"));
    }
    RETURN_IF_ERROR(
        CheckSameOrEmpty(tensor.sizes(), layout.sizes, absl::StrCat(prefix, ".sizes"), handle));
    RETURN_IF_ERROR(CheckSameOrEmpty(tensor.strides(), layout.strides,
                                     absl::StrCat(prefix, ".strides"), handle));
    input.tensor.desc =
        TensorDesc{.dtype = layout.dtype, .sizes = layout.sizes, .strides = layout.strides};
    input.tensor.data = resident->bytes();
    if (resident->on_device()) on_device[input.name] = resident.get();
    pins.push_back(std::move(resident));
  }
  // A handle named here that is not here was NOT_FOUND above: what was
  // pinned is what the request reads of this replica's handles.
  if (access == nullptr || access->store == nullptr) return absl::OkStatus();
  return access->store->Admit(access->admitted || pins.size() > pinned_before);
}

bool ReadsHandles(const v1::RunRequest& request) {
  return std::any_of(request.inputs().begin(), request.inputs().end(),
                     [](const auto& input) { return input.second.has_handle(); });
}

bool KeepsOutputs(const v1::RunRequest& request) {
  return std::any_of(request.outputs().begin(), request.outputs().end(),
                     [](const v1::OutputDesc& output) { return output.keep(); });
}

int64_t KeptOutputBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts) {
  int64_t total = 0;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (static_cast<int>(i) < request.outputs_size() &&
        request.outputs(static_cast<int>(i)).keep()) {
      total += layouts[i].buffer_bytes();
    }
  }
  return total;
}

int64_t KeptAnswerBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts) {
  // The id, replica (--advertise_address is short), numbers and each size and
  // stride as a varint of at most 10 bytes.
  constexpr int64_t kFixedBytes = 512;
  int64_t total = 0;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (static_cast<int>(i) < request.outputs_size() &&
        request.outputs(static_cast<int>(i)).keep()) {
      total += kFixedBytes + 20 * static_cast<int64_t>(layouts[i].sizes.size());
    }
  }
  return total;
}

absl::Status ReleaseAnswer(HandleStore* store, const HandleCaller& caller,
                           const v1::ReleaseRequest& request) {
  if (request.ids_size() > kMaxReleaseIds) {
    return absl::InvalidArgumentError(absl::StrCat("ids has ", request.ids_size(),
                                                   " entries; Release takes at most ",
                                                   kMaxReleaseIds, " ids a call"));
  }
  if (store == nullptr) return absl::OkStatus();
  const std::vector<std::string> ids(request.ids().begin(), request.ids().end());
  store->Release(caller, ids);
  return absl::OkStatus();
}

absl::Status ListHandlesAnswer(const HandleStore* store, const HandleCaller& caller,
                               const v1::ListHandlesRequest& request,
                               v1::ListHandlesResponse& response) {
  if (store == nullptr) return absl::FailedPreconditionError("this server keeps no handles");
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be in [0, ", kMaxPageSize, "], got ", request.page_size()));
  }
  const int limit = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  bool more = false;
  const std::vector<std::shared_ptr<const ResidentTensor>> page =
      store->List(caller, request.page_token(), limit, &more);
  for (const auto& tensor : page) ToProtoHandle(*tensor, store->replica(), response.add_handles());
  if (more && !page.empty()) response.set_next_page_token(page.back()->id());
  return absl::OkStatus();
}

void ToProtoHandle(const ResidentTensor& tensor, absl::string_view replica,
                   v1::TensorHandle* handle) {
  const Layout& layout = tensor.layout();
  handle->set_id(tensor.id());
  handle->set_replica(std::string(replica));
  handle->set_dtype(static_cast<v1::DType>(layout.dtype));
  handle->mutable_sizes()->Assign(layout.sizes.begin(), layout.sizes.end());
  handle->mutable_strides()->Assign(layout.strides.begin(), layout.strides.end());
  handle->set_backend(std::string(tensor.backend()));
  handle->set_device_index(std::max(tensor.device_index(), 0));
  handle->set_byte_size(layout.buffer_bytes());
  handle->set_expires_unix_ms(absl::ToUnixMillis(tensor.expiry()));
  handle->set_last_use_unix_ms(absl::ToUnixMillis(tensor.last_use()));
  if (tensor.view_of() != nullptr) {
    handle->set_view_of(tensor.view_of()->id());
    handle->set_byte_offset(tensor.byte_offset());
  }
}

}  // namespace tensorop::server
