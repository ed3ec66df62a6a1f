// The placement room's Prometheus series (server/telemetry/metrics.h's registry, the
// scheduler's and the device pool's figures), as memory_budget.h and
// handle_store.h add theirs: the registry knows nothing of what it samples.
#ifndef TENSOROP_SERVER_PLACEMENT_SERIES_H_
#define TENSOROP_SERVER_PLACEMENT_SERIES_H_

#include "server/placement/device_pool.h"
#include "server/placement/scheduler.h"
#include "server/telemetry/metrics.h"

namespace tensorop::server {

// Adds the scheduler's and the device pool's series to `metrics`: the queue
// depth (requests queued or running) of the CPU workers, which plan every
// request, and of each device, each device's failures, the OPENCL requests
// waiting for a slot of each device and how long their waits took. Both must
// outlive every scrape.
void AddServerSeries(Metrics& metrics, const Scheduler& scheduler, const DevicePool& devices);

// The calibration's figures (server/placement/calibration.h), as AUTO's cost model holds
// them: bytes per second of the CPU's copy and scatter kernels and of each
// device's upload, download, copy and scatter, and each backend's fixed cost
// per request. 0 until the calibration ended, and for what it did not measure.
void AddCalibrationSeries(Metrics& metrics, const Scheduler& scheduler, const DevicePool& devices);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_PLACEMENT_SERIES_H_
