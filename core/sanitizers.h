// Which sanitizer a translation unit is built with, said the same way under
// GCC (__SANITIZE_ADDRESS__, __SANITIZE_THREAD__) and clang, which says it only
// through __has_feature: for the few places that must behave differently
// there (stacks oneTBB switches, stderr kept for the reports, resident memory
// held by ASan's quarantine).
#ifndef TENSOROP_CORE_SANITIZERS_H_
#define TENSOROP_CORE_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define TENSOROP_ASAN_ENABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TENSOROP_ASAN_ENABLED 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define TENSOROP_TSAN_ENABLED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TENSOROP_TSAN_ENABLED 1
#endif
#endif

#endif  // TENSOROP_CORE_SANITIZERS_H_
