#include "server/pipeline/plan.h"

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/guarded.h"
#include "core/plan/byte_range.h"
#include "core/plan/source_pieces.h"
#include "core/status_macros.h"
#include "server/memory/zero_bytes.h"
#include "server/wire/convert.h"

namespace tensorop::server {

absl::StatusOr<std::span<const std::byte>> HostCopy(PlannedRun& run, absl::string_view name,
                                                    const ResidentTensor& tensor,
                                                    const HandleAccess& handles,
                                                    const StopCheck& stop) {
  const size_t bytes = static_cast<size_t>(tensor.layout().buffer_bytes());
  auto found = run.host_copies.find(name);
  if (found == run.host_copies.end()) {
    ASSIGN_OR_RETURN(OutputBuffer buffer, AllocateOutput(tensor.layout(), /*pool=*/nullptr));
    RETURN_IF_ERROR(handles.store->Download(tensor, {buffer.get(), bytes}, stop));
    handles.store->CountCopy();
    run.host_copy_bytes += static_cast<int64_t>(bytes);
    found = run.host_copies.emplace(std::string(name), std::move(buffer)).first;
  }
  return std::span<const std::byte>(found->second.get(), bytes);
}

absl::string_view RegionOwner(const HandleAccess* handles) {
  if (handles == nullptr || !handles->caller.authenticated) return {};
  return handles->caller.name;
}

namespace {

// Binds the inputs of `run->op` held apart (`uploaded`) and on handles, in
// `sources` by op input: their bytes, or zeros standing in where they have
// none in host memory, but for `values_input` (a scatter's indices,
// ValuesInputOf), whose values planning checks.
absl::Status BindHeldInputs(const v1::RunRequest& request, absl::string_view values_input,
                            const UploadedInputs* uploaded, const HandleAccess* handles,
                            const StopCheck& stop, PlannedRun* run,
                            std::vector<InputSource>& sources) {
  std::vector<NamedTensor>& inputs = run->op.inputs;
  for (size_t i = 0; uploaded != nullptr && i < inputs.size(); ++i) {
    auto found = uploaded->find(inputs[i].name);
    if (found == uploaded->end()) continue;
    sources[i] = found->second;
    if (sources[i].kind != InputSource::Kind::kReceived) {
      inputs[i].tensor.data = sources[i].bytes;
      continue;
    }
    // Read once the placement is known (ReadPiecedInputs).
    int64_t bytes = 0;
    for (std::span<const std::byte> piece : sources[i].pieces) bytes += std::ssize(piece);
    ASSIGN_OR_RETURN(inputs[i].tensor.data, ZeroBytes(bytes));
  }
  DeviceInputs on_device;
  RETURN_IF_ERROR(ResolveHandleInputs(request, handles, run->op, run->handles, on_device));
  for (size_t i = 0; i < inputs.size(); ++i) {
    NamedTensor& input = inputs[i];
    if (auto found = on_device.find(input.name); found != on_device.end()) {
      sources[i] = InputSource::OnDevice(found->second);
      // Planning checks a scatter's index values: those come to the host.
      ASSIGN_OR_RETURN(input.tensor.data,
                       !values_input.empty() && input.name == values_input
                           ? HostCopy(*run, input.name, *found->second, *handles, stop)
                           : ZeroBytes(found->second->layout().buffer_bytes()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PlannedRun>> Plan(
    const v1::RunRequest& request, const Limits& limits, SharedMemoryRegistry* shared_memory,
    const StopCheck& stop, const UploadedInputs* uploaded, const HandleAccess* handles) {
  const absl::string_view region_owner = RegionOwner(handles);
  auto run = std::make_unique<PlannedRun>();
  ASSIGN_OR_RETURN(run->op, ToOpRequest(request));
  std::vector<InputSource> sources(run->op.inputs.size());  // by op input
  RETURN_IF_ERROR(
      BindHeldInputs(request, ValuesInputOf(request), uploaded, handles, stop, run.get(), sources));
  RETURN_IF_ERROR(
      ResolveSharedMemoryInputs(request, shared_memory, region_owner, run->op, run->shared_memory));
  // The others are the request's own data, a region's or a host handle's.
  for (size_t i = 0; i < sources.size(); ++i) {
    auto given = request.inputs().find(run->op.inputs[i].name);
    if (sources[i].kind != InputSource::Kind::kInline || given == request.inputs().end()) continue;
    if (given->second.has_shared_memory()) sources[i].kind = InputSource::Kind::kSharedMemory;
    if (given->second.has_handle()) sources[i].kind = InputSource::Kind::kHostHandle;
  }
  ASSIGN_OR_RETURN(run->plan, PlanOperator(run->op, limits, stop));
  run->inputs.reserve(run->plan.input_names.size());
  run->sources.reserve(run->plan.input_names.size());
  for (absl::string_view name : run->plan.input_names) {
    auto found = std::find_if(run->op.inputs.begin(), run->op.inputs.end(),
                              [&](const NamedTensor& input) { return input.name == name; });
    if (found == run->op.inputs.end()) {
      return absl::InternalError(
          absl::StrCat("the plan reads input \"", name, "\", which the request does not have"));
    }
    run->inputs.push_back(found->tensor.data);
    InputSource& source = sources[static_cast<size_t>(found - run->op.inputs.begin())];
    if (source.kind != InputSource::Kind::kReceived &&
        source.kind != InputSource::Kind::kDeviceHandle) {
      source.bytes = found->tensor.data;
    }
    run->sources.push_back(std::move(source));
  }
  return run;
}

bool ReadsFromDevice(const PlannedRun& run) {
  return std::any_of(run.sources.begin(), run.sources.end(), [](const InputSource& source) {
    return source.kind == InputSource::Kind::kDeviceHandle;
  });
}

absl::Status ReadPiecedInputs(PlannedRun& run, bool on_cpu,
                              MemoryBudget::Reservation& reservation) {
  if (run.pieces_read) return absl::OkStatus();
  run.pieces_read = true;
  for (size_t slot = 0; slot < run.sources.size(); ++slot) {
    const InputSource& source = run.sources[slot];
    if (source.kind != InputSource::Kind::kReceived) continue;
    const std::vector<std::span<const std::byte>>& pieces = source.pieces;
    std::vector<ByteRange> ranges;
    ranges.reserve(pieces.size());
    int64_t bytes = 0;
    for (std::span<const std::byte> piece : pieces) {
      ranges.push_back({bytes, bytes + std::ssize(piece)});
      bytes += std::ssize(piece);
    }
    if (on_cpu) {
      std::optional<ExecutionPlan> cut = CutCopiesAtPieces(
          run.plan, static_cast<int>(slot), ranges, 4 * static_cast<int64_t>(pieces.size()) + 64);
      if (cut.has_value()) {
        run.plan = *std::move(cut);
        run.inputs.insert(run.inputs.end(), pieces.begin(), pieces.end());
        continue;
      }
    }
    const absl::string_view name = run.plan.input_names[slot];
    InputBuffer& gathered =
        run.gathered.try_emplace(std::string(name), reservation.Sibling()).first->second;
    RETURN_IF_ERROR(gathered.Resize(
        bytes, /*pool=*/nullptr,
        absl::StrCat("input \"", absl::CHexEscape(name), "\" gathered (", bytes, " bytes)")));
    for (std::span<const std::byte> piece : pieces) {
      std::memcpy(gathered.Extend(std::ssize(piece)), piece.data(), piece.size());
    }
    run.inputs[slot] = gathered.bytes();
  }
  return absl::OkStatus();
}

int PinnedDevice(const v1::RunRequest& request, const Placement& placement, const PlannedRun& run) {
  if (placement.device == Device::kCpu) return -1;
  const bool named = placement.device == Device::kOpenCl && placement.device_index >= 0;
  for (const InputSource& source : run.sources) {
    if (source.kind != InputSource::Kind::kDeviceHandle) continue;
    const int device = source.tensor->device_index();
    if (!named || placement.device_index == device) return device;
  }
  return named && KeepsOutputs(request) ? placement.device_index : -1;
}

absl::Status LostInputs(const PlannedRun& run, int device, const absl::Status& failure) {
  for (size_t slot = 0; slot < run.sources.size(); ++slot) {
    const InputSource& source = run.sources[slot];
    if (source.kind != InputSource::Kind::kDeviceHandle ||
        source.tensor->device_index() != device) {
      continue;
    }
    return absl::NotFoundError(
        absl::StrCat("inputs[\"", absl::CHexEscape(run.plan.input_names[slot]),
                     "\"].handle: handle ", ShortId(source.tensor->id()),
                     " was lost: OpenCL device ", device, " failed (", failure.message(), ")"));
  }
  return failure;
}

absl::StatusOr<std::unique_ptr<PlannedRun>> PlanRun(const v1::RunRequest& request,
                                                    const ServiceOptions& options,
                                                    const StopCheck& stop,
                                                    const UploadedInputs* uploaded,
                                                    const HandleAccess* handles) {
  std::unique_ptr<PlannedRun> run;
  RETURN_IF_ERROR(Guarded([&] {
    ASSIGN_OR_RETURN(run,
                     Plan(request, options.limits, options.shared_memory, stop, uploaded, handles));
    return absl::OkStatus();
  }));
  return run;
}

std::unique_ptr<PlannedRun> PlanIfTiny(const v1::RunRequest& request, const ServiceOptions& options,
                                       const Scheduler& scheduler, const Placement& placement,
                                       const StopCheck& stop, const HandleAccess* handles) {
  if (placement.device == Device::kOpenCl) return nullptr;
  if (KeepsOutputs(request) || WritesToSharedMemory(request)) return nullptr;
  int64_t input_bytes = 0;
  for (const auto& [name, tensor] : request.inputs()) {
    if (tensor.has_handle() || tensor.has_shared_memory()) return nullptr;
    input_bytes += static_cast<int64_t>(tensor.data().size());
  }
  if (input_bytes > kTinyRequestBytes) return nullptr;
  absl::StatusOr<std::unique_ptr<PlannedRun>> run =
      PlanRun(request, options, stop, /*uploaded=*/nullptr, handles);
  if (!run.ok()) return nullptr;
  const ExecutionPlan& plan = (*run)->plan;
  if (!plan.scatters.empty() || plan.bytes_moved > kTinyRequestBytes ||
      scheduler.MayRunOnDevice(placement, plan)) {
    return nullptr;
  }
  return *std::move(run);
}

size_t InputSlot(const ExecutionPlan& plan, absl::string_view name) {
  return static_cast<size_t>(std::find(plan.input_names.begin(), plan.input_names.end(), name) -
                             plan.input_names.begin());
}

const std::shared_ptr<const ResidentTensor>* HostTensorRead(const HandlePins& pins,
                                                            std::span<const std::byte> read) {
  const auto found = std::find_if(pins.begin(), pins.end(), [&](const auto& tensor) {
    return !tensor->on_device() && tensor->bytes().data() == read.data();
  });
  return found == pins.end() ? nullptr : &*found;
}

}  // namespace tensorop::server
