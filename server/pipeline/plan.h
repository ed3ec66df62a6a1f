// A request validated and planned (the pipeline's second step), its inputs
// bound: carried bytes, received pieces, resident handles (in host memory or
// on a device) and shared memory regions; what runs on the thread that read
// it (PlanIfTiny).
#ifndef TENSOROP_SERVER_PIPELINE_PLAN_H_
#define TENSOROP_SERVER_PIPELINE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
// SerializationTraits for protobuf messages.
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "core/operator.h"
#include "server/data/handle_store.h"
#include "server/data/shared_memory.h"
#include "server/memory/input_buffer.h"
#include "server/memory/output_buffer.h"
#include "server/pipeline/input_source.h"
#include "server/pipeline/parse.h"
#include "server/pipeline/service_options.h"
#include "server/placement/scheduler.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

// A request's plan and its input bytes. Built in place and never moved: the plan
// may hold views of names inside `op`, whose views point into the request.
struct PlannedRun {
  OpRequest op;
  ExecutionPlan plan;
  // Where each input is, by plan slot, resolved once by Plan. Inputs without
  // host bytes where planned (kReceived, kDeviceHandle) are planned with zeros
  // standing in, but for a scatter's indices on a device, whose values
  // planning checks from a host copy.
  std::vector<InputSource> sources;
  // What the kernels read, by plan slot (and past them, the pieces a cut
  // copy reads: ReadPiecedInputs): a source's host bytes, or where they were
  // copied or gathered to.
  std::vector<std::span<const std::byte>> inputs;
  SharedMemoryPins shared_memory;  // regions the request reads or writes
  HandlePins handles;              // resident tensors it reads
  // Device handles copied into host memory for this request, by input name.
  std::map<std::string, OutputBuffer, std::less<>> host_copies;
  int64_t host_copy_bytes = 0;
  // Received inputs gathered into one buffer each, with their reservation;
  // `pieces_read` once ReadPiecedInputs ran.
  std::map<std::string, InputBuffer, std::less<>> gathered;
  bool pieces_read = false;
};

// Whether `run` reads an input that lives on an OpenCL device.
bool ReadsFromDevice(const PlannedRun& run);

// The most input data, and output bytes, of a request that runs on the thread
// that read it (PlanIfTiny): copying it takes a few microseconds, less than
// handing it to a worker and back (bench/NOTES.md, "RunBidi").
inline constexpr int64_t kTinyRequestBytes = 16 << 10;
// A request up to this size (Run, ModelInfer) is parsed by protobuf in the
// reaction, to see whether it is tiny: a tiny request's data and as much
// again of other fields.
inline constexpr size_t kParseInReactionBytes = 2 * kTinyRequestBytes;

// `request` planned, when it is tiny work on the CPU: its inputs carried in
// it (no handle, no shared memory region), its outputs answered (none kept or
// in a region), copies only (no scatter) of at most kTinyRequestBytes, and
// `placement` the CPU or AUTO that stays there. Null for any other request,
// and for one that does not plan: its worker plans it again and says why.
// `handles`: the call's, as for PlanRun (where a draining replica refuses).
std::unique_ptr<PlannedRun> PlanIfTiny(const v1::RunRequest& request, const ServiceOptions& options,
                                       const Scheduler& scheduler, const Placement& placement,
                                       const StopCheck& stop, const HandleAccess* handles);

// Validates and plans `request` without running it. The plan holds views
// into `request` and the input bytes: they must outlive it.
absl::StatusOr<std::unique_ptr<PlannedRun>> PlanRun(const v1::RunRequest& request,
                                                    const ServiceOptions& options,
                                                    const StopCheck& stop,
                                                    const UploadedInputs* uploaded,
                                                    const HandleAccess* handles);

// The plan slot of input `name`: an index of plan.input_names, or its size
// when the plan has no such input.
size_t InputSlot(const ExecutionPlan& plan, absl::string_view name);

// The tensor of `pins` in host memory whose bytes `read` starts at (a
// request's input read from a handle), or null.
const std::shared_ptr<const ResidentTensor>* HostTensorRead(const HandlePins& pins,
                                                            std::span<const std::byte> read);

// The parts of planning that execution uses again (server/pipeline/pipeline.cc).

// Validates and plans `request`, binding its inputs: its own bytes, those of
// `uploaded`, resident handles (`handles`) and shared memory regions.
absl::StatusOr<std::unique_ptr<PlannedRun>> Plan(
    const v1::RunRequest& request, const Limits& limits, SharedMemoryRegistry* shared_memory,
    const StopCheck& stop, const UploadedInputs* uploaded, const HandleAccess* handles);
// Input `name`'s bytes, on an OpenCL device, copied into host memory for
// this request (once).
absl::StatusOr<std::span<const std::byte>> HostCopy(PlannedRun& run, absl::string_view name,
                                                    const ResidentTensor& tensor,
                                                    const HandleAccess& handles,
                                                    const StopCheck& stop);

// The shared memory regions a call uses belong to its verified identity;
// without one, to the registry every unauthenticated caller shares.
absl::string_view RegionOwner(const HandleAccess* handles);

// Reads the inputs `run` has in pieces: on the CPU in place, each copy of
// them cut into copies that each read one piece (CutCopiesAtPieces); where
// the cut cannot be made (reads jumping between pieces, at most 4 copies a
// piece), or on a device, gathered into one buffer (`run.gathered`), reserved
// first in a sibling of `reservation` that the buffer holds.
absl::Status ReadPiecedInputs(PlannedRun& run, bool on_cpu, MemoryBudget::Reservation& reservation);

// The OpenCL device `run` must run on, or -1: the device holding its first
// input on a device, where the placement lets it run there (AUTO, or OPENCL
// on any or that device); else, for OPENCL naming a device, that device when
// the request keeps outputs (they stay there).
int PinnedDevice(const v1::RunRequest& request, const Placement& placement, const PlannedRun& run);

// The status of a request whose device failed under it. Its inputs there
// went with the device (HandleStore::LoseDevice): NOT_FOUND naming the
// first, as any later use says; else the device's UNAVAILABLE. Never retried
// on the CPU: what it reads or keeps lives on the device.
absl::Status LostInputs(const PlannedRun& run, int device, const absl::Status& failure);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PIPELINE_PLAN_H_
