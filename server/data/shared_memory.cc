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
#include "server/data/mapping_guard.h"
#include "server/security/auth.h"
#include "server/telemetry/metrics.h"
#include "server/wire/quoted.h"

namespace tensorop::server {

namespace {

bool IsNameByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

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

bool IsLoopbackAddress(absl::string_view ip) {
  absl::ConsumePrefix(&ip, "::ffff:");  // IPv4-mapped
  return absl::StartsWith(ip, "127.") || ip == "::1";
}

bool IsLocalGrpcPeer(absl::string_view peer) {
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  if (absl::ConsumePrefix(&peer, "ipv4:")) return absl::StartsWith(peer, "127.");
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    // "[::1]:5" or, percent-encoded, "%5B::1%5D:5"
    if (!absl::ConsumePrefix(&peer, "[")) absl::ConsumePrefix(&peer, "%5B");
    const size_t close = std::min(peer.find(']'), peer.find("%5D"));
    return close != absl::string_view::npos && IsLoopbackAddress(peer.substr(0, close));
  }
  return false;
}

SharedMemoryCaller SharedMemoryCallerOf(const grpc::ServerContextBase& context) {
  return SharedMemoryCaller{.owner = PeerIdentity(context),
                            .local = IsLocalGrpcPeer(context.peer())};
}

absl::Status CheckRegionName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > kMaxRegionNameBytes ||
      !std::all_of(name.begin(), name.end(), IsNameByte)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", Quoted(name), " is not a region name (1..", kMaxRegionNameBytes,
                     " bytes of A-Z a-z 0-9 _ . -)"));
  }
  return absl::OkStatus();
}

absl::Status CheckSharedMemoryKey(absl::string_view key, absl::string_view field) {
  const absl::string_view bare = WithoutSlash(key);
  if (bare.empty() || bare.size() > kMaxKeyBytes || bare == "." || bare == ".." ||
      !std::all_of(bare.begin(), bare.end(), IsNameByte)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", Quoted(key), " is not a shared memory key (an optional leading '/', then 1..",
        kMaxKeyBytes, " bytes of A-Z a-z 0-9 _ . -, not \".\" or \"..\")"));
  }
  return absl::OkStatus();
}

// One mapped object. Destroyed (unmapped, its reservation given back) when the
// registry has dropped it and the last pin is gone.
class SharedMemoryRegistry::Region {
 public:
  // `mapping` (of `mapped_bytes`) starts at the page holding the object's
  // byte `offset`, where the region starts.
  Region(std::string name, std::string key, int64_t offset, int64_t byte_size, int fd,
         void* mapping, int64_t mapped_bytes, MemoryBudget::Reservation reservation,
         std::unique_ptr<WatchedMapping> watch)
      : name_(std::move(name)),
        key_(std::move(key)),
        offset_(offset),
        byte_size_(byte_size),
        fd_(fd),
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
  bool StillCovered() const {
    struct stat info {};
    return fstat(fd_, &info) == 0 && info.st_size - offset_ >= byte_size_;
  }
  // Whether an access faulted since it was mapped (the object shrank while a
  // request used it): its mapping now holds stand-in pages, not the object.
  bool faulted() const { return watch_->faulted(); }

 private:
  const std::string name_;
  const std::string key_;
  const int64_t offset_;
  const int64_t byte_size_;
  const int fd_;
  void* const mapping_;
  const int64_t mapped_bytes_;
  std::byte* const base_;
  MemoryBudget::Reservation reservation_;
  std::unique_ptr<WatchedMapping> watch_;
  std::atomic<int> in_use_{0};
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

absl::StatusOr<SharedMemoryRegistry::RegionInfo> SharedMemoryRegistry::Register(
    absl::string_view name, absl::string_view key, int64_t byte_size, int64_t offset,
    const SharedMemoryCaller& caller) {
  if (!caller.local && !options_.allow_remote) {
    return absl::PermissionDeniedError(
        "shared memory is for clients on the server's host (a Unix socket or a loopback "
        "address): a remote client cannot have made the object it names (--shared_memory_remote "
        "allows it)");
  }
  if (absl::Status status = CheckRegionName(name, "region"); !status.ok()) return status;
  if (absl::Status status = CheckSharedMemoryKey(key, "key"); !status.ok()) return status;
  if (byte_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte_size: ", byte_size, " must not be negative (0: the whole object)"));
  }
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", offset, " must not be negative"));
  }
  const std::string bare(WithoutSlash(key));
  const std::pair<std::string, std::string> id(caller.owner, name);
  // Another identity's object stays its own while it is mapped.
  auto taken_by_another = [&] {
    for (const auto& [other, region] : regions_) {
      if (other.first != caller.owner && region->key() == bare) return true;
    }
    return false;
  };
  auto refuse_taken = [&] {
    return absl::PermissionDeniedError(
        absl::StrCat("key: shared memory object ", Quoted(key),
                     " is mapped for another identity; register an object of your own"));
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (taken_by_another()) return refuse_taken();
    if (auto found = regions_.find(id); found != regions_.end()) {
      Region& region = *found->second;
      if (region.key() == bare && offset == region.offset() &&
          (byte_size == 0 || byte_size == region.byte_size())) {
        region.Touch();
        return region.Info();
      }
      return absl::AlreadyExistsError(absl::StrCat(
          "shared memory region ", Quoted(name), " is already registered with key ",
          Quoted(region.key()),
          region.offset() != 0 ? absl::StrCat(", offset ", region.offset()) : std::string(),
          " and byte_size ", region.byte_size(), "; unregister it first"));
    }
    if (static_cast<int>(regions_.size()) >= kMaxSharedMemoryRegions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("at most ", kMaxSharedMemoryRegions,
                       " shared memory regions may be registered at once; unregister some"));
    }
  }

  const std::string path = absl::StrCat(options_.directory, "/", bare);
  // O_NOFOLLOW: a symbolic link in /dev/shm cannot point us elsewhere.
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int error = errno;
    const std::string what = absl::StrCat("key: cannot open shared memory object ", Quoted(key),
                                          " (", path, "): ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(what);
    if (error == EACCES || error == EPERM) return absl::PermissionDeniedError(what);
    return absl::InvalidArgumentError(what);
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("key: ", Quoted(key), " (", path, ") is not a shared memory object"));
  }
  const int64_t object_size = static_cast<int64_t>(info.st_size);
  if (offset > 0 && offset >= object_size) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("offset: ", offset,
                                                   " is not inside shared memory object ",
                                                   Quoted(key), " of ", object_size, " bytes"));
  }
  const int64_t size = byte_size == 0 ? object_size - offset : byte_size;
  if (size == 0 || size > object_size - offset) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "byte_size: ", size, " bytes of shared memory object ", Quoted(key), " requested",
        offset != 0 ? absl::StrCat(" from offset ", offset) : std::string(), "; it has ",
        object_size, size == 0 ? " (an empty object cannot be mapped)" : ""));
  }
  // mmap's offset must be a multiple of the page size: map from the page
  // holding `offset`.
  const int64_t page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  const int64_t map_offset = offset - offset % page;
  const int64_t map_bytes = size + (offset - map_offset);
  MemoryBudget::Reservation reservation;
  if (options_.budget != nullptr) {
    absl::StatusOr<MemoryBudget::Reservation> reserved = options_.budget->TryReserve(
        size, absl::StrCat("mapping shared memory region ", Quoted(name)));
    if (!reserved.ok()) {
      close(fd);
      return reserved.status();
    }
    reservation = *std::move(reserved);
  }
  void* base = mmap(nullptr, static_cast<size_t>(map_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                    static_cast<off_t>(map_offset));
  if (base == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", size,
                                                     " bytes of shared memory object ", Quoted(key),
                                                     ": ", std::strerror(error)));
  }
  absl::StatusOr<std::unique_ptr<WatchedMapping>> watch =
      WatchedMapping::Watch(base, static_cast<size_t>(map_bytes));
  if (!watch.ok()) {
    munmap(base, static_cast<size_t>(map_bytes));
    close(fd);
    return watch.status();
  }
  auto region = std::make_shared<Region>(std::string(name), bare, offset, size, fd, base, map_bytes,
                                         std::move(reservation), *std::move(watch));
  std::lock_guard<std::mutex> lock(mutex_);
  if (taken_by_another()) return refuse_taken();
  // Another call may have registered the name meanwhile: the first one wins.
  auto [at, inserted] = regions_.emplace(id, region);
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("shared memory region ", Quoted(name),
                                                 " was registered meanwhile; unregister it first"));
  }
  mapped_bytes_ += size;
  return region->Info();
}

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
    if (pin.faulted()) return ShrankWhileUsed(pin.key(), pin.name(), "");
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
