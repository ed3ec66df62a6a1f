#include "server/telemetry/process_series.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {
namespace {

// The whole of a small file of /proc (read(2) until its end), or "" when it
// cannot be read.
std::string ReadProcFile(const char* path) {
  std::string text;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

double CpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// /proc/self/statm's field `index` (0: size, 1: resident) in bytes.
int64_t StatmBytes(size_t index) {
  const std::string statm = ReadProcFile("/proc/self/statm");
  const std::vector<absl::string_view> fields = absl::StrSplit(statm, ' ', absl::SkipEmpty());
  int64_t pages = 0;
  if (index >= fields.size() || !absl::SimpleAtoi(fields[index], &pages)) return -1;
  return pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Entries of /proc/self/fd, without the one this listing opens.
int64_t OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  const std::string own = absl::StrCat(dirfd(dir));
  int64_t count = 0;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name == "." || name == ".." || name == own) continue;
    ++count;
  }
  closedir(dir);
  return count;
}

int64_t MaxFds() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > static_cast<rlim_t>(std::numeric_limits<int64_t>::max())) {
    return std::numeric_limits<int64_t>::max();
  }
  return static_cast<int64_t>(limit.rlim_cur);
}

}  // namespace

ProcessSample SampleProcess() {
  return ProcessSample{.cpu_seconds = CpuSeconds(),
                       .resident_bytes = StatmBytes(1),
                       .virtual_bytes = StatmBytes(0),
                       .open_fds = OpenFds(),
                       .max_fds = MaxFds()};
}

absl::StatusOr<int64_t> ProcessStartTimeSeconds() {
  // The command name (field 2) is in parentheses and may hold spaces and
  // parentheses itself: the fields that follow start after the last ')'.
  const std::string stat = ReadProcFile("/proc/self/stat");
  const size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) {
    return absl::UnavailableError("/proc/self/stat cannot be read");
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close_paren + 1), ' ', absl::SkipWhitespace());
  // Field 22, starttime in clock ticks after boot, is the 20th after field 2.
  constexpr size_t kStartTime = 22 - 3;
  int64_t ticks = 0;
  if (fields.size() <= kStartTime || !absl::SimpleAtoi(fields[kStartTime], &ticks)) {
    return absl::UnavailableError("/proc/self/stat has no start time (field 22)");
  }
  int64_t boot = -1;
  const std::string system_stat = ReadProcFile("/proc/stat");
  for (absl::string_view line : absl::StrSplit(system_stat, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtoi(line, &boot)) break;
  }
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (boot < 0 || ticks_per_second <= 0) {
    return absl::UnavailableError("/proc/stat has no boot time (btime)");
  }
  return boot + ticks / ticks_per_second;
}

void AddProcessSeries(Metrics& metrics) {
  // The names, help and types of the Prometheus client libraries' process
  // collectors, so dashboards and alerts written for any exporter apply.
  metrics.AddSampledReal("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.", "counter", {},
                         [] { return CpuSeconds(); });
  metrics.AddSampled("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", {},
                     [] { return StatmBytes(1); });
  metrics.AddSampled("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", {},
                     [] { return StatmBytes(0); });
  metrics.AddSampled("process_open_fds", "Number of open file descriptors.", "gauge", {},
                     [] { return OpenFds(); });
  metrics.AddSampled("process_max_fds", "Maximum number of open file descriptors.", "gauge", {},
                     [] { return MaxFds(); });
  // Fixed for the process's life; without /proc (not Linux) it is left out.
  if (absl::StatusOr<int64_t> start = ProcessStartTimeSeconds(); start.ok()) {
    metrics.AddSampled("process_start_time_seconds",
                       "Start time of the process since unix epoch in seconds.", "gauge", {},
                       [seconds = *start] { return seconds; });
  }
}

}  // namespace tensorop::server
