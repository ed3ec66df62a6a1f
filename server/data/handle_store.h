// Tensors that stay on the server (docs/handles.md): a Put's bytes or a kept
// output (OutputDesc.keep), held under a random id until Release or until
// they go unused for their time to live, and the point where a request meets
// them: its inputs read in place from resident bytes (ResolveHandleInputs).
//
// Access: a handle made by an authenticated caller (token, certificate)
// exists only for that identity: to any other it is NOT_FOUND exactly like a
// missing one. Without authentication the id is the capability: whoever knows
// it may use it, and ListHandles and the per-client quota go by the peer's IP
// address.
//
// Lifetime: resident bytes are immutable and shared. A call holds the tensor
// (a shared_ptr) from resolution until its outputs are written, so Release or
// expiry removes the id at once for new calls while the memory (and its
// reservation in --max_memory_bytes and the owner's quota) goes when the last
// running call lets go.
#ifndef TENSOROP_SERVER_DATA_HANDLE_STORE_H_
#define TENSOROP_SERVER_DATA_HANDLE_STORE_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/cancellation.h"
#include "core/operator.h"
#include "core/tensor.h"
#include "server/memory/memory_budget.h"
#include "server/memory/output_buffer.h"
#include "server/placement/device_pool.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::server {

struct HandleStoreOptions {
  // A handle's time to live after its last use (--handle_ttl_seconds), and
  // the longest a Put may ask for (--handle_max_ttl_seconds).
  absl::Duration default_ttl = absl::Seconds(600);
  absl::Duration max_ttl = absl::Hours(24);
  // Resident bytes one client may hold (--max_resident_bytes_per_client);
  // <= 0: no limit beyond the memory budget.
  int64_t max_bytes_per_client = 0;
  // Handles one client may hold, pending ones included
  // (--max_handles_per_client); <= 0: no limit beyond the memory budget.
  int64_t max_handles_per_client = 0;
  // This server's address as clients reach it (--advertise_address); empty:
  // set by SetReplica once the server listens.
  std::string replica;
  // Resident bytes are reserved here (--max_memory_bytes); null: unbounded.
  // Not owned.
  MemoryBudget* budget = nullptr;
  // How often expired handles are looked for; zero: only when used.
  absl::Duration sweep_interval = absl::Seconds(1);
  // Where handles on OpenCL devices live; null: host memory only. Not owned.
  DevicePool* devices = nullptr;
};

// What one handle's bookkeeping takes besides its bytes (its tensor object,
// map node, id, owner, layout; 660 to 880 bytes measured), reserved in the
// memory budget with it: a million one-byte handles are not free.
inline constexpr int64_t kHandleBookkeepingBytes = 1024;

// Who is asking: handles belong to `name`; `authenticated` says whether it is
// a verified identity (else the peer's address, and ids are capabilities).
struct HandleCaller {
  std::string name;
  bool authenticated = false;
};
// The caller of `context`: its token name or certificate subject
// (PeerIdentity), else "peer:<IP address>".
HandleCaller CallerOf(const grpc::ServerContextBase& context);

// The first 8 characters of `id` (escaped), the only part of an id that ever
// appears in a log line or a message.
std::string ShortId(absl::string_view id);

// One resident tensor. Immutable once made.
class ResidentTensor {
 public:
  ResidentTensor();
  ~ResidentTensor();
  const std::string& id() const { return id_; }
  // -1: in host memory (bytes()); else the OpenCL device (pool index) whose
  // buffer holds it (a view's: its base's, from byte_offset()), and bytes()
  // is empty.
  int device_index() const { return device_index_; }
  bool on_device() const { return device_index_ >= 0; }
  const DeviceResident* device_buffer() const {
    return base_ != nullptr ? base_->device_.get() : device_.get();
  }
  // Where its bytes live, as TensorHandle.backend says it: "cpu" or "opencl".
  absl::string_view backend() const { return on_device() ? "opencl" : "cpu"; }
  const std::string& owner() const { return owner_; }
  bool owner_authenticated() const { return owner_authenticated_; }
  const Layout& layout() const { return layout_; }
  // Its bytes in host memory; empty for a tensor on a device. A view's are
  // its base's, from byte_offset().
  std::span<const std::byte> bytes() const {
    if (on_device()) return {};
    if (base_ != nullptr) {
      return base_->bytes().subspan(static_cast<size_t>(base_offset_),
                                    static_cast<size_t>(layout_.buffer_bytes()));
    }
    return {buffer_.get(), static_cast<size_t>(layout_.buffer_bytes())};
  }
  // For a view (HandleStore::MakeView): the tensor whose bytes it shares,
  // held alive by it, and where in them it starts; else null and 0.
  const ResidentTensor* view_of() const { return base_.get(); }
  int64_t byte_offset() const { return base_offset_; }
  absl::Duration ttl() const { return ttl_; }
  absl::Time last_use() const {
    return absl::FromUnixMillis(last_use_ms_.load(std::memory_order_relaxed));
  }
  absl::Time expiry() const { return last_use() + ttl_; }

 private:
  friend class HandleStore;
  class Charge;  // the bytes held in the budget and the owner's quota

  std::string id_;
  std::string owner_;
  bool owner_authenticated_ = false;
  Layout layout_;
  // Declared before the buffer, so the budget gets its bytes back after they
  // were freed.
  std::unique_ptr<Charge> charge_;
  OutputBuffer buffer_;
  std::shared_ptr<const ResidentTensor> base_;  // a view's; never itself a view
  int64_t base_offset_ = 0;
  int device_index_ = -1;
  std::unique_ptr<DeviceResident> device_;
  absl::Duration ttl_;
  std::atomic<int64_t> last_use_ms_{0};
};

class HandleStore {
 public:
  // Bytes reserved for a tensor about to become resident: written by a Put or
  // an op, then Commit()ed. Dropped uncommitted, it gives everything back.
  class Pending {
   public:
    Pending() = default;
    // Host memory to write; null for a tensor on a device (Upload).
    std::byte* data() { return tensor_->buffer_.get(); }
    // For a tensor reserved with `charge_as_written`: `bytes` more of it are
    // about to be written, reserved in the memory budget first.
    absl::Status Written(int64_t bytes);
    const Layout& layout() const { return tensor_->layout_; }
    int device_index() const { return tensor_->device_index_; }
    const DeviceResident* device_buffer() const { return tensor_->device_.get(); }
    explicit operator bool() const { return tensor_ != nullptr; }

   private:
    friend class HandleStore;
    std::shared_ptr<ResidentTensor> tensor_;
    bool charge_as_written_ = false;
  };

  explicit HandleStore(HandleStoreOptions options);
  ~HandleStore();
  HandleStore(const HandleStore&) = delete;
  HandleStore& operator=(const HandleStore&) = delete;

  // A zero-padded buffer for `layout` owned by `caller`, counted in the
  // caller's handles and reserved in its quota and, in host memory
  // (`device_index` -1, or a device whose memory is host memory:
  // DevicePool::HostMemory), in the memory budget; on OpenCL device
  // `device_index`, in its resident limit. Every handle's bookkeeping
  // (kHandleBookkeepingBytes) is reserved in the budget too. With
  // `charge_as_written` the budget gets the tensor's bytes as they are written
  // (Pending::Written), not all at once: an upload holds what has arrived.
  // RESOURCE_EXHAUSTED naming the limit (--max_handles_per_client,
  // --max_resident_bytes_per_client, --max_memory_bytes,
  // --opencl_max_resident_bytes) and `what`.
  absl::StatusOr<Pending> Reserve(const HandleCaller& caller, const Layout& layout,
                                  absl::string_view what, int device_index = -1,
                                  bool charge_as_written = false);
  // A handle for `caller` on `layout` from `byte_offset` of `base`'s bytes
  // (non-negative strides; inside them): no copy, and where `base` is (host
  // memory or its OpenCL device, and lost with that device). It counts in
  // the caller's handles and reserves its bookkeeping (kHandleBookkeepingBytes)
  // in the budget; the bytes stay counted once, as `base`'s, for as long as
  // `base` or any view of it lives. A view of a view shares the first base.
  // RESOURCE_EXHAUSTED as Reserve's.
  // `op` names the operator whose output the view is, for tensorop_views_total.
  absl::StatusOr<std::shared_ptr<const ResidentTensor>> MakeView(
      const HandleCaller& caller, std::shared_ptr<const ResidentTensor> base, const Layout& layout,
      int64_t byte_offset, absl::string_view op, absl::string_view what);
  // Writes a pending device tensor's bytes (all of its layout's), and copies
  // a device tensor's bytes into `host` (its layout's buffer_bytes(), from a
  // view's offset in its base).
  absl::Status Upload(const Pending& pending, std::span<const std::byte> host,
                      const StopCheck& stop) const;
  absl::Status Download(const ResidentTensor& tensor, std::span<std::byte> host,
                        const StopCheck& stop) const;
  // Removes every handle on OpenCL device `index`, which failed: using one
  // later is NOT_FOUND "handle ... was lost: OpenCL device N failed".
  void LoseDevice(int index);
  // Makes `pending` (its bytes written) resident under a fresh id, living
  // `ttl` after each use (zero: the default; longer than the maximum: the
  // maximum).
  std::shared_ptr<const ResidentTensor> Commit(Pending pending,
                                               absl::Duration ttl = absl::ZeroDuration());
  // The tensor `id`, its last use now, for `caller`; NOT_FOUND naming `field`
  // and the id's first characters when there is none for this caller.
  absl::StatusOr<std::shared_ptr<const ResidentTensor>> Use(const HandleCaller& caller,
                                                            absl::string_view id,
                                                            absl::string_view field);
  // Removes the ids `caller` may use; others are ignored.
  void Release(const HandleCaller& caller, std::span<const std::string> ids);
  // `caller`'s handles by id, after `after` (exclusive), at most `limit`;
  // `more` says whether others follow.
  std::vector<std::shared_ptr<const ResidentTensor>> List(const HandleCaller& caller,
                                                          absl::string_view after, int limit,
                                                          bool* more) const;
  // Removes the handles unused for their time to live as of `now`; returns how
  // many. The sweeper calls it; tests call it with a later `now`.
  int ExpireIdle(absl::Time now);

  const HandleStoreOptions& options() const { return options_; }
  // The replica named in handles and messages: options().replica, unless it
  // was empty and SetReplica (the first address the server listens on) ran.
  std::string replica() const;
  void SetReplica(std::string replica);

  // Draining (Server::Shutdown of a replica holding handles): no other
  // replica can answer a call on these handles, so this one keeps serving
  // those until its grace period ends, and turns every other call away
  // (Admit) for clients to retry on another replica.
  void StartDraining() { draining_.store(true, std::memory_order_relaxed); }
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  // Whether a call may run here. The one rule while draining: a call that
  // reads a handle of this replica (`reads_handle`) is served; any other call,
  // and every Put, is UNAVAILABLE "replica R is shutting down: ...", which
  // clients' retry policy sends to another replica. OK when not draining.
  absl::Status Admit(bool reads_handle) const;
  // When a call last used a handle here (Use), for a shutdown that waits
  // only while handles are being read; InfinitePast before any.
  absl::Time last_use() const {
    const int64_t ms = last_use_ms_.load(std::memory_order_relaxed);
    return ms == 0 ? absl::InfinitePast() : absl::FromUnixMillis(ms);
  }
  // For /metrics: host memory, then OpenCL devices.
  int64_t resident_bytes() const { return resident_bytes_.load(std::memory_order_relaxed); }
  int64_t device_resident_bytes() const {
    return device_resident_bytes_.load(std::memory_order_relaxed);
  }
  // Handles held: all of them, or those on OpenCL devices or in host memory.
  int64_t handles() const { return handles(false) + handles(true); }
  int64_t handles(bool on_device) const;
  int64_t lost_total() const { return lost_total_.load(std::memory_order_relaxed); }
  int64_t expired_total() const { return expired_total_.load(std::memory_order_relaxed); }
  int64_t quota_refusals_total() const {
    return quota_refusals_total_.load(std::memory_order_relaxed);
  }
  int64_t copies_total() const { return copies_total_.load(std::memory_order_relaxed); }
  // Views made: of `op`'s outputs (kOperators' names), or of every operator's.
  int64_t views_total(absl::string_view op) const;
  int64_t views_total() const;
  // A resident input copied to another backend for one call.
  void CountCopy() { copies_total_.fetch_add(1, std::memory_order_relaxed); }

 private:
  friend class ResidentTensor::Charge;
  using TensorMap = std::map<std::string, std::shared_ptr<ResidentTensor>, std::less<>>;
  // Adds `tensor` (its id set) to tensors_ and the indexes; under mutex_.
  void InsertLocked(std::shared_ptr<ResidentTensor> tensor);
  // Removes `*it` from tensors_ and the indexes, advancing `*it`; the
  // tensor is returned to be freed outside the lock. Under mutex_.
  std::shared_ptr<ResidentTensor> TakeLocked(TensorMap::iterator* it);
  void Sweep();
  void Uncharge(const std::string& owner, int64_t bytes, bool on_device);
  // Counts a handle of `bytes` for `caller` against its quotas, or says which
  // is full (RESOURCE_EXHAUSTED naming the flag and `what`).
  absl::Status TakeQuota(const HandleCaller& caller, int64_t bytes, absl::string_view what);
  // Whether `device_index` keeps its bytes in host memory (none: -1).
  bool InHostMemory(int device_index) const;
  static bool MayUse(const HandleCaller& caller, const ResidentTensor& tensor);

  const HandleStoreOptions options_;
  mutable std::mutex mutex_;
  std::string replica_;  // guarded by mutex_
  TensorMap tensors_;    // guarded by mutex_
  // tensors_'s handles by owner, as (owner, id) views of the tensor's own
  // strings, so that a caller's page of ListHandles costs that page, not
  // every handle of every client. Guarded by mutex_.
  std::set<std::pair<absl::string_view, absl::string_view>> by_owner_;
  // Handles in host memory and on devices, for the metrics; under mutex_.
  std::array<int64_t, 2> handle_counts_{};
  // Held, by owner: bytes, and handles (pending ones too).
  std::map<std::string, int64_t, std::less<>> client_bytes_;
  std::map<std::string, int64_t, std::less<>> client_handles_;
  std::atomic<int64_t> resident_bytes_{0};
  std::atomic<int64_t> device_resident_bytes_{0};
  std::atomic<int64_t> lost_total_{0};
  // Ids of handles a device failure took, and the device, so that a later
  // use says so; the oldest forgotten past kMaxLost.
  struct Lost {
    std::string owner;
    bool owner_authenticated = false;
    int device_index = 0;
  };
  static constexpr size_t kMaxLost = 1 << 16;
  std::map<std::string, Lost, std::less<>> lost_;  // guarded by mutex_
  std::deque<std::string> lost_order_;             // guarded by mutex_
  std::atomic<int64_t> expired_total_{0};
  std::atomic<int64_t> quota_refusals_total_{0};
  std::atomic<int64_t> copies_total_{0};
  std::array<std::atomic<int64_t>, kOperators.size()> views_total_{};  // by kOperators' index
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> last_use_ms_{0};  // of any handle (last_use())
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread sweeper_;
};

// The handles one request reads, held from input resolution until its outputs
// are written.
using HandlePins = std::vector<std::shared_ptr<const ResidentTensor>>;

// The store and the caller a request's handles are resolved for.
struct HandleAccess {
  HandleStore* store = nullptr;
  HandleCaller caller;
  // Set for the steps of a chain that was admitted as a whole
  // (HandleStore::Admit): a step reading no handle itself is still part of a
  // call on a handle here.
  bool admitted = false;
  // Whether kept outputs of a window on a handle may be views of it
  // (HandleStore::MakeView). A chain's steps say no: their outputs keep the
  // layouts the chain was planned with.
  bool views = true;
};

// Points every input of `request` that names a handle at its resident bytes
// in `op` (from ToOpRequest of the same request), with the handle's dtype,
// sizes and strides, holding the tensors in `pins`. INVALID_ARGUMENT naming
// the field when the request gives a dtype, sizes or strides that differ from
// the handle's, or data besides the handle; NOT_FOUND naming it when there is
// no such handle; FAILED_PRECONDITION without a store. Then admits the
// request (HandleStore::Admit): while the store drains, it must have read a
// handle here (or be part of an admitted call).
// An input whose handle lives on an OpenCL device is recorded in
// `on_device` by name, its data left empty for the caller to stand in for.
using DeviceInputs = std::map<std::string, const ResidentTensor*, std::less<>>;
absl::Status ResolveHandleInputs(const v1::RunRequest& request, const HandleAccess* access,
                                 OpRequest& op, HandlePins& pins, DeviceInputs& on_device);

// Whether any input of `request` is a handle.
bool ReadsHandles(const v1::RunRequest& request);
// Whether any output of `request` is to be kept, and the bytes of those that
// are (an answer does not carry them).
bool KeepsOutputs(const v1::RunRequest& request);
int64_t KeptOutputBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts);
// A bound on the bytes the kept outputs' handles add to an answer.
int64_t KeptAnswerBytes(const v1::RunRequest& request, const std::vector<Layout>& layouts);

// Ids one Release may name, and a ListHandles page's default and largest size
// (the proto and docs/handles.md say so).
inline constexpr int kMaxReleaseIds = 1000;
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
// TensorOp.Release and ListHandles for `caller` on `store` (null: a server that
// keeps no handles), from their parsed requests: INVALID_ARGUMENT past the
// limits above, each call's cost bounded by them (a batch of ids, or a page
// of the caller's own handles: HandleStore::List).
absl::Status ReleaseAnswer(HandleStore* store, const HandleCaller& caller,
                           const v1::ReleaseRequest& request);
absl::Status ListHandlesAnswer(const HandleStore* store, const HandleCaller& caller,
                               const v1::ListHandlesRequest& request,
                               v1::ListHandlesResponse& response);

// `tensor` as the API's TensorHandle.
void ToProtoHandle(const ResidentTensor& tensor, absl::string_view replica,
                   v1::TensorHandle* handle);

class Metrics;
// tensorop_resident_bytes{backend}, tensorop_handles{backend},
// tensorop_handle_expiries_total, tensorop_handle_quota_refusals_total,
// tensorop_handle_copies_total, tensorop_handles_lost_total and
// tensorop_views_total, sampled at each scrape.
void AddHandleSeries(Metrics& metrics, const HandleStore& store);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_DATA_HANDLE_STORE_H_
