// cl_int results as absl::Status naming the call and the code.
#ifndef TENSOROP_KERNELS_OPENCL_CL_ERROR_H_
#define TENSOROP_KERNELS_OPENCL_CL_ERROR_H_

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensorop::opencl_backend {

// "CL_OUT_OF_RESOURCES", or "CL error -9999" for codes it does not know.
const char* ClErrorName(cl_int code);

// OK for CL_SUCCESS, else UNAVAILABLE "<call> failed: <name> (<code>)": a device
// error means the device, not the request, is at fault, so the server may retry
// elsewhere.
absl::Status ClStatus(cl_int code, absl::string_view call);

}  // namespace tensorop::opencl_backend

#endif  // TENSOROP_KERNELS_OPENCL_CL_ERROR_H_
