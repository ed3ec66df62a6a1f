#include "server/data/handle_store.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "server/security/auth.h"
#include "server/telemetry/metrics.h"

namespace tensorop::server {
namespace {

// The index of `op`'s row in kOperators (the views counter it has), if any.
std::optional<size_t> OperatorRow(absl::string_view op) {
  for (size_t i = 0; i < kOperators.size(); ++i) {
    if (kOperators[i].name == op) return i;
  }
  return std::nullopt;
}

// 128 bits from the OS's random source, as 32 hex digits.
std::string RandomId() {
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t got = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
    // EINTR: try again; getrandom blocks only before the pool is initialised.
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

// "1.2.3.4" of "ipv4:1.2.3.4:5678", "::1" of "ipv6:[::1]:5678", else the peer
// as gRPC names it ("unix:...").
std::string PeerAddress(absl::string_view peer) {
  if (absl::ConsumePrefix(&peer, "ipv4:")) return std::string(peer.substr(0, peer.rfind(':')));
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    peer = peer.substr(0, peer.rfind(':'));
    absl::ConsumePrefix(&peer, "[");
    absl::ConsumeSuffix(&peer, "]");
    return std::string(peer);
  }
  return std::string(peer);
}

}  // namespace

HandleCaller CallerOf(const grpc::ServerContextBase& context) {
  std::string identity = PeerIdentity(context);
  if (!identity.empty()) return HandleCaller{.name = std::move(identity), .authenticated = true};
  return HandleCaller{.name = absl::StrCat("peer:", PeerAddress(context.peer())),
                      .authenticated = false};
}

std::string ShortId(absl::string_view id) {
  return absl::StrCat(absl::CHexEscape(id.substr(0, 8)), id.size() > 8 ? "..." : "");
}

// What a resident tensor holds against the server: its reservation in the
// memory budget, its bytes in the owner's quota and the resident total.
class ResidentTensor::Charge {
 public:
  Charge(HandleStore* store, std::string owner, int64_t bytes, bool on_device,
         MemoryBudget::Reservation reservation, std::string what)
      : store_(store),
        owner_(std::move(owner)),
        bytes_(bytes),
        on_device_(on_device),
        reservation_(std::move(reservation)),
        what_(std::move(what)) {}
  ~Charge() { store_->Uncharge(owner_, bytes_, on_device_); }
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;

  // Reserves `bytes` more of the tensor's as they are written.
  absl::Status AddWritten(int64_t bytes) { return reservation_.Grow(bytes, what_); }

 private:
  HandleStore* const store_;
  const std::string owner_;
  const int64_t bytes_;
  const bool on_device_;
  MemoryBudget::Reservation reservation_;
  const std::string what_;
};

absl::Status HandleStore::Pending::Written(int64_t bytes) {
  if (!charge_as_written_) return absl::OkStatus();
  return tensor_->charge_->AddWritten(bytes);
}

ResidentTensor::ResidentTensor() = default;
ResidentTensor::~ResidentTensor() = default;

HandleStore::HandleStore(HandleStoreOptions options)
    : options_(std::move(options)), replica_(options_.replica) {
  if (options_.sweep_interval > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] { Sweep(); });
  }
}

HandleStore::~HandleStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  // Tensors still held by a call outlive the map, not the store: the server
  // destroys the store after its calls ended.
  TensorMap tensors;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    by_owner_.clear();
    tensors.swap(tensors_);
  }
}

void HandleStore::InsertLocked(std::shared_ptr<ResidentTensor> tensor) {
  by_owner_.emplace(tensor->owner_, tensor->id_);
  ++handle_counts_[tensor->on_device() ? 1 : 0];
  const std::string& id = tensor->id_;
  tensors_.emplace(id, std::move(tensor));
}

std::shared_ptr<ResidentTensor> HandleStore::TakeLocked(TensorMap::iterator* it) {
  std::shared_ptr<ResidentTensor> tensor = std::move((*it)->second);
  by_owner_.erase({tensor->owner_, tensor->id_});
  --handle_counts_[tensor->on_device() ? 1 : 0];
  *it = tensors_.erase(*it);
  return tensor;
}

void HandleStore::Sweep() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, absl::ToChronoNanoseconds(options_.sweep_interval));
    if (stopping_) break;
    lock.unlock();
    ExpireIdle(absl::Now());
    lock.lock();
  }
}

void HandleStore::Uncharge(const std::string& owner, int64_t bytes, bool on_device) {
  (on_device ? device_resident_bytes_ : resident_bytes_)
      .fetch_sub(bytes, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto count = client_handles_.find(owner); count != client_handles_.end()) {
    if (--count->second <= 0) client_handles_.erase(count);
  }
  auto found = client_bytes_.find(owner);
  if (found == client_bytes_.end()) return;
  found->second -= bytes;
  if (found->second <= 0) client_bytes_.erase(found);
}

bool HandleStore::InHostMemory(int device_index) const {
  return device_index < 0 ||
         (options_.devices != nullptr && options_.devices->HostMemory(device_index));
}

absl::Status HandleStore::TakeQuota(const HandleCaller& caller, int64_t bytes,
                                    absl::string_view what) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t& count = client_handles_[caller.name];
  if (options_.max_handles_per_client > 0 && count >= options_.max_handles_per_client) {
    quota_refusals_total_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(
        absl::StrCat("keeping ", what, " would give ", caller.name, " ", count + 1,
                     " handles, over --max_handles_per_client=", options_.max_handles_per_client,
                     "; release handles first"));
  }
  int64_t& held = client_bytes_[caller.name];
  if (options_.max_bytes_per_client > 0 && held + bytes > options_.max_bytes_per_client) {
    const int64_t before = held;
    if (held == 0) client_bytes_.erase(caller.name);
    quota_refusals_total_.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrCat(
        "keeping the ", bytes, " bytes of ", what, " would take the resident bytes of ",
        caller.name, " from ", before, " to ", before + bytes,
        ", over --max_resident_bytes_per_client=", options_.max_bytes_per_client,
        "; release handles first"));
  }
  held += bytes;
  ++count;
  return absl::OkStatus();
}

absl::StatusOr<HandleStore::Pending> HandleStore::Reserve(const HandleCaller& caller,
                                                          const Layout& layout,
                                                          absl::string_view what, int device_index,
                                                          bool charge_as_written) {
  const int64_t bytes = layout.buffer_bytes();
  const bool on_device = device_index >= 0;
  if (on_device && options_.devices == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": this server has no OpenCL devices to keep tensors on"));
  }
  RETURN_IF_ERROR(TakeQuota(caller, bytes, what));
  (on_device ? device_resident_bytes_ : resident_bytes_)
      .fetch_add(bytes, std::memory_order_relaxed);
  // Bytes in host memory are the budget's: those of a device whose memory
  // is host memory too (PoCL's CPU device), or a handle on it would be free.
  const bool budgeted = InHostMemory(device_index);
  // A padded layout is zeroed now, every page touched: charged now.
  charge_as_written =
      charge_as_written && budgeted && layout.buffer_elements == layout.element_count;
  MemoryBudget::Reservation reservation;
  if (options_.budget != nullptr) {
    absl::StatusOr<MemoryBudget::Reservation> reserved = options_.budget->TryReserve(
        kHandleBookkeepingBytes + (budgeted && !charge_as_written ? bytes : 0), what);
    if (!reserved.ok()) {
      Uncharge(caller.name, bytes, on_device);
      return reserved.status();
    }
    reservation = *std::move(reserved);
  }
  auto tensor = std::make_shared<ResidentTensor>();
  // From here the charge gives everything back however this ends.
  // Only an upload charged as written names itself again (in a refusal of a
  // later chunk); a kept output's description is not kept with it.
  tensor->charge_ = std::make_unique<ResidentTensor::Charge>(
      this, caller.name, bytes, on_device, std::move(reservation),
      charge_as_written ? std::string(what) : std::string());
  if (on_device) {
    // Padding reads as zero, as in host memory.
    ASSIGN_OR_RETURN(tensor->device_,
                     options_.devices->AllocateResident(
                         device_index, bytes,
                         /*zero=*/layout.buffer_elements > layout.element_count, what));
    tensor->device_index_ = device_index;
  } else {
    ASSIGN_OR_RETURN(tensor->buffer_, AllocateOutput(layout, /*pool=*/nullptr));
  }
  tensor->owner_ = caller.name;
  tensor->owner_authenticated_ = caller.authenticated;
  tensor->layout_ = layout;
  Pending pending;
  pending.tensor_ = std::move(tensor);
  pending.charge_as_written_ = charge_as_written;
  return pending;
}

absl::StatusOr<std::shared_ptr<const ResidentTensor>> HandleStore::MakeView(
    const HandleCaller& caller, std::shared_ptr<const ResidentTensor> base, const Layout& layout,
    int64_t byte_offset, absl::string_view op, absl::string_view what) {
  RETURN_IF_ERROR(TakeQuota(caller, 0, what));
  const bool on_device = base->on_device();
  MemoryBudget::Reservation reservation;
  if (options_.budget != nullptr) {
    absl::StatusOr<MemoryBudget::Reservation> reserved =
        options_.budget->TryReserve(kHandleBookkeepingBytes, what);
    if (!reserved.ok()) {
      Uncharge(caller.name, 0, on_device);
      return reserved.status();
    }
    reservation = *std::move(reserved);
  }
  auto tensor = std::make_shared<ResidentTensor>();
  tensor->charge_ = std::make_unique<ResidentTensor::Charge>(this, caller.name, 0, on_device,
                                                             std::move(reservation), std::string());
  // A view of a tensor on a device stays there (and is lost with it).
  tensor->device_index_ = base->device_index_;
  if (base->base_ != nullptr) {  // share the first base: no chain of views to walk
    byte_offset += base->base_offset_;
    base = base->base_;
  }
  tensor->base_ = std::move(base);
  tensor->base_offset_ = byte_offset;
  tensor->owner_ = caller.name;
  tensor->owner_authenticated_ = caller.authenticated;
  tensor->layout_ = layout;
  if (std::optional<size_t> row = OperatorRow(op)) {
    views_total_[*row].fetch_add(1, std::memory_order_relaxed);
  }
  Pending pending;
  pending.tensor_ = std::move(tensor);
  return Commit(std::move(pending));
}

std::shared_ptr<const ResidentTensor> HandleStore::Commit(Pending pending, absl::Duration ttl) {
  std::shared_ptr<ResidentTensor> tensor = std::move(pending.tensor_);
  if (ttl <= absl::ZeroDuration()) ttl = options_.default_ttl;
  tensor->ttl_ = std::min(ttl, options_.max_ttl);
  tensor->last_use_ms_.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  do {
    tensor->id_ = RandomId();
  } while (tensors_.contains(tensor->id_));
  InsertLocked(tensor);
  return tensor;
}

bool HandleStore::MayUse(const HandleCaller& caller, const ResidentTensor& tensor) {
  if (!tensor.owner_authenticated()) return true;  // the id is the capability
  return caller.authenticated && caller.name == tensor.owner();
}

absl::StatusOr<std::shared_ptr<const ResidentTensor>> HandleStore::Use(const HandleCaller& caller,
                                                                       absl::string_view id,
                                                                       absl::string_view field) {
  const absl::Time now = absl::Now();
  std::shared_ptr<ResidentTensor> expired;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = tensors_.find(id);
  if (found != tensors_.end() && MayUse(caller, *found->second)) {
    ResidentTensor& tensor = *found->second;
    if (tensor.expiry() >= now) {
      tensor.last_use_ms_.store(absl::ToUnixMillis(now), std::memory_order_relaxed);
      last_use_ms_.store(absl::ToUnixMillis(now), std::memory_order_relaxed);
      return found->second;
    }
    expired = TakeLocked(&found);
    expired_total_.fetch_add(1, std::memory_order_relaxed);
  }
  if (auto lost = lost_.find(id);
      lost != lost_.end() && (!lost->second.owner_authenticated ||
                              (caller.authenticated && caller.name == lost->second.owner))) {
    return absl::NotFoundError(absl::StrCat(field, ": handle ", ShortId(id),
                                            " was lost: OpenCL device ", lost->second.device_index,
                                            " failed"));
  }
  return absl::NotFoundError(
      absl::StrCat(field, ": handle ", ShortId(id), " does not exist",
                   replica_.empty() ? "" : absl::StrCat(" on replica ", replica_),
                   " (released, expired, or never made here)"));
}

void HandleStore::Release(const HandleCaller& caller, std::span<const std::string> ids) {
  // A batch at a time under the lock, the tensors freed outside it, so that a
  // long list never holds other calls' lookups for long.
  constexpr size_t kIdsPerLock = 128;
  for (size_t begin = 0; begin < ids.size(); begin += kIdsPerLock) {
    std::vector<std::shared_ptr<ResidentTensor>> released;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& id : ids.subspan(begin, std::min(kIdsPerLock, ids.size() - begin))) {
      auto found = tensors_.find(id);
      if (found == tensors_.end() || !MayUse(caller, *found->second)) continue;
      released.push_back(TakeLocked(&found));
    }
  }
}

std::vector<std::shared_ptr<const ResidentTensor>> HandleStore::List(const HandleCaller& caller,
                                                                     absl::string_view after,
                                                                     int limit, bool* more) const {
  std::vector<std::shared_ptr<const ResidentTensor>> page;
  *more = false;
  std::lock_guard<std::mutex> lock(mutex_);
  const absl::string_view owner = caller.name;
  for (auto it = by_owner_.upper_bound({owner, after}); it != by_owner_.end() && it->first == owner;
       ++it) {
    if (static_cast<int>(page.size()) == limit) {
      *more = true;
      break;
    }
    page.push_back(tensors_.find(it->second)->second);
  }
  return page;
}

int HandleStore::ExpireIdle(absl::Time now) {
  std::vector<std::shared_ptr<ResidentTensor>> expired;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = tensors_.begin(); it != tensors_.end();) {
      if (it->second->expiry() < now) {
        expired.push_back(TakeLocked(&it));
      } else {
        ++it;
      }
    }
  }
  expired_total_.fetch_add(static_cast<int64_t>(expired.size()), std::memory_order_relaxed);
  return static_cast<int>(expired.size());
}

std::string HandleStore::replica() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replica_;
}

void HandleStore::SetReplica(std::string replica) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (options_.replica.empty()) replica_ = std::move(replica);
}

absl::Status HandleStore::Admit(bool reads_handle) const {
  if (!draining() || reads_handle) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("replica ", replica(),
                                             " is shutting down: it serves only calls on its "
                                             "handles until --shutdown_grace_seconds ends"));
}

int64_t HandleStore::views_total(absl::string_view op) const {
  const std::optional<size_t> row = OperatorRow(op);
  return row.has_value() ? views_total_[*row].load(std::memory_order_relaxed) : 0;
}

int64_t HandleStore::views_total() const {
  int64_t total = 0;
  for (const std::atomic<int64_t>& made : views_total_) {
    total += made.load(std::memory_order_relaxed);
  }
  return total;
}

int64_t HandleStore::handles(bool on_device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handle_counts_[on_device ? 1 : 0];
}

absl::Status HandleStore::Upload(const Pending& pending, std::span<const std::byte> host,
                                 const StopCheck& stop) const {
  const ResidentTensor& tensor = *pending.tensor_;
  return options_.devices->WriteResident(tensor.device_index_, *tensor.device_, host, stop);
}

absl::Status HandleStore::Download(const ResidentTensor& tensor, std::span<std::byte> host,
                                   const StopCheck& stop) const {
  return options_.devices->ReadResident(tensor.device_index_, *tensor.device_buffer(),
                                        tensor.base_offset_, host, stop);
}

void HandleStore::LoseDevice(int index) {
  std::vector<std::shared_ptr<ResidentTensor>> lost;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = tensors_.begin(); it != tensors_.end();) {
    if (it->second->device_index() != index) {
      ++it;
      continue;
    }
    lost_.insert_or_assign(it->first, Lost{.owner = it->second->owner(),
                                           .owner_authenticated = it->second->owner_authenticated(),
                                           .device_index = index});
    lost_order_.push_back(it->first);
    lost.push_back(TakeLocked(&it));
  }
  while (lost_order_.size() > kMaxLost) {
    lost_.erase(lost_order_.front());
    lost_order_.pop_front();
  }
  lost_total_.fetch_add(static_cast<int64_t>(lost.size()), std::memory_order_relaxed);
}

void AddHandleSeries(Metrics& metrics, const HandleStore& store) {
  const Labels cpu = {{"backend", "cpu"}};
  const Labels opencl = {{"backend", "opencl"}};
  const std::string resident_help =
      "Bytes of tensors held on the server for handles (Put, OutputDesc.keep), by where they "
      "live.";
  metrics.AddSampled("tensorop_resident_bytes", resident_help, "gauge", cpu,
                     [&store] { return store.resident_bytes(); });
  metrics.AddSampled("tensorop_resident_bytes", resident_help, "gauge", opencl,
                     [&store] { return store.device_resident_bytes(); });
  const std::string handles_help = "Handles held now, by where their bytes live.";
  metrics.AddSampled("tensorop_handles", handles_help, "gauge", cpu,
                     [&store] { return store.handles(/*on_device=*/false); });
  metrics.AddSampled("tensorop_handles", handles_help, "gauge", opencl,
                     [&store] { return store.handles(/*on_device=*/true); });
  metrics.AddSampled("tensorop_handles_lost_total",
                     "Handles lost because the OpenCL device holding them failed.", "counter", {},
                     [&store] { return store.lost_total(); });
  metrics.AddSampled("tensorop_handle_expiries_total",
                     "Handles removed because nobody used them for their time to live.", "counter",
                     {}, [&store] { return store.expired_total(); });
  metrics.AddSampled("tensorop_handle_quota_refusals_total",
                     "Puts and kept outputs refused over --max_resident_bytes_per_client.",
                     "counter", {}, [&store] { return store.quota_refusals_total(); });
  for (const OperatorInfo& op : kOperators) {
    metrics.AddSampled("tensorop_views_total",
                       "Kept outputs made as views of a handle's bytes (copies saved), by the "
                       "operator whose output each is.",
                       "counter", {{"op", std::string(op.name)}},
                       [&store, name = op.name] { return store.views_total(name); });
  }
  metrics.AddSampled("tensorop_handle_copies_total",
                     "Resident inputs copied to another backend for one call.", "counter", {},
                     [&store] { return store.copies_total(); });
}

}  // namespace tensorop::server
