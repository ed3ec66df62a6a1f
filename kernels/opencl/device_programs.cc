// The program and kernel cache: a program is built once per (source, word
// size, index size) and kernel objects are lent one borrower at a time.
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/opencl/device.h"
#include "kernels/opencl/sources.h"

namespace tensorop::opencl_backend {
namespace {

const char* WordType(int size) {
  switch (size) {
    case 1:
      return "uchar";
    case 2:
      return "ushort";
    case 4:
      return "uint";
    case 8:
      return "ulong";
    default:
      return "uint4";
  }
}

}  // namespace

absl::StatusOr<cl_program> Device::Program(Source source, int word_size, int index_size, int vec) {
  std::lock_guard<std::mutex> lock(programs_mutex_);
  const auto key = std::make_tuple(source, word_size, index_size, vec);
  if (auto found = programs_.find(key); found != programs_.end()) return found->second;

  const char* text = source == Source::kStridedCopy       ? kStridedCopyClSource
                     : source == Source::kScatterElements ? kScatterElementsClSource
                                                          : kGatherClSource;
  cl_int error = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_, 1, &text, nullptr, &error);
  RETURN_IF_ERROR(ClStatus(error, "clCreateProgramWithSource"));
  // WORDV: the vector of `vec` words (a word of 16 bytes is already uint4).
  const std::string vector =
      vec == 1 ? WordType(word_size) : absl::StrCat(WordType(word_size), vec);
  std::string options = absl::StrCat(
      "-cl-std=CL1.2 -DWORD=", WordType(word_size), " -DVEC=", vec, " -DWORDV=", vector,
      index_size == 4 ? " -DIDX=int -DIDX8=int8" : " -DIDX=long -DIDX8=long8");
  error = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (error != CL_SUCCESS) {
    size_t log_size = 0;
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
    std::string log(log_size, '\0');
    clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, log_size, log.data(), nullptr);
    clReleaseProgram(program);
    return absl::UnavailableError(absl::StrCat(
        "clBuildProgram(", options, ") failed: ", ClErrorName(error), " (", error, "): ", log));
  }
  programs_.emplace(key, program);
  return program;
}

KernelLease::~KernelLease() {
  if (kernel_ != nullptr) owner_->ReturnKernel(key_, kernel_);
}

absl::StatusOr<KernelLease> Device::MakeKernel(Kernel which, int word_size, int index_size,
                                               int vec) {
  const Source source = which == Kernel::kScatterElements ? Source::kScatterElements
                        : which == Kernel::kGather        ? Source::kGather
                                                          : Source::kStridedCopy;
  const char* name = which == Kernel::kStridedCopy       ? "strided_copy"
                     : which == Kernel::kTransposeCopy   ? "transpose_copy"
                     : which == Kernel::kScatterElements ? "scatter_elements"
                                                         : "gather";
  // word_size and vec are at most 16, index_size 4 or 8.
  const int key = (static_cast<int>(which) << 24) | (vec << 16) | (word_size << 8) | index_size;
  {
    std::lock_guard<std::mutex> lock(kernels_mutex_);
    std::vector<cl_kernel>& free = free_kernels_[key];
    if (!free.empty()) {
      cl_kernel kernel = free.back();
      free.pop_back();
      return KernelLease(this, key, kernel);
    }
  }
  ASSIGN_OR_RETURN(cl_program program, Program(source, word_size, index_size, vec));
  cl_int error = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, name, &error);
  RETURN_IF_ERROR(ClStatus(error, absl::StrCat("clCreateKernel(", name, ")")));
  return KernelLease(this, key, kernel);
}

void Device::ReturnKernel(int key, cl_kernel kernel) {
  std::lock_guard<std::mutex> lock(kernels_mutex_);
  free_kernels_[key].push_back(kernel);
}
}  // namespace tensorop::opencl_backend
