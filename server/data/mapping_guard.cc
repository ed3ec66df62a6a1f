#include "server/data/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tensorop::server {
namespace {

// What the handler reads: plain atomics in a fixed array, no locks or
// allocation (it runs inside a signal). A slot is free while `end` is 0.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};
Slot slots[kMaxWatchedMappings];
std::mutex claim_mutex;  // claiming and freeing slots; never taken in the handler
struct sigaction previous_action;
std::once_flag installed;

void OnSigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : slots) {
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (end == 0 || address < begin || address >= end) continue;
    // mmap is a plain system call: safe here in practice, as in libwayland.
    void* stand_in = mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                          MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stand_in != MAP_FAILED) {
      slot.faulted.store(true, std::memory_order_release);
      return;  // the faulting access runs again, on the stand-in pages
    }
    break;
  }
  // Not ours: as before us.
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction != nullptr) {
      previous_action.sa_sigaction(signal, info, context);
      return;
    }
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
    return;
  }
  // The default action: returning re-runs the access, which faults again
  // and ends the process with SIGBUS.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &fallback, nullptr);
}

void Install() {
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGBUS, &action, &previous_action);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WatchedMapping>> WatchedMapping::Watch(void* base, size_t bytes) {
  std::call_once(installed, Install);
  std::lock_guard<std::mutex> lock(claim_mutex);
  for (int i = 0; i < kMaxWatchedMappings; ++i) {
    Slot& slot = slots[i];
    if (slot.end.load(std::memory_order_relaxed) != 0) continue;
    slot.faulted.store(false, std::memory_order_relaxed);
    slot.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
    slot.end.store(reinterpret_cast<uintptr_t>(base) + bytes, std::memory_order_release);
    return std::unique_ptr<WatchedMapping>(new WatchedMapping(i));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("at most ", kMaxWatchedMappings, " mappings can be watched for faults at once"));
}

WatchedMapping::~WatchedMapping() {
  std::lock_guard<std::mutex> lock(claim_mutex);
  slots[slot_].end.store(0, std::memory_order_release);
  slots[slot_].begin.store(0, std::memory_order_relaxed);
}

bool WatchedMapping::faulted() const {
  return slots[slot_].faulted.load(std::memory_order_acquire);
}

}  // namespace tensorop::server
