// Memory figures of a running process from /proc/<pid>/status, for tests that
// bound a server's resident memory, and whether it still runs.
#ifndef TENSOROP_TESTS_SUPPORT_PROC_STATUS_H_
#define TENSOROP_TESTS_SUPPORT_PROC_STATUS_H_

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "core/sanitizers.h"

namespace tensorop::testing {

// The value of a "kB" line of /proc/<pid>/status in bytes ("VmRSS": resident
// now, "VmHWM": the peak resident so far), or -1 when it cannot be read.
int64_t ProcStatusBytes(pid_t pid, std::string_view field);

// True when `pid` is gone or a zombie (/proc/<pid>/stat's state "Z").
bool ProcessHasExited(pid_t pid);

// False in the AddressSanitizer build, whose processes (the tensord under test
// is built with the same flags) keep freed memory resident in the
// quarantine: bounds on resident memory do not hold there.
#ifdef TENSOROP_ASAN_ENABLED
inline constexpr bool kResidentBoundsHold = false;
#else
inline constexpr bool kResidentBoundsHold = true;
#endif

inline int64_t ResidentBytes(pid_t pid) { return ProcStatusBytes(pid, "VmRSS"); }
inline int64_t PeakResidentBytes(pid_t pid) { return ProcStatusBytes(pid, "VmHWM"); }

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_PROC_STATUS_H_
