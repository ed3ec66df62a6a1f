// The server-wide memory budget (--max_memory_bytes): every byte tensord holds
// for a call (the request as received and parsed, output buffers, answers
// waiting to be sent, streamed results) is reserved here before it is
// allocated and given back when it is freed. A reservation that does not fit
// is refused at once with RESOURCE_EXHAUSTED naming the flag: the caller never
// waits for memory (a reaction must not block, and a worker waiting for bytes
// held by calls that wait for workers could wait forever); clients retry with
// backoff as they do for --max_queued_requests.
#ifndef TENSOROP_SERVER_MEMORY_BUDGET_H_
#define TENSOROP_SERVER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

class MemoryBudget {
 public:
  // The bytes one call holds across the reservations made for it
  // (CallLedger::Empty and their Siblings).
  struct Tally {
    std::atomic<int64_t> bytes{0};
  };
  class CallLedger;

  // Bytes held against a budget, given back when it is destroyed. Movable; a
  // default-constructed one belongs to no budget and holds nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    // Reserves `bytes` more for `what` (e.g. "the outputs of request \"a\"").
    // RESOURCE_EXHAUSTED naming --max_memory_bytes, holding what it held
    // before, when they do not fit. Without a budget: always OK.
    absl::Status Grow(int64_t bytes, absl::string_view what) { return Grow(bytes, "", what); }
    // The same for "`method`: `what`", the two joined only when refused, so a
    // call's hot path reserves without building its message.
    absl::Status Grow(int64_t bytes, absl::string_view method, absl::string_view what);
    // The same, `what` made only when refused: for a message a call's hot
    // path would otherwise format on every call.
    absl::Status Grow(int64_t bytes, absl::FunctionRef<std::string()> what);
    // Holds exactly `bytes` (>= 0): gives back the rest, or reserves what is
    // missing even past the limit. For a few bytes that must be held anyway
    // (an error answer a stream owes its client, bounded in size): the budget
    // still counts them and refuses the next reservation instead.
    void HoldExactly(int64_t bytes);
    // Gives back `bytes` (at most what is held), as a part is written or freed.
    void Shrink(int64_t bytes);
    // Holds at most `bytes`: gives back the rest, as its holder shrinks.
    void ShrinkTo(int64_t bytes) { Shrink(bytes_ - bytes); }
    // Holds exactly `bytes` (>= 0) for `what`: gives back the rest, or reserves
    // what is missing, RESOURCE_EXHAUSTED holding what it held when that does
    // not fit.
    absl::Status Resize(int64_t bytes, absl::string_view what) {
      ShrinkTo(bytes);
      return Grow(bytes - bytes_, what);
    }
    // Reserves `bytes` for `what`, of which up to `covered` are taken over
    // from `cover` (null: none) instead of reserved again: bytes its holder
    // hands on (received slices forwarded as the answer). Refused, nothing
    // moves.
    absl::Status GrowTakingOver(int64_t bytes, Reservation* cover, int64_t covered,
                                absl::string_view what);
    // Reserves `most` for `what` while `make` runs, then holds what `make`
    // says it keeps (at most `most`) and gives back the rest: for a holder
    // whose size is bounded before it is made and known only after. When
    // `make` fails, or `most` does not fit, nothing stays reserved.
    absl::Status GrowWhileMaking(int64_t most, absl::FunctionRef<std::string()> what,
                                 absl::FunctionRef<absl::StatusOr<int64_t>()> make);
    // Takes over all that `other` (a reservation of the same budget) holds:
    // for a part held apart until it is known to stay with this one.
    void Absorb(Reservation&& other) { other.TransferTo(*this, other.bytes_); }
    // Gives back everything.
    void Release();
    // Hands `bytes` (at most what is held) to `other`, a reservation of the
    // same budget: the total stays reserved throughout.
    void TransferTo(Reservation& other, int64_t bytes);
    int64_t bytes() const { return bytes_; }
    // An empty reservation on the same budget, counted in the same call's
    // ledger: for a part of the call that holds its bytes apart.
    Reservation Sibling() const { return Reservation(budget_, 0, tally_); }
    // Takes its bytes out of the call's ledger, still reserved in the budget:
    // for a holder that may outlive the call (a buffer handed to gRPC, which
    // frees it once sent). From here it counts in no call.
    void LeaveCall() {
      Count(-bytes_);
      tally_.reset();
    }

   private:
    friend class MemoryBudget;
    friend class MemoryBudget::CallLedger;
    Reservation(MemoryBudget* budget, int64_t bytes, std::shared_ptr<Tally> tally = nullptr)
        : budget_(budget), bytes_(bytes), tally_(std::move(tally)) {
      Count(bytes);
    }
    void Count(int64_t bytes) {
      if (tally_ != nullptr) tally_->bytes.fetch_add(bytes, std::memory_order_relaxed);
    }

    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
    std::shared_ptr<Tally> tally_;  // the call's, when it has a ledger
  };

  // One call's share of the budget. Its reservations (Empty, and their
  // Siblings) are tallied together, and when the ledger ends, with the call,
  // they must all have been given back: bytes still held then belong to a
  // holder that outlived its call (a leak the budget would carry until the
  // process ends), and the budget's UnbalancedCallFn hears of them. Bytes
  // handed on to a longer-lived holder (a kept tensor's charge) leave the
  // tally with TransferTo.
  class CallLedger {
   public:
    // `call` names the call for the report (its method).
    CallLedger(MemoryBudget& budget, std::string call)
        : budget_(budget), call_(std::move(call)), tally_(std::make_shared<Tally>()) {}
    ~CallLedger();
    CallLedger(const CallLedger&) = delete;
    CallLedger& operator=(const CallLedger&) = delete;

    Reservation Empty() const { return Reservation(&budget_, 0, tally_); }
    // Bytes the call's reservations hold now.
    int64_t held() const { return tally_->bytes.load(std::memory_order_relaxed); }

   private:
    MemoryBudget& budget_;
    const std::string call_;
    const std::shared_ptr<Tally> tally_;
  };
  // Told of a call whose reservations still held `bytes` when it ended.
  using UnbalancedCallFn = std::function<void(absl::string_view call, int64_t bytes)>;

  // A budget of `limit_bytes` (at least 1).
  explicit MemoryBudget(int64_t limit_bytes);
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Reserves `bytes` for `what`, or RESOURCE_EXHAUSTED when they do not fit.
  absl::StatusOr<Reservation> TryReserve(int64_t bytes, absl::string_view what);
  // Whether `bytes` more would fit now (RESOURCE_EXHAUSTED for `what` when
  // not), reserving nothing: a request refused from its announced size.
  absl::Status CheckRoom(int64_t bytes, absl::string_view what) {
    return TryReserve(bytes, what).status();
  }
  // A reservation of 0 bytes on this budget, to Grow later.
  Reservation Empty() { return Reservation(this, 0); }
  // `bytes` reserved when they fit as things stand, else nullopt: no
  // reclaiming, no refusal counted (memory held by choice, e.g. BufferPool).
  std::optional<Reservation> TryReserveIfFree(int64_t bytes);

  // Called, once, with the bytes missing when a reservation does not fit,
  // before it is refused: frees memory the server holds by choice (kept
  // buffers) and returns the bytes it gave back. Set before the budget is
  // shared; it must not reserve from this budget.
  void SetReclaimer(std::function<int64_t(int64_t missing)> reclaimer) {
    reclaimer_ = std::move(reclaimer);
  }
  // Replaces what hears of an unbalanced call: by default, in builds with
  // TENSOROP_CHECK_CALL_BALANCE (the sanitizer builds, whose test suites
  // thereby check every call they make), a report on stderr and abort();
  // elsewhere nothing. Set before the budget is shared.
  void SetUnbalancedCallHandler(UnbalancedCallFn handler) { unbalanced_ = std::move(handler); }

  int64_t limit() const { return limit_; }
  // Bytes reserved now.
  int64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }
  // Reservations refused so far.
  int64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  // Bytes reserved since the start, never decreasing: whether calls came
  // between two looks, however briefly they held their bytes.
  int64_t reserved_total() const { return reserved_total_.load(std::memory_order_relaxed); }

 private:
  // Refused for "`method`: `what`" (`what` alone when `method` is empty).
  absl::Status Take(int64_t bytes, absl::string_view method, absl::string_view what);
  bool TryTake(int64_t bytes);
  void Give(int64_t bytes);
  void TakeAnyway(int64_t bytes);

  const int64_t limit_;
  std::atomic<int64_t> reserved_{0};
  std::atomic<int64_t> refusals_{0};
  std::atomic<int64_t> reserved_total_{0};
  std::function<int64_t(int64_t missing)> reclaimer_;
  UnbalancedCallFn unbalanced_ = DefaultUnbalancedCallHandler();

  static UnbalancedCallFn DefaultUnbalancedCallHandler();
};

// When a server that went idle hands what malloc keeps of freed blocks back to
// the system (malloc_trim): once per busy spell, after a whole tick in which
// no call reserved memory, so neither an idle server nor a busy one walks its
// heap every tick. Spells are told by MemoryBudget::reserved_total(), so one
// shorter than a tick is not missed.
class IdleTrim {
 public:
  explicit IdleTrim(int64_t reserved_total)
      : reserved_total_at_trim_(reserved_total), reserved_total_at_last_tick_(reserved_total) {}
  // Called once a tick with the budget's reserved_total() and whether calls
  // hold memory now; true: trim now.
  bool Tick(int64_t reserved_total, bool calls_hold_memory) {
    const bool quiet = reserved_total == reserved_total_at_last_tick_ && !calls_hold_memory;
    reserved_total_at_last_tick_ = reserved_total;
    if (!quiet || reserved_total == reserved_total_at_trim_) return false;
    reserved_total_at_trim_ = reserved_total;
    return true;
  }

 private:
  int64_t reserved_total_at_trim_;
  int64_t reserved_total_at_last_tick_;
};

// The memory this process may use: the cgroup's limit (v2 memory.max, or v1
// memory.limit_in_bytes) when there is one below the physical RAM, else the
// physical RAM; `source` says which ("cgroup memory.max", "physical RAM").
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;
};
MemoryLimit ProcessMemoryLimit();

class Metrics;
// Adds the budget's series to `metrics`, sampled at each scrape:
//   tensorop_memory_budget_bytes    the budget (--max_memory_bytes)
//   tensorop_memory_reserved_bytes  bytes reserved by calls now
//   tensorop_memory_refusals_total  reservations refused (RESOURCE_EXHAUSTED)
// `budget` must outlive every scrape.
void AddMemoryBudgetSeries(Metrics& metrics, const MemoryBudget& budget);

// The limit a cgroup v2 "memory.max" or v1 "memory.limit_in_bytes" file's
// `text` sets, or -1 for none ("max", empty, unparsable).
int64_t ParseCgroupLimit(absl::string_view text);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_BUDGET_H_
