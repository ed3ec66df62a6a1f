#include "client/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/host_tensor.h"
#include "client/status_macros.h"

namespace tensorop::client {
namespace {

// Every tensor starts at a multiple of this in the region: any element size divides it.
constexpr int64_t kAlignment = 64;

int64_t AlignUp(int64_t value) { return (value + kAlignment - 1) / kAlignment * kAlignment; }

// Bytes an output described by `desc` takes (packed: the product of its sizes;
// strided: 1 + sum((size-1)*stride) elements), -1 when its sizes are not given,
// 0 when they are unusable (the server refuses the request; no room needed).
int64_t OutputRoom(const v1::OutputDesc& desc, int element_size) {
  if (desc.sizes_size() == 0) return -1;
  const bool strided = desc.strides_size() == desc.sizes_size();
  int64_t packed = 1;
  int64_t extent = 1;
  for (int i = 0; i < desc.sizes_size(); ++i) {
    const int64_t size = desc.sizes(i);
    if (size <= 0) return 0;
    if (__builtin_mul_overflow(packed, size, &packed)) return 0;
    int64_t span = 0;
    if (strided &&
        (__builtin_mul_overflow(size - 1, std::max<int64_t>(desc.strides(i), 0), &span) ||
         __builtin_add_overflow(extent, span, &extent))) {
      return 0;
    }
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(strided ? extent : packed, element_size, &bytes)) return 0;
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    const std::string& key, int64_t byte_size) {
  const std::string name = "/" + key;
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create shared memory object ", name, ": ", std::strerror(errno)));
  }
  const int64_t size = std::max<int64_t>(byte_size, 1);
  if (ftruncate(fd, size) != 0) {
    const int error = errno;
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot size shared memory object ", name, " to ", size, " bytes: ", std::strerror(error)));
  }
  void* base = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map shared memory object ", name, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(key, static_cast<std::byte*>(base), size));
}

SharedMemoryRegion::~SharedMemoryRegion() {
  munmap(base_, static_cast<size_t>(byte_size_));
  shm_unlink(("/" + key_).c_str());
}

absl::StatusOr<Result> RunInSharedMemory(Client& client, const v1::RunRequest& request,
                                         const std::string& region_name) {
  v1::RunRequest shared = request;
  // Outputs the request leaves to the server get a description, so that they
  // too go to the region.
  DescribeOutputs(client, shared);
  // Lay out the inputs, then the outputs, each aligned.
  int64_t end = 0;
  int64_t input_elements = 0;
  int output_element_size = 1;
  std::vector<std::pair<const std::string*, int64_t>> input_offsets;
  for (auto& [name, tensor] : *shared.mutable_inputs()) {
    const int element_size = std::max(1, ElementSize(tensor.dtype()));
    // The outputs take the dtype of "input" (join's: of "inputs_0", all one).
    if (name == "input" || name == "inputs_0") output_element_size = element_size;
    input_elements += static_cast<int64_t>(tensor.data().size()) / element_size;
    end = AlignUp(end);
    input_offsets.emplace_back(&name, end);
    end += static_cast<int64_t>(tensor.data().size());
  }
  std::vector<int64_t> output_offsets;
  for (v1::OutputDesc& desc : *shared.mutable_outputs()) {
    int64_t room = OutputRoom(desc, output_element_size);
    if (room < 0) room = std::max<int64_t>(input_elements, 1) * output_element_size;
    end = AlignUp(end);
    output_offsets.push_back(end);
    desc.mutable_shared_memory()->set_region(region_name);
    desc.mutable_shared_memory()->set_offset(end);
    desc.mutable_shared_memory()->set_byte_length(room);
    end += room;
  }
  static int counter = 0;
  const std::string key = absl::StrCat("tensorop-client-", getpid(), "-", ++counter);
  ASSIGN_OR_RETURN(std::unique_ptr<SharedMemoryRegion> region,
                   SharedMemoryRegion::Create(key, end));
  for (auto& [name, offset] : input_offsets) {
    v1::Tensor& tensor = (*shared.mutable_inputs())[*name];
    const int64_t bytes = static_cast<int64_t>(tensor.data().size());
    std::memcpy(region->bytes().data() + offset, tensor.data().data(), tensor.data().size());
    // Replaces the data: `data` and `shared_memory` are one oneof.
    v1::SharedMemoryRef* ref = tensor.mutable_shared_memory();
    ref->set_region(region_name);
    ref->set_offset(offset);
    ref->set_byte_length(bytes);
  }
  ASSIGN_OR_RETURN(v1::SharedMemoryRegion registered,
                   client.RegisterSharedMemory(region_name, key, 0));
  (void)registered;
  absl::StatusOr<Result> result = client.Run(shared);
  const absl::Status unregistered = client.UnregisterSharedMemory(region_name);
  if (!result.ok()) return result;
  RETURN_IF_ERROR(unregistered);
  for (size_t i = 0; i < result->outputs.size() && i < output_offsets.size(); ++i) {
    HostTensor& tensor = result->outputs[i];
    // The server answers explicit strides: the output's extent is
    // 1 + sum((size-1)*stride) elements (none when a size is 0).
    int64_t elements = 1;
    for (size_t d = 0; d < tensor.sizes.size(); ++d) {
      if (tensor.sizes[d] == 0) {
        elements = 0;
        break;
      }
      elements += (tensor.sizes[d] - 1) * (d < tensor.strides.size() ? tensor.strides[d] : 0);
    }
    const int64_t bytes = elements * ElementSize(tensor.dtype);
    const int64_t room = shared.outputs(static_cast<int>(i)).shared_memory().byte_length();
    if (bytes < 0 || bytes > room) {
      return absl::InternalError(
          absl::StrCat("output ", i, " takes ", bytes, " bytes, more than the ", room, " sent"));
    }
    tensor.data.assign(reinterpret_cast<const char*>(region->bytes().data() + output_offsets[i]),
                       static_cast<size_t>(bytes));
  }
  return result;
}

}  // namespace tensorop::client
