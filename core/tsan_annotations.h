// Happens-before edges for ThreadSanitizer across oneTBB's task hand-offs.
// Debian's libtbb is not built with TSan, so the synchronisation by which a
// task enqueued (or a parallel_for body spawned) on one thread starts on
// another is invisible to it, and every such hand-off would be reported as a
// race. These say exactly that edge, on an address private to the hand-off:
// the fork (before the hand-off -> the task starts) and the join (the task
// ends -> the waiter resumes), never from one task to another, so races
// between tasks are still seen. No-ops in other builds.
#ifndef TENSOROP_CORE_TSAN_ANNOTATIONS_H_
#define TENSOROP_CORE_TSAN_ANNOTATIONS_H_

#include "core/sanitizers.h"

#ifdef TENSOROP_TSAN_ENABLED
#include <sanitizer/tsan_interface.h>
#endif

namespace tensorop {

// The calling thread's past happens before anything after a later
// TsanAcquire(address).
inline void TsanRelease(const void* address) {
#ifdef TENSOROP_TSAN_ENABLED
  __tsan_release(const_cast<void*>(address));
#else
  (void)address;
#endif
}

inline void TsanAcquire(const void* address) {
#ifdef TENSOROP_TSAN_ENABLED
  __tsan_acquire(const_cast<void*>(address));
#else
  (void)address;
#endif
}

}  // namespace tensorop

#endif  // TENSOROP_CORE_TSAN_ANNOTATIONS_H_
