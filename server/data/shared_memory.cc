#include "server/data/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/checked_math.h"
#include "core/dtype.h"
#include "core/status_macros.h"
#include "server/data/mapping_guard.h"
#include "server/security/auth.h"
#include "server/telemetry/metrics.h"
#include "server/wire/quoted.h"

namespace tensorop::server {

namespace {

absl::Status ShrankWhileUsed(absl::string_view key, absl::string_view name,
                             absl::string_view field) {
  return absl::FailedPreconditionError(
      absl::StrCat(field, field.empty() ? "" : ": ", "shared memory object ", Quoted(key),
                   " of region ", Quoted(name),
                   " shrank while a request used it; unregister the region and register it again"));
}

absl::string_view WithoutSlash(absl::string_view key) {
  if (!key.empty() && key.front() == '/') key.remove_prefix(1);
  return key;
}

}  // namespace

// One mapped object. Destroyed (unmapped, its reservation given back) when the
// registry has dropped it and the last pin is gone.
class SharedMemoryRegistry::Region {
 public:
  // `mapping` (of `mapped_bytes`) starts at the page holding the object's
  // byte `offset`, where the region starts.
  // `fd` (owned from here) is the object's, `object` its fstat when opened.
  Region(std::string name, std::string key, int64_t offset, int64_t byte_size, int fd,
         const struct stat& object, void* mapping, int64_t mapped_bytes,
         MemoryBudget::Reservation reservation, std::unique_ptr<WatchedMapping> watch)
      : name_(std::move(name)),
        key_(std::move(key)),
        offset_(offset),
        byte_size_(byte_size),
        fd_(fd),
        device_(object.st_dev),
        inode_(object.st_ino),
        mapping_(mapping),
        mapped_bytes_(mapped_bytes),
        base_(static_cast<std::byte*>(mapping) + (mapped_bytes - byte_size)),
        reservation_(std::move(reservation)),
        watch_(std::move(watch)) {}
  ~Region() {
    watch_.reset();
    munmap(mapping_, static_cast<size_t>(mapped_bytes_));
    close(fd_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  int64_t offset() const { return offset_; }
  int64_t byte_size() const { return byte_size_; }
  std::span<std::byte> bytes() const { return {base_, static_cast<size_t>(byte_size_)}; }
  RegionInfo Info() const { return RegionInfo{name_, key_, offset_, byte_size_, in_use()}; }
  int in_use() const { return in_use_.load(std::memory_order_acquire); }
  void Use() {
    in_use_.fetch_add(1, std::memory_order_acq_rel);
    Touch();
  }
  void Release() {
    Touch();
    in_use_.fetch_sub(1, std::memory_order_acq_rel);
  }
  void Touch() { last_used_ns_.store(absl::ToUnixNanos(absl::Now()), std::memory_order_release); }
  absl::Time last_used() const {
    return absl::FromUnixNanos(last_used_ns_.load(std::memory_order_acquire));
  }
  // Whether the object still holds every mapped byte: a client that shrank it
  // would make our reads fault (SIGBUS) past its new end.
  // One fstat of the descriptor the region keeps.
  bool StillCovered() const {
    struct stat info {};
    return fstat(fd_, &info) == 0 && info.st_size - offset_ >= byte_size_;
  }
  // Whether `object` (an fstat) is the object this region maps, by device and
  // inode: a client that unlinks and re-creates its key makes a new one.
  bool Maps(const struct stat& object) const {
    return object.st_dev == device_ && object.st_ino == inode_;
  }
  // Whether the object shrank while a request used the region: an access
  // past its new end faulted (the mapping now holds stand-in pages), or a
  // request found it short once done (a truncation inside the last page
  // faults nowhere: those bytes read as zeros and writes there are lost).
  bool faulted() const { return watch_->faulted() || shrank_.load(std::memory_order_acquire); }
  // Marks the region faulted, as a fault does, when the object no longer
  // holds every mapped byte; whether it still does.
  bool CheckCovered() {
    if (StillCovered()) return true;
    shrank_.store(true, std::memory_order_release);
    return false;
  }

 private:
  const std::string name_;
  const std::string key_;
  const int64_t offset_;
  const int64_t byte_size_;
  const int fd_;
  const dev_t device_;
  const ino_t inode_;
  void* const mapping_;
  const int64_t mapped_bytes_;
  std::byte* const base_;
  MemoryBudget::Reservation reservation_;
  std::unique_ptr<WatchedMapping> watch_;
  std::atomic<int> in_use_{0};
  std::atomic<bool> shrank_{false};
  std::atomic<int64_t> last_used_ns_{absl::ToUnixNanos(absl::Now())};
};

SharedMemoryRegistry::Pin& SharedMemoryRegistry::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    Reset();
    region_ = std::move(other.region_);
  }
  return *this;
}

SharedMemoryRegistry::Pin::~Pin() { Reset(); }

void SharedMemoryRegistry::Pin::Reset() {
  if (region_ != nullptr) region_->Release();
  region_.reset();
}

const std::string& SharedMemoryRegistry::Pin::name() const { return region_->name(); }
const std::string& SharedMemoryRegistry::Pin::key() const { return region_->key(); }
std::span<std::byte> SharedMemoryRegistry::Pin::bytes() const { return region_->bytes(); }

SharedMemoryRegistry::SharedMemoryRegistry(SharedMemoryOptions options)
    : options_(std::move(options)) {
  if (options_.idle_timeout > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] { Sweep(); });
  }
}

SharedMemoryRegistry::~SharedMemoryRegistry() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

void SharedMemoryRegistry::Sweep() {
  const absl::Duration interval = std::max(
      std::min(options_.sweep_interval, options_.idle_timeout / 4), absl::Milliseconds(10));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, absl::ToChronoNanoseconds(interval));
    if (stopping_) break;
    lock.unlock();
    ExpireIdle(absl::Now());
    lock.lock();
  }
}

namespace {

// An object opened for a registration: its descriptor, closed unless a
// region takes it, and its fstat.
struct OpenedObject {
  OpenedObject() = default;
  OpenedObject(const OpenedObject&) = delete;
  OpenedObject& operator=(const OpenedObject&) = delete;
  ~OpenedObject() {
    if (fd >= 0) close(fd);
  }
  int Take() { return std::exchange(fd, -1); }

  int fd = -1;
  struct stat info {};
};

// Why `region` no longer maps what the key names now (`object`, of which
// bytes from `offset` on are to be mapped): empty when it still does.
std::string ChangedSince(const SharedMemoryRegistry::Region& region, const OpenedObject& object,
                         int64_t offset, absl::string_view key);

}  // namespace

namespace {

// The checks of a registration that need no object: where the caller is, the
// name, key, size and offset as given.
absl::Status CheckRegistration(absl::string_view name, absl::string_view key, int64_t byte_size,
                               int64_t offset, bool local, bool allow_remote) {
  if (!local && !allow_remote) {
    return absl::PermissionDeniedError(
        "shared memory is for clients on the server's host (a Unix socket or a loopback "
        "address): a remote client cannot have made the object it names (--shared_memory_remote "
        "allows it)");
  }
  RETURN_IF_ERROR(CheckRegionName(name, "region"));
  RETURN_IF_ERROR(CheckSharedMemoryKey(key, "key"));
  if (byte_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte_size: ", byte_size, " must not be negative (0: the whole object)"));
  }
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", offset, " must not be negative"));
  }
  return absl::OkStatus();
}

// Opens `path`, the object `key` names, into `object`. `renewing`: `name` is
// registered already, and keeps its mapping when the object cannot be opened.
absl::Status OpenObject(const std::string& path, absl::string_view key, absl::string_view name,
                        bool renewing, OpenedObject& object) {
  // O_NOFOLLOW: a symbolic link in /dev/shm cannot point us elsewhere.
  object.fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (object.fd < 0) {
    const int error = errno;
    std::string what = absl::StrCat("key: cannot open shared memory object ", Quoted(key), " (",
                                    path, "): ", std::strerror(error));
    if (renewing) {
      absl::StrAppend(&what, "; region ", Quoted(name),
                      " still maps the object it named when it was registered");
    }
    if (error == ENOENT) return absl::NotFoundError(what);
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(what);
    return absl::InvalidArgumentError(what);
  }
  if (fstat(object.fd, &object.info) != 0 || !S_ISREG(object.info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: ", Quoted(key), " (", path, ") is not a shared memory object"));
  }
  return absl::OkStatus();
}

// The bytes of `object` (named by `key`) to map from `offset`: `byte_size`,
// or with 0 the rest of it; INVALID_ARGUMENT when they are not inside it.
absl::StatusOr<int64_t> SizeToMap(const OpenedObject& object, absl::string_view key,
                                  int64_t byte_size, int64_t offset) {
  const int64_t object_size = static_cast<int64_t>(object.info.st_size);
  if (offset > 0 && offset >= object_size) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", offset,
                                                   " is not inside shared memory object ",
                                                   Quoted(key), " of ", object_size, " bytes"));
  }
  const int64_t size = byte_size == 0 ? object_size - offset : byte_size;
  if (size == 0 || size > object_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte_size: ", size, " bytes of shared memory object ", Quoted(key), " requested",
        offset != 0 ? absl::StrCat(" from offset ", offset) : std::string(), "; it has ",
        object_size, size == 0 ? " (an empty object cannot be mapped)" : ""));
  }
  return size;
}

// `size` bytes of `object` (named by `key`, `bare` without its slash) from
// `offset` mapped as region `name`, reserved first in `budget` (null: none)
// and watched for faults; the region takes the object's descriptor.
absl::StatusOr<std::shared_ptr<SharedMemoryRegistry::Region>> MapObject(
    absl::string_view name, const std::string& bare, absl::string_view key, int64_t offset,
    int64_t size, MemoryBudget* budget, OpenedObject& object) {
  // mmap's offset must be a multiple of the page size: map from the page
  // holding `offset`.
  const int64_t page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  const int64_t map_offset = offset - offset % page;
  const int64_t map_bytes = size + (offset - map_offset);
  MemoryBudget::Reservation reservation;
  if (budget != nullptr) {
    ASSIGN_OR_RETURN(
        reservation,
        budget->TryReserve(size, absl::StrCat("mapping shared memory region ", Quoted(name))));
  }
  void* base = mmap(nullptr, static_cast<size_t>(map_bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                    object.fd, static_cast<off_t>(map_offset));
  if (base == MAP_FAILED) {
    const int error = errno;
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size,
                                                     " bytes of shared memory object ", Quoted(key),
                                                     ": ", std::strerror(error)));
  }
  absl::StatusOr<std::unique_ptr<WatchedMapping>> watch =
      WatchedMapping::Watch(base, static_cast<size_t>(map_bytes));
  if (!watch.ok()) {
    munmap(base, static_cast<size_t>(map_bytes));
    return watch.status();
  }
  return std::make_shared<SharedMemoryRegistry::Region>(std::string(name), bare, offset, size,
                                                        object.Take(), object.info, base, map_bytes,
                                                        std::move(reservation), *std::move(watch));
}

}  // namespace

absl::Status SharedMemoryRegistry::CheckNotTakenLocked(const std::string& owner,
                                                       const std::string& bare,
                                                       absl::string_view key) const {
  // Another identity's object stays its own while it is mapped.
  for (const auto& [other, region] : regions_) {
    if (other.first != owner && region->key() == bare) {
      return absl::PermissionDeniedError(
          absl::StrCat("key: shared memory object ", Quoted(key),
                       " is mapped for another identity; register an object of your own"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SharedMemoryRegistry::Region>> SharedMemoryRegistry::FindRegistered(
    const RegionId& id, const std::string& bare, absl::string_view key, int64_t byte_size,
    int64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  RETURN_IF_ERROR(CheckNotTakenLocked(id.first, bare, key));
  auto found = regions_.find(id);
  if (found == regions_.end()) {
    if (static_cast<int>(regions_.size()) >= kMaxSharedMemoryRegions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("at most ", kMaxSharedMemoryRegions,
                       " shared memory regions may be registered at once; unregister some"));
    }
    return nullptr;
  }
  Region& region = *found->second;
  if (region.key() != bare || offset != region.offset() ||
      (byte_size != 0 && byte_size != region.byte_size())) {
    return absl::AlreadyExistsError(absl::StrCat(
        "shared memory region ", Quoted(id.second), " is already registered with key ",
        Quoted(region.key()),
        region.offset() != 0 ? absl::StrCat(", offset ", region.offset()) : std::string(),
        " and byte_size ", region.byte_size(), "; unregister it first"));
  }
  return found->second;
}

absl::Status SharedMemoryRegistry::RetireStale(const RegionId& id, std::shared_ptr<Region> existing,
                                               absl::string_view why) {
  std::shared_ptr<Region> retired;  // unmapped outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = regions_.find(id);
  if (found != regions_.end() && found->second != existing) {
    return absl::AlreadyExistsError(absl::StrCat("shared memory region ", Quoted(id.second),
                                                 " was registered meanwhile; unregister it first"));
  }
  if (found == regions_.end()) return absl::OkStatus();
  if (const int in_use = existing->in_use(); in_use > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        why, "; the region is in use by ", in_use, in_use == 1 ? " request" : " requests",
        " and keeps its mapping until they finish: register it again then"));
  }
  retired = std::move(found->second);
  mapped_bytes_ -= retired->byte_size();
  regions_.erase(found);
  return absl::OkStatus();
}

absl::StatusOr<SharedMemoryRegistry::RegionInfo> SharedMemoryRegistry::Register(
    absl::string_view name, absl::string_view key, int64_t byte_size, int64_t offset,
    const SharedMemoryCaller& caller) {
  RETURN_IF_ERROR(
      CheckRegistration(name, key, byte_size, offset, caller.local, options_.allow_remote));
  const std::string bare(WithoutSlash(key));
  const RegionId id(caller.owner, name);
  // The same name, key, offset and size again: renewed when the region still
  // maps the object the key names now, else mapped again.
  ASSIGN_OR_RETURN(std::shared_ptr<Region> existing,
                   FindRegistered(id, bare, key, byte_size, offset));
  OpenedObject object;
  RETURN_IF_ERROR(OpenObject(absl::StrCat(options_.directory, "/", bare), key, name,
                             existing != nullptr, object));
  ASSIGN_OR_RETURN(const int64_t size, SizeToMap(object, key, byte_size, offset));
  // Whether the name's stale region was dropped for this one: a failure
  // from here on leaves the name unregistered, and says so.
  bool replaced = false;
  if (existing != nullptr) {
    const std::string why = ChangedSince(*existing, object, offset, key);
    if (why.empty()) {
      existing->Touch();
      return existing->Info();
    }
    // The stale mapping goes first (its reservation with it), unless a
    // request uses it: the new one is mapped only once it is gone.
    RETURN_IF_ERROR(RetireStale(id, std::move(existing), why));
    replaced = true;
  }
  absl::StatusOr<std::shared_ptr<Region>> region =
      MapObject(name, bare, key, offset, size, options_.budget, object);
  if (!region.ok()) {
    if (!replaced) return region.status();
    return absl::Status(region.status().code(),
                        absl::StrCat(region.status().message(), "; region ", Quoted(name),
                                     " is no longer registered (its stale mapping was dropped)"));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  RETURN_IF_ERROR(CheckNotTakenLocked(id.first, bare, key));
  // Another call may have registered the name meanwhile: the first one wins.
  auto [at, inserted] = regions_.emplace(id, *region);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("shared memory region ", Quoted(name),
                                                 " was registered meanwhile; unregister it first"));
  }
  mapped_bytes_ += size;
  return (*region)->Info();
}

namespace {

std::string ChangedSince(const SharedMemoryRegistry::Region& region, const OpenedObject& object,
                         int64_t offset, absl::string_view key) {
  if (!region.Maps(object.info)) {
    return absl::StrCat("shared memory object ", Quoted(key), " was re-created since region ",
                        Quoted(region.name()), " mapped it");
  }
  if (region.faulted()) {
    return absl::StrCat("shared memory object ", Quoted(key), " of region ", Quoted(region.name()),
                        " shrank while a request used it");
  }
  if (static_cast<int64_t>(object.info.st_size) - offset < region.byte_size()) {
    return absl::StrCat("shared memory object ", Quoted(key), " is now smaller than the ",
                        region.byte_size(), " bytes region ", Quoted(region.name()), " maps");
  }
  return "";
}

}  // namespace

absl::Status SharedMemoryRegistry::Unregister(absl::string_view name, absl::string_view owner) {
  std::shared_ptr<Region> dropped;  // unmapped outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = regions_.find({std::string(owner), std::string(name)});
  if (found == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("shared memory region ", Quoted(name), " is not registered"));
  }
  if (const int in_use = found->second->in_use(); in_use > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory region ", Quoted(name), " is in use by ", in_use,
                     in_use == 1 ? " request" : " requests", "; unregister it once they finish"));
  }
  dropped = std::move(found->second);
  mapped_bytes_ -= dropped->byte_size();
  regions_.erase(found);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SharedMemoryRegistry::RegionInfo>> SharedMemoryRegistry::Status(
    absl::string_view name, absl::string_view owner) {
  std::vector<RegionInfo> infos;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, region] : regions_) {
    if (id.first != owner || (!name.empty() && id.second != name)) continue;
    if (!name.empty()) region->Touch();
    infos.push_back(region->Info());
  }
  if (!name.empty() && infos.empty()) {
    return absl::NotFoundError(
        absl::StrCat("shared memory region ", Quoted(name), " is not registered"));
  }
  return infos;
}

absl::StatusOr<SharedMemoryRegistry::Pin> SharedMemoryRegistry::Acquire(absl::string_view name,
                                                                        absl::string_view field,
                                                                        absl::string_view owner) {
  std::shared_ptr<Region> region;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = regions_.find({std::string(owner), std::string(name)});
    if (found == regions_.end()) {
      return absl::NotFoundError(
          absl::StrCat(field, ": shared memory region ", Quoted(name), " is not registered"));
    }
    region = found->second;
    region->Use();  // under the lock: the sweeper sees it pinned
  }
  Pin pin(std::move(region));
  if (pin.region_->faulted()) return ShrankWhileUsed(pin.region_->key(), name, field);
  if (!pin.region_->StillCovered()) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": shared memory object ", Quoted(pin.region_->key()), " of region ",
                     Quoted(name), " is now smaller than the ", pin.region_->byte_size(),
                     " bytes registered; register it again"));
  }
  return pin;
}

bool SharedMemoryRegistry::Pin::faulted() const { return region_->faulted(); }

bool SharedMemoryRegistry::Pin::StillIntact() const {
  return !region_->faulted() && region_->CheckCovered();
}

int SharedMemoryRegistry::ExpireIdle(absl::Time now) {
  std::vector<std::shared_ptr<Region>> dropped;  // unmapped outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      Region& region = *it->second;
      if (region.in_use() == 0 && now - region.last_used() >= options_.idle_timeout) {
        mapped_bytes_ -= region.byte_size();
        ++expired_total_;
        dropped.push_back(std::move(it->second));
        it = regions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return static_cast<int>(dropped.size());
}

int64_t SharedMemoryRegistry::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_bytes_;
}

int SharedMemoryRegistry::regions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(regions_.size());
}

int64_t SharedMemoryRegistry::expired_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return expired_total_;
}

absl::Status CheckSharedMemoryIntact(const SharedMemoryPins& pins) {
  for (const SharedMemoryRegistry::Pin& pin : pins.pins) {
    if (!pin.StillIntact()) return ShrankWhileUsed(pin.key(), pin.name(), "");
  }
  return absl::OkStatus();
}

void AddSharedMemorySeries(Metrics& metrics, const SharedMemoryRegistry& registry) {
  metrics.AddSampled("tensorop_shared_memory_regions", "Shared memory regions registered now.",
                     "gauge", {}, [&registry] { return static_cast<int64_t>(registry.regions()); });
  metrics.AddSampled("tensorop_shared_memory_mapped_bytes",
                     "Bytes of shared memory mapped now (counted in --max_memory_bytes).", "gauge",
                     {}, [&registry] { return registry.mapped_bytes(); });
  metrics.AddSampled("tensorop_shared_memory_expired_total",
                     "Regions unmapped because no request used them for "
                     "--shared_memory_idle_seconds.",
                     "counter", {}, [&registry] { return registry.expired_total(); });
}

}  // namespace tensorop::server
