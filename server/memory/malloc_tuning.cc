#include "server/memory/malloc_tuning.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

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

bool GlibcTunableSet(absl::string_view name) {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr) return false;
  // name=value pairs separated by colons (glibc's tunables(7)).
  for (absl::string_view setting : absl::StrSplit(tunables, ':')) {
    if (setting.substr(0, setting.find('=')) == name) return true;
  }
  return false;
}

void ExecWithHugePageMalloc(char** argv) {
  // Set by the caller (either way) or by our own exec: leave it.
  if (GlibcTunableSet(kTunable)) return;
  const char* current = std::getenv("GLIBC_TUNABLES");
  std::string tunables = current != nullptr ? current : "";
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
