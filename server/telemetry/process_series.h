// The process series every Prometheus exporter has (the client libraries'
// process collectors): CPU seconds, resident and virtual memory, open and
// maximum file descriptors, start time. Read from /proc/self and getrlimit at
// each scrape; a few system calls, no lock.
//
//   process_cpu_seconds_total       user and system CPU time (getrusage)
//   process_resident_memory_bytes   /proc/self/statm's resident pages
//   process_virtual_memory_bytes    /proc/self/statm's size
//   process_open_fds                entries of /proc/self/fd
//   process_max_fds                 RLIMIT_NOFILE's soft limit
//   process_start_time_seconds      /proc/self/stat's start + /proc/stat's btime
#ifndef TENSOROP_SERVER_TELEMETRY_PROCESS_SERIES_H_
#define TENSOROP_SERVER_TELEMETRY_PROCESS_SERIES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/telemetry/metrics.h"

namespace tensorop::server {

// One reading of this process. A figure that could not be read is -1.
struct ProcessSample {
  double cpu_seconds = -1;
  int64_t resident_bytes = -1;
  int64_t virtual_bytes = -1;
  int64_t open_fds = -1;
  int64_t max_fds = -1;
};
ProcessSample SampleProcess();

// When this process started, in whole seconds since the Unix epoch (rounded
// down: the clock tick of /proc/self/stat is finer than a scrape needs).
absl::StatusOr<int64_t> ProcessStartTimeSeconds();

// Adds the six process_* series to `metrics`, each sampled at every scrape
// (the start time is read once, here). Call before scrapes start.
void AddProcessSeries(Metrics& metrics);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_TELEMETRY_PROCESS_SERIES_H_
