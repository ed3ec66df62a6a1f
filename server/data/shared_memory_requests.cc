// Where a request meets shared memory regions (server/data/shared_memory.h):
// its inputs read in place, its outputs written straight into a region, and
// the three RPCs' answers. The registry itself is shared_memory.cc.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/checked_math.h"
#include "core/dtype.h"
#include "server/data/shared_memory.h"
#include "server/wire/quoted.h"

namespace tensorop::server {
namespace {

// The span [offset, offset + length) of `pin`'s region, checked: INVALID_ARGUMENT
// naming `field` when it leaves the region or is not aligned to `alignment`.
absl::StatusOr<std::span<std::byte>> CheckedSpan(const SharedMemoryRegistry::Pin& pin,
                                                 const v1::SharedMemoryRef& ref, int64_t length,
                                                 int64_t alignment, absl::string_view field) {
  const int64_t size = static_cast<int64_t>(pin.bytes().size());
  if (ref.offset() < 0 || ref.byte_length() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": offset ", ref.offset(), " and byte_length ", ref.byte_length(),
                     " must not be negative (region ", Quoted(pin.name()), ")"));
  }
  const std::optional<int64_t> end = CheckedAdd(ref.offset(), length);
  if (!end.has_value() || *end > size) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": offset ", ref.offset(), " + ", length,
                                                   " bytes passes the end of region ",
                                                   Quoted(pin.name()), " (", size, " bytes)"));
  }
  if (ref.offset() % alignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": offset ", ref.offset(), " in region ", Quoted(pin.name()),
                     " is not a multiple of the element size ", alignment));
  }
  return pin.bytes().subspan(static_cast<size_t>(ref.offset()), static_cast<size_t>(length));
}

// The pin of `name` in `pins`, acquiring it the first time.
absl::StatusOr<const SharedMemoryRegistry::Pin*> PinFor(SharedMemoryRegistry* registry,
                                                        absl::string_view owner,
                                                        const std::string& name,
                                                        absl::string_view field,
                                                        SharedMemoryPins& pins) {
  if (registry == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(field, ": this server has no shared memory"));
  }
  for (const SharedMemoryRegistry::Pin& pin : pins.pins) {
    if (pin.name() == name) return &pin;
  }
  if (absl::Status status = CheckRegionName(name, absl::StrCat(field, ".region")); !status.ok()) {
    return status;
  }
  absl::StatusOr<SharedMemoryRegistry::Pin> pin = registry->Acquire(name, field, owner);
  if (!pin.ok()) return pin.status();
  pins.pins.push_back(*std::move(pin));
  return &pins.pins.back();
}

}  // namespace

absl::Status ResolveSharedMemoryInputs(const v1::RunRequest& request,
                                       SharedMemoryRegistry* registry, absl::string_view owner,
                                       OpRequest& op, SharedMemoryPins& pins) {
  // pins.pins must not reallocate while spans point at its regions: they point
  // at the mappings, not at the pins, so it may.
  for (NamedTensor& input : op.inputs) {
    auto found = request.inputs().find(input.name);
    if (found == request.inputs().end() || !found->second.has_shared_memory()) continue;
    const v1::Tensor& tensor = found->second;
    const std::string field = absl::StrCat("inputs[\"", input.name, "\"].shared_memory");
    // The bytes the request (or its upload) carries for the input.
    if (!input.tensor.data.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inputs[\"", input.name, "\"]: data (", input.tensor.data.size(),
                       " bytes) and shared_memory are both set; send one"));
    }
    const v1::SharedMemoryRef& ref = tensor.shared_memory();
    absl::StatusOr<const SharedMemoryRegistry::Pin*> pin =
        PinFor(registry, owner, ref.region(), field, pins);
    if (!pin.ok()) return pin.status();
    absl::StatusOr<std::span<std::byte>> span =
        CheckedSpan(**pin, ref, ref.byte_length(), ElementSize(input.tensor.desc.dtype), field);
    if (!span.ok()) return span.status();
    input.tensor.data = *span;
    pins.spans.push_back(
        {(*pin)->bytes().data(), ref.offset(), ref.offset() + ref.byte_length(), field});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::byte*> SharedMemoryOutput(const v1::RunRequest& request, int index,
                                              const Layout& layout, SharedMemoryRegistry* registry,
                                              absl::string_view owner, SharedMemoryPins& pins) {
  if (index >= request.outputs_size() || !request.outputs(index).has_shared_memory()) {
    return nullptr;
  }
  const v1::SharedMemoryRef& ref = request.outputs(index).shared_memory();
  const std::string field = absl::StrCat("outputs[", index, "].shared_memory");
  absl::StatusOr<const SharedMemoryRegistry::Pin*> pin =
      PinFor(registry, owner, ref.region(), field, pins);
  if (!pin.ok()) return pin.status();
  const int64_t needed = layout.buffer_bytes();
  if (ref.byte_length() < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": byte_length ", ref.byte_length(), " is less than the ", needed,
        " bytes the output takes (sizes [", absl::StrJoin(layout.sizes, ","), "], strides [",
        absl::StrJoin(layout.strides, ","), "]) in region ", Quoted(ref.region())));
  }
  absl::StatusOr<std::span<std::byte>> span =
      CheckedSpan(**pin, ref, needed, ElementSize(layout.dtype), field);
  if (!span.ok()) return span.status();
  const void* identity = (*pin)->bytes().data();
  const int64_t begin = ref.offset();
  const int64_t end = ref.offset() + needed;
  for (const SharedMemoryPins::Span& other : pins.spans) {
    if (other.region == identity && begin < other.end && other.begin < end && needed > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": bytes [", begin, ", ", end, ") of region ", Quoted(ref.region()),
                       " overlap those of ", other.field, " [", other.begin, ", ", other.end, ")"));
    }
  }
  pins.spans.push_back({identity, begin, end, field});
  // Padding reads as zero, as in an answer; a packed output overwrites every byte.
  if (layout.element_count * ElementSize(layout.dtype) != needed) {
    std::memset(span->data(), 0, span->size());
  }
  return span->data();
}

int64_t SharedMemoryOutputBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts) {
  int64_t total = 0;
  for (size_t i = 0; i < layouts.size() && static_cast<int>(i) < request.outputs_size(); ++i) {
    if (request.outputs(static_cast<int>(i)).has_shared_memory()) {
      total += layouts[i].buffer_bytes();
    }
  }
  return total;
}

bool WritesToSharedMemory(const v1::RunRequest& request) {
  for (const v1::OutputDesc& output : request.outputs()) {
    if (output.has_shared_memory()) return true;
  }
  return false;
}

absl::Status CheckNoSharedMemoryOutputs(const v1::RunRequest& request, absl::string_view method) {
  for (int i = 0; i < request.outputs_size(); ++i) {
    if (request.outputs(i).has_shared_memory()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].shared_memory: ", method,
          " streams its results back; write outputs into shared memory with Run or RunBidi"));
    }
  }
  return absl::OkStatus();
}

namespace {

void ToProto(const SharedMemoryRegistry::RegionInfo& info, v1::SharedMemoryRegion* region) {
  region->set_region(info.name);
  region->set_key(info.key);
  region->set_byte_size(info.byte_size);
  region->set_in_use(info.in_use);
}

absl::Status NoRegistry() {
  return absl::FailedPreconditionError("this server has no shared memory");
}

}  // namespace

absl::Status RegisterSharedMemoryAnswer(SharedMemoryRegistry* registry,
                                        const SharedMemoryCaller& caller,
                                        const v1::RegisterSharedMemoryRequest& request,
                                        v1::RegisterSharedMemoryResponse& response) {
  if (registry == nullptr) return NoRegistry();
  absl::StatusOr<SharedMemoryRegistry::RegionInfo> info = registry->Register(
      request.region(), request.key(), request.byte_size(), /*offset=*/0, caller);
  if (!info.ok()) return info.status();
  ToProto(*info, response.mutable_region());
  return absl::OkStatus();
}

absl::Status UnregisterSharedMemoryAnswer(SharedMemoryRegistry* registry,
                                          const SharedMemoryCaller& caller,
                                          const v1::UnregisterSharedMemoryRequest& request) {
  if (registry == nullptr) return NoRegistry();
  return registry->Unregister(request.region(), caller.owner);
}

absl::Status SharedMemoryStatusAnswer(SharedMemoryRegistry* registry,
                                      const SharedMemoryCaller& caller,
                                      const v1::SharedMemoryStatusRequest& request,
                                      v1::SharedMemoryStatusResponse& response) {
  if (registry == nullptr) return NoRegistry();
  absl::StatusOr<std::vector<SharedMemoryRegistry::RegionInfo>> infos =
      registry->Status(request.region(), caller.owner);
  if (!infos.ok()) return infos.status();
  for (const auto& info : *infos) ToProto(info, response.add_regions());
  response.set_mapped_bytes(registry->mapped_bytes());
  return absl::OkStatus();
}

}  // namespace tensorop::server
