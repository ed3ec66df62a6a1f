// What an OpenCL GPU can reach on its host, each figure by host wall clock and by the
// device's profiling events (CL_QUEUE_PROFILING_ENABLE: the median of the commands'
// START..END), so tensord's kernels (operators_bench's kernel_device_ms) compare like with
// like: host<->device copies from pageable and from pinned (CL_MEM_ALLOC_HOST_PTR, mapped)
// memory, device-to-device clEnqueueCopyBuffer, a plain copy kernel (16 and 4 bytes per
// work-item, 32-bit indices), stride-2 gather, reversed rows and row broadcast of 1024 uints,
// a transposing copy of a square (tiled through local memory), rows scattered by a permutation
// read per element (no collisions, no atomics), and the round trip of a 1 KiB request.
// From ../shared/gpu/oclbw.c, with the events, the transpose and the scatter added.
// build: gcc -O2 -o oclbw oclbw.c -lOpenCL -lm   usage: oclbw [MiB]   (first GPU, else first device)
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, e_); exit(1); } } while (0)
static const char* src =
  "__kernel void copy16(__global const uint4* s, __global uint4* d) { uint i = get_global_id(0); d[i] = s[i]; }\n"
  "__kernel void copy4(__global const uint* s, __global uint* d) { uint i = get_global_id(0); d[i] = s[i]; }\n"
  "__kernel void gather2(__global const uint* s, __global uint* d) { uint i = get_global_id(0); d[i] = s[2 * i]; }\n"
  "__kernel void gather2x4(__global const uint* s, __global uint4* d) { uint i = get_global_id(0); uint b = 8 * i;\n"
  "  d[i] = (uint4)(s[b], s[b + 2], s[b + 4], s[b + 6]); }\n"
  "__kernel void reverse4(__global const uint* s, __global uint* d) { uint i = get_global_id(0);\n"
  "  uint row = i >> 10, col = i & 1023; d[i] = s[(row << 10) + 1023 - col]; }\n"
  "__kernel void bcast4(__global const uint* s, __global uint* d) { uint i = get_global_id(0); d[i] = s[i & 1023]; }\n"
  "__kernel void transpose_naive(__global const uint* s, __global uint* d, uint side) {\n"
  "  uint x = get_global_id(0), y = get_global_id(1); d[y * side + x] = s[x * side + y]; }\n"
  "__kernel void transpose_tiled(__global const uint* s, __global uint* d, uint side) {\n"
  "  __local uint tile[32][33]; uint gx = get_group_id(0) * 32, gy = get_group_id(1) * 32;\n"
  "  uint lx = get_local_id(0), ly = get_local_id(1);\n"
  "  for (uint k = 0; k < 32; k += 8) tile[ly + k][lx] = s[(gy + ly + k) * side + gx + lx];\n"
  "  barrier(CLK_LOCAL_MEM_FENCE);\n"
  "  for (uint k = 0; k < 32; k += 8) d[(gx + ly + k) * side + gy + lx] = tile[lx][ly + k]; }\n"
  "__kernel void scatter_rows(__global const uint* u, __global const int* idx, __global uint* d) {\n"
  "  uint i = get_global_id(0); d[((uint)idx[i] << 10) + (i & 1023)] = u[i]; }\n"
  "__kernel void touch(__global uint* d) { d[0] += 1; }\n";
static int cmp(const void* x, const void* y) { double a = *(const double*)x, b = *(const double*)y; return a < b ? -1 : a > b; }
#define REPS 20
static cl_event ev[REPS];
static void report(const char* label, size_t bytes, double wall) {
  double dev[REPS];
  for (int r = 0; r < REPS; ++r) {
    cl_ulong s = 0, e = 0;
    CK(clGetEventProfilingInfo(ev[r], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL));
    CK(clGetEventProfilingInfo(ev[r], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL));
    dev[r] = (e - s) * 1e-9; clReleaseEvent(ev[r]);
  }
  qsort(dev, REPS, sizeof dev[0], cmp);
  printf("{\"what\": \"%s\", \"gbps\": %.1f, \"us_wall\": %.2f, \"us_event\": %.2f, \"gbps_event\": %.1f}\n",
         label, bytes * (double)REPS / wall / 1e9, wall / REPS * 1e6, dev[REPS / 2] * 1e6, bytes / dev[REPS / 2] / 1e9);
}
// One warm-up, then REPS commands back to back, each with its event; wall clock over all.
#define TIME(label, stmt) do { cl_event* E = NULL; (void)E; stmt; CK(clFinish(q)); double t_ = now(); \
    for (int r_ = 0; r_ < REPS; ++r_) { E = &ev[r_]; stmt; } CK(clFinish(q)); report(label, n, now() - t_); } while (0)
int main(int argc, char** argv) {
  size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 64, n = mib << 20;
  cl_platform_id p; cl_device_id dev; CK(clGetPlatformIDs(1, &p, NULL));
  if (clGetDeviceIDs(p, CL_DEVICE_TYPE_GPU, 1, &dev, NULL) != CL_SUCCESS)  // else any device (PoCL)
    CK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
  char name[256]; clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  cl_int e; cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e); CK(e);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e); CK(e);
  cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 2 * n, NULL, &e); CK(e);
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, NULL, &e); CK(e);
  cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, NULL, &e); CK(e);
  char* pageable = malloc(2 * n); memset(pageable, 1, 2 * n);
  cl_mem pin = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, n, NULL, &e); CK(e);
  char* pinned = clEnqueueMapBuffer(q, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, NULL, NULL, &e); CK(e);
  memset(pinned, 2, n);
  // c: the row of each of the n / 4 elements, rows of 1024 permuted (scatter_rows)
  size_t rows = n / 4 / 1024; int* perm = malloc(rows * sizeof *perm); int* idx = malloc(n);
  for (size_t r = 0; r < rows; ++r) perm[r] = (int)r;
  srand(3); for (size_t r = rows; r > 1; --r) { size_t k = (size_t)rand() % r; int x = perm[r - 1]; perm[r - 1] = perm[k]; perm[k] = x; }
  for (size_t i = 0; i < n / 4; ++i) idx[i] = perm[i >> 10];
  CK(clEnqueueWriteBuffer(q, c, CL_TRUE, 0, n, idx, 0, NULL, NULL));
  CK(clEnqueueWriteBuffer(q, a, CL_TRUE, 0, 2 * n, pageable, 0, NULL, NULL));
  printf("{\"device\": \"%s\", \"mib\": %zu, \"reps\": %d}\n", name, mib, REPS);
  TIME("ocl_h2d_pageable", CK(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, n, pageable, 0, NULL, E)));
  TIME("ocl_h2d_pinned", CK(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, n, pinned, 0, NULL, E)));
  TIME("ocl_d2h_pageable", CK(clEnqueueReadBuffer(q, b, CL_FALSE, 0, n, pageable, 0, NULL, E)));
  TIME("ocl_d2h_pinned", CK(clEnqueueReadBuffer(q, b, CL_FALSE, 0, n, pinned, 0, NULL, E)));
  TIME("ocl_d2d_copybuffer", CK(clEnqueueCopyBuffer(q, a, b, 0, 0, n, 0, NULL, E)));
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &e); CK(e);
  CK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));
  const char* names[] = {"copy16", "copy4", "gather2", "gather2x4", "reverse4", "bcast4"};
  size_t items[] = {n / 16, n / 4, n / 4, n / 16, n / 4, n / 4};
  for (int k = 0; k < 6; ++k) {
    cl_kernel kern = clCreateKernel(prog, names[k], &e); CK(e);
    CK(clSetKernelArg(kern, 0, sizeof a, &a)); CK(clSetKernelArg(kern, 1, sizeof b, &b));
    char label[64]; snprintf(label, sizeof label, "ocl_kernel_%s", names[k]);
    TIME(label, CK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &items[k], NULL, 0, NULL, E)));
    clReleaseKernel(kern);
  }
  // A square of n bytes of uints, transposed: side 4096 at 64 MiB, 512 at 1 MiB.
  cl_uint side = (cl_uint)sqrt((double)(n / 4));
  if ((size_t)side * side * 4 == n && side % 32 == 0) {
    const char* tnames[] = {"transpose_naive", "transpose_tiled"};
    size_t global[2][2] = {{side, side}, {side, side / 4}}, local[2] = {32, 8};
    for (int k = 0; k < 2; ++k) {
      cl_kernel kern = clCreateKernel(prog, tnames[k], &e); CK(e);
      CK(clSetKernelArg(kern, 0, sizeof a, &a)); CK(clSetKernelArg(kern, 1, sizeof b, &b));
      CK(clSetKernelArg(kern, 2, sizeof side, &side));
      char label[64]; snprintf(label, sizeof label, "ocl_kernel_%s", tnames[k]);
      TIME(label, CK(clEnqueueNDRangeKernel(q, kern, 2, NULL, global[k], k ? local : NULL, 0, NULL, E)));
      clReleaseKernel(kern);
    }
  }
  {
    cl_kernel kern = clCreateKernel(prog, "scatter_rows", &e); CK(e);
    CK(clSetKernelArg(kern, 0, sizeof a, &a)); CK(clSetKernelArg(kern, 1, sizeof c, &c));
    CK(clSetKernelArg(kern, 2, sizeof b, &b));
    size_t all = n / 4;
    TIME("ocl_kernel_scatter_rows", CK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &all, NULL, 0, NULL, E)));
    clReleaseKernel(kern);
  }
  // The floor of one small request: 1 KiB written from pinned memory, a one-item kernel,
  // 1 KiB read back into pinned memory, one wait. Median of 1000.
  cl_kernel touch = clCreateKernel(prog, "touch", &e); CK(e);
  CK(clSetKernelArg(touch, 0, sizeof b, &b));
  double rt[1000]; size_t one = 1; double t;
  for (int r = 0; r < 1000; ++r) {
    t = now();
    CK(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, 1024, pinned, 0, NULL, NULL));
    CK(clEnqueueNDRangeKernel(q, touch, 1, NULL, &one, NULL, 0, NULL, NULL));
    CK(clEnqueueReadBuffer(q, b, CL_TRUE, 0, 1024, pinned + 4096, 0, NULL, NULL));
    rt[r] = now() - t;
  }
  qsort(rt, 1000, sizeof rt[0], cmp);
  printf("{\"what\": \"ocl_roundtrip_1k\", \"us\": %.1f}\n", rt[500] * 1e6);
  return 0;
}
