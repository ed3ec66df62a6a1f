#include "server/memory/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/telemetry/metrics.h"

namespace tensorop::server {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return "";
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int64_t PhysicalRam() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(pages) * page_size;
}

// The limit of this process's memory cgroup, or -1: the files under the
// cgroup's own path (/proc/self/cgroup), then those at the mount's root, which
// is the container's own cgroup under a cgroup namespace.
int64_t CgroupLimit() {
  std::vector<std::string> candidates;
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/self/cgroup"), '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (fields[0] == "0" && fields[1].empty()) {
      candidates.push_back(absl::StrCat("/sys/fs/cgroup", fields[2], "/memory.max"));
    } else if (absl::StrContains(fields[1], "memory")) {
      candidates.push_back(
          absl::StrCat("/sys/fs/cgroup/memory", fields[2], "/memory.limit_in_bytes"));
    }
  }
  candidates.push_back("/sys/fs/cgroup/memory.max");
  candidates.push_back("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  for (const std::string& path : candidates) {
    const int64_t limit = ParseCgroupLimit(ReadFile(path));
    if (limit > 0) return limit;
  }
  return -1;
}

}  // namespace

int64_t ParseCgroupLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t value = 0;
  if (text.empty() || text == "max" || !absl::SimpleAtoi(text, &value) || value <= 0) return -1;
  return value;
}

MemoryLimit ProcessMemoryLimit() {
  const int64_t physical = PhysicalRam();
  const int64_t cgroup = CgroupLimit();
  // cgroup v1 says "no limit" with a huge number (PAGE_COUNTER_MAX pages).
  if (cgroup > 0 && cgroup < physical) return {cgroup, "cgroup memory limit"};
  return {physical, "physical RAM"};
}

MemoryBudget::MemoryBudget(int64_t limit_bytes) : limit_(std::max<int64_t>(limit_bytes, 1)) {}

bool MemoryBudget::TryTake(int64_t bytes) {
  int64_t reserved = reserved_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - reserved) return false;
  } while (!reserved_.compare_exchange_weak(reserved, reserved + bytes, std::memory_order_relaxed));
  reserved_total_.fetch_add(bytes, std::memory_order_relaxed);
  return true;
}

absl::Status MemoryBudget::Take(int64_t bytes, absl::string_view method, absl::string_view what) {
  if (bytes <= 0 || TryTake(bytes)) return absl::OkStatus();
  if (reclaimer_ != nullptr) {
    const int64_t missing = bytes - (limit_ - reserved_.load(std::memory_order_relaxed));
    if (reclaimer_(std::max<int64_t>(missing, 1)) > 0 && TryTake(bytes)) {
      return absl::OkStatus();
    }
  }
  refusals_.fetch_add(1, std::memory_order_relaxed);
  return absl::ResourceExhaustedError(
      absl::StrCat("server memory budget exhausted: ", bytes, " more bytes for ", method,
                   method.empty() ? "" : ": ", what, ", with ", reserved(), " of the budget's ",
                   limit_, " bytes reserved (--max_memory_bytes); retry later"));
}

std::optional<MemoryBudget::Reservation> MemoryBudget::TryReserveIfFree(int64_t bytes) {
  if (bytes > 0 && !TryTake(bytes)) return std::nullopt;
  return Reservation(this, std::max<int64_t>(bytes, 0));
}

void MemoryBudget::Give(int64_t bytes) {
  if (bytes > 0) reserved_.fetch_sub(bytes, std::memory_order_relaxed);
}

void MemoryBudget::TakeAnyway(int64_t bytes) {
  if (bytes <= 0) return;
  reserved_.fetch_add(bytes, std::memory_order_relaxed);
  reserved_total_.fetch_add(bytes, std::memory_order_relaxed);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::TryReserve(int64_t bytes,
                                                                   absl::string_view what) {
  Reservation reservation = Empty();
  absl::Status status = reservation.Grow(bytes, what);
  if (!status.ok()) return status;
  return reservation;
}

MemoryBudget::UnbalancedCallFn MemoryBudget::DefaultUnbalancedCallHandler() {
#ifdef TENSOROP_CHECK_CALL_BALANCE
  return [](absl::string_view call, int64_t bytes) {
    std::fprintf(stderr, "tensord: a %.*s call ended with %lld bytes of the memory budget held\n",
                 static_cast<int>(call.size()), call.data(), static_cast<long long>(bytes));
    std::abort();
  };
#else
  return nullptr;
#endif
}

MemoryBudget::CallLedger::~CallLedger() {
  const int64_t bytes = held();
  if (bytes != 0 && budget_.unbalanced_ != nullptr) budget_.unbalanced_(call_, bytes);
}

MemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      tally_(std::move(other.tally_)) {}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    tally_ = std::move(other.tally_);
  }
  return *this;
}

absl::Status MemoryBudget::Reservation::Grow(int64_t bytes, absl::string_view method,
                                             absl::string_view what) {
  if (bytes <= 0) return absl::OkStatus();
  if (budget_ != nullptr) {
    absl::Status status = budget_->Take(bytes, method, what);
    if (!status.ok()) return status;
  }
  bytes_ += bytes;
  Count(bytes);
  return absl::OkStatus();
}

absl::Status MemoryBudget::Reservation::Grow(int64_t bytes, absl::FunctionRef<std::string()> what) {
  if (bytes <= 0) return absl::OkStatus();
  if (budget_ != nullptr && !budget_->TryTake(bytes)) return Grow(bytes, "", what());
  bytes_ += bytes;
  Count(bytes);
  return absl::OkStatus();
}

void MemoryBudget::Reservation::HoldExactly(int64_t bytes) {
  if (bytes <= bytes_) {
    Shrink(bytes_ - bytes);
    return;
  }
  if (budget_ != nullptr) budget_->TakeAnyway(bytes - bytes_);
  Count(bytes - bytes_);
  bytes_ = bytes;
}

void MemoryBudget::Reservation::Shrink(int64_t bytes) {
  bytes = std::clamp<int64_t>(bytes, 0, bytes_);
  if (budget_ != nullptr) budget_->Give(bytes);
  bytes_ -= bytes;
  Count(-bytes);
}

void MemoryBudget::Reservation::Release() { Shrink(bytes_); }

absl::Status MemoryBudget::Reservation::GrowTakingOver(int64_t bytes, Reservation* cover,
                                                       int64_t covered, absl::string_view what) {
  const int64_t taken = cover == nullptr ? 0 : std::clamp<int64_t>(covered, 0, cover->bytes_);
  absl::Status grown = Grow(bytes - taken, what);
  if (grown.ok() && cover != nullptr) cover->TransferTo(*this, taken);
  return grown;
}

absl::Status MemoryBudget::Reservation::GrowWhileMaking(
    int64_t most, absl::FunctionRef<std::string()> what,
    absl::FunctionRef<absl::StatusOr<int64_t>()> make) {
  most = std::max<int64_t>(most, 0);
  if (absl::Status grown = Grow(most, what); !grown.ok()) return grown;
  absl::StatusOr<int64_t> kept = make();
  Shrink(most - (kept.ok() ? std::clamp<int64_t>(*kept, 0, most) : 0));
  return kept.status();
}

void MemoryBudget::Reservation::TransferTo(Reservation& other, int64_t bytes) {
  bytes = std::clamp<int64_t>(bytes, 0, bytes_);
  bytes_ -= bytes;
  Count(-bytes);
  other.bytes_ += bytes;
  other.Count(bytes);
}

void AddMemoryBudgetSeries(Metrics& metrics, const MemoryBudget& budget) {
  metrics.AddSampled("tensorop_memory_budget_bytes",
                     "Bytes calls may hold at once (--max_memory_bytes).", "gauge", {},
                     [&budget] { return budget.limit(); });
  metrics.AddSampled("tensorop_memory_reserved_bytes",
                     "Bytes reserved now by calls: requests, outputs, answers waiting to be sent.",
                     "gauge", {}, [&budget] { return budget.reserved(); });
  metrics.AddSampled("tensorop_memory_refusals_total",
                     "Reservations refused with RESOURCE_EXHAUSTED because the budget was spent.",
                     "counter", {}, [&budget] { return budget.refusals(); });
}

}  // namespace tensorop::server
