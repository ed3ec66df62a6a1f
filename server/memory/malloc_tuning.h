// Large blocks on transparent huge pages. tensord maps every block of 4 MiB
// and more on its own (main.cc's M_MMAP_THRESHOLD, so freed memory leaves the
// process), and a fresh mapping is paid in page faults: one per 4 KiB, each
// zeroing its page and, at munmap, unmapping it — on bulk calls (32 MiB
// requests, 256 MiB results, 1 GiB uploads) that was most of the server's CPU
// (perf record). glibc's tunable glibc.malloc.hugetlb=1 makes malloc advise
// such mappings MADV_HUGEPAGE, one fault per 2 MiB, for every large block
// (gRPC's receive buffers, parsed request bytes, outputs). Tunables are read
// only at process start, so tensord re-executes itself once with it set.
#ifndef TENSOROP_SERVER_MEMORY_MALLOC_TUNING_H_
#define TENSOROP_SERVER_MEMORY_MALLOC_TUNING_H_

#include "absl/strings/string_view.h"

namespace tensorop::server {

// When transparent huge pages are available (madvise or always mode) and
// GLIBC_TUNABLES does not name glibc.malloc.hugetlb, execs /proc/self/exe
// with `argv` and the tunable added (the same process: pid and descriptors
// stay). Returns (doing nothing) otherwise or when the exec fails. Call first
// thing in main, before any thread starts.
void ExecWithHugePageMalloc(char** argv);

// Whether GLIBC_TUNABLES names the tunable `name` (e.g. "glibc.malloc.arena_max"):
// an operator's setting, which main's own mallopt() calls then leave alone.
bool GlibcTunableSet(absl::string_view name);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_MALLOC_TUNING_H_
