// A DevicePool over every OpenCL device this machine has (PoCL's CPU device
// here), for the placement room's tests.
#ifndef TENSOROP_TESTS_SERVER_PLACEMENT_OPEN_POOL_H_
#define TENSOROP_TESTS_SERVER_PLACEMENT_OPEN_POOL_H_

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/opencl/device.h"
#include "server/placement/device_pool.h"

namespace tensorop::server {

// Every device, or none and a test failure.
inline std::vector<std::unique_ptr<opencl_backend::Device>> OpenDevices() {
  std::vector<std::unique_ptr<opencl_backend::Device>> devices =
      opencl_backend::OpenAllDevices(nullptr);
  EXPECT_FALSE(devices.empty()) << "no OpenCL device: is pocl-opencl-icd installed?";
  return devices;
}

// A pool of every device (an empty one, and a test failure, when there is none).
inline std::unique_ptr<DevicePool> OpenPool(const DevicePoolOptions& options) {
  return std::make_unique<DevicePool>(OpenDevices(), options);
}

}  // namespace tensorop::server

#endif  // TENSOROP_TESTS_SERVER_PLACEMENT_OPEN_POOL_H_
