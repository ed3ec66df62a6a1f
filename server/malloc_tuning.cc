#include "server/malloc_tuning.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace tensorop::server {
namespace {

constexpr char kTunable[] = "glibc.malloc.hugetlb";

bool HugePagesAvailable() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string modes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return modes.find("[madvise]") != std::string::npos ||
         modes.find("[always]") != std::string::npos;
}

}  // namespace

void ExecWithHugePageMalloc(char** argv) {
  const char* current = std::getenv("GLIBC_TUNABLES");
  std::string tunables = current != nullptr ? current : "";
  // Set by the caller (either way) or by our own exec: leave it.
  if (tunables.find(kTunable) != std::string::npos) return;
  if (!HugePagesAvailable()) return;
  tunables = tunables.empty() ? std::string(kTunable) + "=1" : tunables + ":" + kTunable + "=1";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // The exec failed (no /proc?): run as we are, without the tunable.
  if (current != nullptr) {
    setenv("GLIBC_TUNABLES", current, 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace tensorop::server
