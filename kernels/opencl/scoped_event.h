// A cl_event released when it goes out of scope, shared by the device's
// transfer and execution units.
#ifndef TENSOROP_KERNELS_OPENCL_SCOPED_EVENT_H_
#define TENSOROP_KERNELS_OPENCL_SCOPED_EVENT_H_

#include <CL/cl.h>

namespace tensorop::opencl_backend {

struct ScopedEvent {
  cl_event event = nullptr;
  ScopedEvent() = default;
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  ~ScopedEvent() {
    if (event != nullptr) clReleaseEvent(event);
  }
};

}  // namespace tensorop::opencl_backend

#endif  // TENSOROP_KERNELS_OPENCL_SCOPED_EVENT_H_
