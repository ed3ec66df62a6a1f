// Shared memory for co-located clients (docs/colocated.md): a registry of
// POSIX shared memory objects mapped from /dev/shm under client-chosen names,
// and the two points where a request meets it — its inputs read in place from a
// region (ResolveSharedMemoryInputs) and its outputs written straight into one
// (SharedMemoryOutput).
//
// Ownership: with authentication (tokens, client certificates) a region
// belongs to the identity that registered it, as handles do: to any other it
// is NOT_FOUND, absent from status, and its object cannot be registered by
// another identity while it is mapped. Without authentication the registry is
// shared, as in Triton's system shared memory extension: whoever knows a
// region's name may use it. Either way only a client on this host (a Unix
// socket or a loopback address) may register a region, unless
// --shared_memory_remote says otherwise: a remote client did not make the
// objects in this host's /dev/shm, so naming one could only read another
// process's memory.
//
// Cleanup: a region lives on a lease. Any use (a
// request reading or writing it, a renewing RegisterSharedMemory, a
// SharedMemoryStatus naming it) renews the lease; a region unused for
// --shared_memory_idle_seconds is unmapped by the registry's sweeper, so a
// client that dies (killed, its pod gone) leaves no mapping behind. gRPC gives
// a server no reliable "this client is gone" event (peers over a Unix socket
// all read "unix:", connections are pooled and re-made), while a lease needs
// nothing from the client beyond using what it registered.
//
// A request holds a Pin on every region it uses from resolution until its
// outputs are written: a pinned region is never unmapped (the sweeper skips it,
// UnregisterSharedMemory is FAILED_PRECONDITION naming it).
//
// A client may shrink the object while a request reads or writes it: the
// access past its new end does not kill the server (server/data/mapping_guard.h);
// the request fails FAILED_PRECONDITION and so does every later use of the
// region until it is registered again.
#ifndef TENSOROP_SERVER_DATA_SHARED_MEMORY_H_
#define TENSOROP_SERVER_DATA_SHARED_MEMORY_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "server/memory/memory_budget.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

struct SharedMemoryOptions {
  // Where keys are looked up (tests use a private directory).
  std::string directory = "/dev/shm";
  // A region no request used for this long is unmapped; zero: never.
  absl::Duration idle_timeout = absl::Minutes(5);
  // How often the sweeper looks (at most; it also looks at idle_timeout / 4).
  absl::Duration sweep_interval = absl::Seconds(1);
  // Mapped bytes are reserved here (--max_memory_bytes); null: unbounded.
  // Not owned.
  MemoryBudget* budget = nullptr;
  // Whether clients that are not on this host may register regions
  // (--shared_memory_remote).
  bool allow_remote = false;
};

// Who registers or uses a region: the identity it belongs to (empty: none
// verified, the shared registry) and whether the peer is on this host.
struct SharedMemoryCaller {
  std::string owner;
  bool local = true;
};
// The caller of `context`: its PeerIdentity, and whether its peer is a Unix
// socket or a loopback address.
SharedMemoryCaller SharedMemoryCallerOf(const grpc::ServerContextBase& context);
// Whether gRPC's peer text ("unix:...", "ipv4:127.0.0.1:5", "ipv6:[::1]:5",
// percent-encoded or not) is on this host.
bool IsLocalGrpcPeer(absl::string_view peer);
// Whether an IP address's text ("127.0.0.1", "::1", "::ffff:127.0.0.1") is a
// loopback address.
bool IsLoopbackAddress(absl::string_view ip);

// The most regions mapped at once (RESOURCE_EXHAUSTED beyond): each holds a
// descriptor and a mapping.
inline constexpr int kMaxSharedMemoryRegions = 1024;
inline constexpr size_t kMaxRegionNameBytes = 64;
inline constexpr size_t kMaxKeyBytes = 255;  // NAME_MAX

// INVALID_ARGUMENT naming `field` unless `name` is 1..64 bytes of [A-Za-z0-9_.-].
absl::Status CheckRegionName(absl::string_view name, absl::string_view field);
// INVALID_ARGUMENT naming `field` unless `key` (an optional leading '/' aside)
// is 1..255 bytes of [A-Za-z0-9_.-], neither "." nor "..": no path can leave
// the directory.
absl::Status CheckSharedMemoryKey(absl::string_view key, absl::string_view field);

class SharedMemoryRegistry {
 public:
  struct RegionInfo {
    std::string name;
    std::string key;     // without a leading '/'
    int64_t offset = 0;  // where the region starts in the object
    int64_t byte_size = 0;
    int in_use = 0;
  };

  class Region;
  // Keeps a region mapped (and counted in_use) while a request uses it.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept = default;
    Pin& operator=(Pin&& other) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin();

    const std::string& name() const;
    const std::string& key() const;
    // The mapped bytes, byte_size of them.
    std::span<std::byte> bytes() const;
    // Whether the object shrank under a request since it was mapped: an
    // access faulted, so the bytes read or written since were stand-ins
    // (server/data/mapping_guard.h), or a request found it short when done.
    bool faulted() const;
    // Whether the object is still whole under the region: not faulted, and
    // (one fstat of the descriptor the region keeps) still holding every
    // mapped byte. A truncation inside the last page raises no fault (the
    // cut bytes read as zeros, writes there are lost): an object found short
    // here marks the region faulted, as a fault does.
    bool StillIntact() const;

   private:
    friend class SharedMemoryRegistry;
    explicit Pin(std::shared_ptr<Region> region) : region_(std::move(region)) {}
    void Reset();
    std::shared_ptr<Region> region_;
  };

  explicit SharedMemoryRegistry(SharedMemoryOptions options);
  ~SharedMemoryRegistry();
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  // Maps bytes [offset, offset + byte_size) of `key` (byte_size 0: the rest
  // of the object) as `name`; the region's byte 0 is the object's byte
  // `offset` (Triton's system shared memory registers such sub-ranges; the
  // native API always maps from 0). Registering a name again with the same
  // key, offset and size renews it while the region still maps the object
  // the key names now (the same device and inode, not faulted, still
  // covering the region); otherwise (the client unlinked and re-created the
  // object, or it shrank) the stale mapping is replaced by one of the object
  // now there, or, while a request uses the region, FAILED_PRECONDITION says
  // why. With another key, offset or size, ALREADY_EXISTS.
  // INVALID_ARGUMENT for a bad name, key, offset or size (naming the field and
  // value), NOT_FOUND when the object does not exist, RESOURCE_EXHAUSTED past
  // the memory budget or kMaxSharedMemoryRegions.
  // PERMISSION_DENIED for a caller not on this host (unless allow_remote), or
  // an object another identity has mapped.
  absl::StatusOr<RegionInfo> Register(absl::string_view name, absl::string_view key,
                                      int64_t byte_size, int64_t offset = 0,
                                      const SharedMemoryCaller& caller = {});
  // Unmaps `owner`'s `name`: NOT_FOUND naming it when none, FAILED_PRECONDITION
  // naming it while a request uses it.
  absl::Status Unregister(absl::string_view name, absl::string_view owner = "");
  // Every region of `owner` by name, or the one named (NOT_FOUND naming it),
  // which renews it.
  absl::StatusOr<std::vector<RegionInfo>> Status(absl::string_view name,
                                                 absl::string_view owner = "");
  // Pins `owner`'s `name` for a request; NOT_FOUND naming `field` and the
  // region.
  absl::StatusOr<Pin> Acquire(absl::string_view name, absl::string_view field,
                              absl::string_view owner = "");

  // Unmaps the regions not pinned and unused since `now - idle_timeout`;
  // returns how many. The sweeper calls it; tests call it with a later `now`.
  int ExpireIdle(absl::Time now);

  int64_t mapped_bytes() const;
  int regions() const;
  // Regions unmapped because their lease ran out, so far.
  int64_t expired_total() const;

 private:
  // A region's owner and name.
  using RegionId = std::pair<std::string, std::string>;

  void Sweep();
  // Register's steps under the lock. PERMISSION_DENIED when an identity
  // other than `owner` maps the object `bare` (`key` as given); the caller
  // holds mutex_.
  absl::Status CheckNotTakenLocked(const std::string& owner, const std::string& bare,
                                   absl::string_view key) const;
  // `id`'s region, null when none: ALREADY_EXISTS when it maps another key,
  // offset or size; RESOURCE_EXHAUSTED when there is none and no room for one.
  absl::StatusOr<std::shared_ptr<Region>> FindRegistered(const RegionId& id,
                                                         const std::string& bare,
                                                         absl::string_view key, int64_t byte_size,
                                                         int64_t offset);
  // Drops `existing`, `id`'s region that no longer maps its object (`why`),
  // unless a request uses it (FAILED_PRECONDITION) or it was replaced
  // meanwhile (ALREADY_EXISTS).
  absl::Status RetireStale(const RegionId& id, std::shared_ptr<Region> existing,
                           absl::string_view why);

  const SharedMemoryOptions options_;
  mutable std::mutex mutex_;
  // By owner, then name.
  std::map<RegionId, std::shared_ptr<Region>> regions_;
  int64_t mapped_bytes_ = 0;
  int64_t expired_total_ = 0;
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread sweeper_;
};

// The regions one request uses, held from input resolution until its outputs
// are written, and the spans it reads (so no output overlaps one).
struct SharedMemoryPins {
  struct Span {
    const void* region = nullptr;  // the Region, by identity
    int64_t begin = 0;
    int64_t end = 0;
    std::string field;
  };
  std::vector<SharedMemoryRegistry::Pin> pins;
  std::vector<Span> spans;
};

// Points every input of `request` whose tensor references a region of
// `owner` at that region's bytes in `op` (from ToOpRequest of the same
// request), pinning the regions in `pins`. INVALID_ARGUMENT naming the field for data and a
// reference both set, a span outside the region or one not aligned to the
// dtype; NOT_FOUND naming the region; FAILED_PRECONDITION without a registry.
absl::Status ResolveSharedMemoryInputs(const v1::RunRequest& request,
                                       SharedMemoryRegistry* registry, absl::string_view owner,
                                       OpRequest& op, SharedMemoryPins& pins);

// FAILED_PRECONDITION naming the region when an object in `pins` shrank
// while the request read or wrote it (its results are not the client's
// bytes): asked once the request's work is done, one fstat per region
// (Pin::StillIntact), which marks a region found short faulted.
absl::Status CheckSharedMemoryIntact(const SharedMemoryPins& pins);

// Where output `index` of `request`, of `layout`, is to be written: the region's
// bytes at its reference's offset (padding inside the output's extent zeroed),
// or null when the output does not reference a region. INVALID_ARGUMENT naming
// the field for a span too small, outside the region, misaligned, or
// overlapping an input's or an earlier output's span.
absl::StatusOr<std::byte*> SharedMemoryOutput(const v1::RunRequest& request, int index,
                                              const Layout& layout, SharedMemoryRegistry* registry,
                                              absl::string_view owner, SharedMemoryPins& pins);

// The data bytes of the outputs of `request` that go to regions: an answer
// does not carry them.
int64_t SharedMemoryOutputBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts);

// Whether any output of `request` goes to a region.
bool WritesToSharedMemory(const v1::RunRequest& request);

// INVALID_ARGUMENT when `request` writes an output to a region: streamed
// results (RunStream, RunChunked) carry their bytes; `method` names the call.
absl::Status CheckNoSharedMemoryOutputs(const v1::RunRequest& request, absl::string_view method);

// The three RPCs' answers for `caller` (the front end answers them at once:
// server/pipeline/raw_unary.h). A null registry answers FAILED_PRECONDITION.
absl::Status RegisterSharedMemoryAnswer(SharedMemoryRegistry* registry,
                                        const SharedMemoryCaller& caller,
                                        const v1::RegisterSharedMemoryRequest& request,
                                        v1::RegisterSharedMemoryResponse& response);
absl::Status UnregisterSharedMemoryAnswer(SharedMemoryRegistry* registry,
                                          const SharedMemoryCaller& caller,
                                          const v1::UnregisterSharedMemoryRequest& request);
absl::Status SharedMemoryStatusAnswer(SharedMemoryRegistry* registry,
                                      const SharedMemoryCaller& caller,
                                      const v1::SharedMemoryStatusRequest& request,
                                      v1::SharedMemoryStatusResponse& response);

class Metrics;
// tensorop_shared_memory_regions, tensorop_shared_memory_mapped_bytes and
// tensorop_shared_memory_expired_total, sampled at each scrape.
void AddSharedMemorySeries(Metrics& metrics, const SharedMemoryRegistry& registry);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_DATA_SHARED_MEMORY_H_
