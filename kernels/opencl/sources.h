// The OpenCL C sources, embedded at build time from the .cl files beside this.
#ifndef TENSOROP_KERNELS_OPENCL_SOURCES_H_
#define TENSOROP_KERNELS_OPENCL_SOURCES_H_

namespace tensorop::opencl_backend {

extern const char kStridedCopyClSource[];      // strided_copy.cl
extern const char kScatterElementsClSource[];  // scatter_elements.cl
extern const char kGatherClSource[];           // gather.cl

}  // namespace tensorop::opencl_backend

#endif  // TENSOROP_KERNELS_OPENCL_SOURCES_H_
