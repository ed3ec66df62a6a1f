// Release and ListHandles: the input's first byte picks the method (odd:
// Release, even: ListHandles), the rest is its request as a client sends it,
// taken as tensord takes it (the raw unary size bound, the parse within a
// memory budget, ReleaseAnswer / ListHandlesAnswer) on a store holding handles
// of two owners. A page must list only the caller's handles, in id order,
// after its token and within its size; a release must leave the other
// owner's handles and the store's counts whole.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "server/data/handle_store.h"
#include "server/memory/memory_budget.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/raw_unary.h"
#include "tensorop/v1/tensorop.pb.h"

namespace {

using tensorop::server::HandleCaller;
using tensorop::server::HandleStore;

constexpr int kHandlesEach = 48;
const HandleCaller kCaller{.name = "peer:10.0.0.1", .authenticated = false};
const HandleCaller kOther{.name = "token:other", .authenticated = true};

tensorop::server::MemoryBudget& Budget() {
  static auto* budget = new tensorop::server::MemoryBudget(int64_t{256} << 20);
  return *budget;
}

HandleStore& Store() {
  static auto* store = new HandleStore(tensorop::server::HandleStoreOptions{
      .replica = "fuzz:1", .budget = &Budget(), .sweep_interval = absl::ZeroDuration()});
  return *store;
}

// Tops each owner up to kHandlesEach one-byte handles.
void Refill(HandleStore& store) {
  tensorop::Layout layout;
  layout.dtype = tensorop::DType::kUint8;
  layout.sizes = {1};
  layout.strides = {1};
  layout.element_count = 1;
  layout.buffer_elements = 1;
  for (const HandleCaller* owner : {&kCaller, &kOther}) {
    bool more = false;
    const int held = static_cast<int>(store.List(*owner, "", kHandlesEach, &more).size());
    for (int i = held; i < kHandlesEach; ++i) {
      absl::StatusOr<HandleStore::Pending> pending = store.Reserve(*owner, layout, "fuzz");
      if (!pending.ok()) __builtin_trap();
      store.Commit(*std::move(pending));
    }
  }
}

template <typename Request>
bool Parse(const uint8_t* data, size_t size, absl::string_view method, Request* request) {
  const grpc::Slice slice(data, size);
  const grpc::ByteBuffer bytes(&slice, 1);
  if (!tensorop::server::CheckRawRequestBytes(static_cast<int64_t>(size),
                                              std::numeric_limits<int64_t>::max(), method)
           .ok()) {
    return false;
  }
  tensorop::server::MemoryBudget::Reservation parsing = Budget().Empty();
  return tensorop::server::ParseMessage(bytes, method, parsing, request).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  HandleStore& store = Store();
  Refill(store);
  if ((data[0] & 1) != 0) {
    tensorop::v1::ReleaseRequest request;
    if (!Parse(data + 1, size - 1, "Release", &request)) return 0;
    const absl::Status status = tensorop::server::ReleaseAnswer(&store, kCaller, request);
    if (status.ok() != (request.ids_size() <= tensorop::server::kMaxReleaseIds)) __builtin_trap();
    // The other owner's handles are authenticated: never the caller's to release.
    bool more = false;
    if (static_cast<int>(store.List(kOther, "", kHandlesEach + 1, &more).size()) != kHandlesEach) {
      __builtin_trap();
    }
    return 0;
  }
  tensorop::v1::ListHandlesRequest request;
  if (!Parse(data + 1, size - 1, "ListHandles", &request)) return 0;
  tensorop::v1::ListHandlesResponse page;
  const absl::Status status = tensorop::server::ListHandlesAnswer(&store, kCaller, request, page);
  if (!status.ok()) return 0;
  const int limit =
      request.page_size() == 0 ? tensorop::server::kDefaultPageSize : request.page_size();
  if (page.handles_size() > limit) __builtin_trap();
  std::string after = request.page_token();
  for (const tensorop::v1::TensorHandle& handle : page.handles()) {
    if (handle.id() <= after) __builtin_trap();  // in id order, after the token
    after = handle.id();
    // Each listed handle is one of the caller's own.
    bool more = false;
    const auto mine = store.List(kCaller, "", 2 * kHandlesEach, &more);
    bool found = false;
    for (const auto& tensor : mine) found = found || tensor->id() == handle.id();
    if (!found) __builtin_trap();
  }
  return 0;
}
