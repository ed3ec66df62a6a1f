#include "tests/core/kernels/reference.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_join.h"
#include "kernels/opencl/device.h"
#include "kernels/tbb/execute.h"

namespace tensorop::testing {
namespace {

int64_t Product(std::span<const int64_t> sizes) {
  int64_t product = 1;
  for (int64_t size : sizes) product *= size;
  return product;
}

int64_t BufferElements(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  if (Product(sizes) == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < sizes.size(); ++i) last += (sizes[i] - 1) * strides[i];
  return last + 1;
}

void StoreBits(std::byte* at, uint64_t bits, int width) {
  std::memcpy(at, &bits, width);  // little-endian host
}

}  // namespace

std::string LayoutName(LayoutKind kind) {
  switch (kind) {
    case LayoutKind::kPacked:
      return "packed";
    case LayoutKind::kPadded:
      return "padded";
    case LayoutKind::kBroadcast:
      return "broadcast";
    case LayoutKind::kPermuted:
      return "permuted";
  }
  return "?";
}

std::vector<int64_t> MakeStrides(std::span<const int64_t> sizes, LayoutKind kind,
                                 std::mt19937_64& rng) {
  const size_t rank = sizes.size();
  std::vector<int64_t> strides(rank);
  switch (kind) {
    case LayoutKind::kPacked:
      return {};
    case LayoutKind::kPadded: {
      int64_t pitch = 1 + static_cast<int64_t>(rng() % 2);  // inner elements may be spaced too
      for (size_t d = rank; d-- > 0;) {
        strides[d] = pitch;
        pitch = pitch * std::max<int64_t>(sizes[d], 1) + 1 + static_cast<int64_t>(rng() % 3);
      }
      return strides;
    }
    case LayoutKind::kBroadcast: {
      strides = PackedStrides(sizes);
      // At least one broadcast dimension, more at random.
      strides[rng() % rank] = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (rng() % 3 == 0) strides[d] = 0;
      }
      return strides;
    }
    case LayoutKind::kPermuted: {
      std::vector<size_t> order(rank);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      if (rank > 1 && std::is_sorted(order.begin(), order.end())) {
        std::reverse(order.begin(), order.end());  // column-major
      }
      int64_t pitch = 1;
      for (size_t k = rank; k-- > 0;) {  // order[rank-1] is the fastest dimension
        strides[order[k]] = pitch;
        pitch *= std::max<int64_t>(sizes[order[k]], 1);
      }
      return strides;
    }
  }
  return {};
}

OwnedTensor MakeTensor(DType dtype, std::vector<int64_t> sizes, LayoutKind kind,
                       std::mt19937_64& rng) {
  OwnedTensor tensor;
  tensor.desc.dtype = dtype;
  tensor.desc.strides = MakeStrides(sizes, kind, rng);
  const int64_t elements =
      tensor.desc.strides.empty() ? Product(sizes) : BufferElements(sizes, tensor.desc.strides);
  tensor.desc.sizes = std::move(sizes);
  tensor.bytes.resize(elements * ElementSize(dtype));
  for (std::byte& b : tensor.bytes) b = static_cast<std::byte>(rng());
  return tensor;
}

OwnedTensor MakeIndexTensor(DType dtype, std::vector<int64_t> sizes,
                            std::span<const int64_t> values, LayoutKind kind,
                            std::mt19937_64& rng) {
  OwnedTensor tensor = MakeTensor(dtype, sizes, kind, rng);
  const std::vector<int64_t> strides =
      tensor.desc.strides.empty() ? PackedStrides(sizes) : tensor.desc.strides;
  const int width = ElementSize(dtype);
  size_t n = 0;
  ForEachCoord(sizes, [&](std::span<const int64_t> coords) {
    int64_t offset = 0;
    for (size_t d = 0; d < coords.size(); ++d) offset += coords[d] * strides[d];
    StoreBits(tensor.bytes.data() + offset * width, static_cast<uint64_t>(values[n++]), width);
  });
  return tensor;
}

uint64_t ElementBits(const TensorDesc& desc, std::span<const std::byte> bytes,
                     std::span<const int64_t> coords) {
  const std::vector<int64_t> strides =
      desc.strides.empty() ? PackedStrides(desc.sizes) : desc.strides;
  int64_t offset = 0;
  for (size_t d = 0; d < coords.size(); ++d) offset += coords[d] * strides[d];
  const int width = ElementSize(desc.dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + offset * width, width);
  return bits;
}

std::string BackendName(Backend backend) { return backend == Backend::kTbb ? "tbb" : "opencl"; }

namespace {

absl::StatusOr<opencl_backend::Device*> FirstOpenClDevice() {
  static std::vector<std::string>* skipped = new std::vector<std::string>();
  static std::vector<std::unique_ptr<opencl_backend::Device>>* devices =
      new std::vector<std::unique_ptr<opencl_backend::Device>>(
          opencl_backend::OpenAllDevices(skipped));
  if (devices->empty()) {
    return absl::UnavailableError(absl::StrCat("no OpenCL device (is pocl-opencl-icd installed?) ",
                                               absl::StrJoin(*skipped, "; ")));
  }
  return devices->front().get();
}

}  // namespace

absl::StatusOr<std::vector<OwnedOutput>> RunOn(Backend backend, const OpRequest& request,
                                               const Limits& limits) {
  absl::StatusOr<ExecutionPlan> plan = PlanOperator(request, limits);
  if (!plan.ok()) return plan.status();
  std::vector<std::span<const std::byte>> inputs;
  for (absl::string_view name : plan->input_names) {
    for (const NamedTensor& input : request.inputs) {
      if (input.name == name) inputs.push_back(input.tensor.data);
    }
  }
  std::vector<OwnedOutput> outputs;
  std::vector<std::byte*> output_pointers;
  for (const Layout& layout : plan->outputs) {
    outputs.push_back({layout, std::vector<std::byte>(layout.buffer_bytes())});
  }
  for (OwnedOutput& output : outputs) output_pointers.push_back(output.bytes.data());
  absl::Status status;
  if (backend == Backend::kTbb) {
    std::vector<const std::byte*> pointers;
    for (std::span<const std::byte> input : inputs) pointers.push_back(input.data());
    status = tbb_backend::Execute(*plan, pointers, output_pointers);
  } else {
    absl::StatusOr<opencl_backend::Device*> device = FirstOpenClDevice();
    if (!device.ok()) return device.status();
    status = (*device)->Execute(*plan, inputs, output_pointers, NeverStop);
  }
  if (!status.ok()) return status;
  return outputs;
}

Expected ReferenceSlice(const SliceAttrs& attrs, const OwnedTensor& input,
                        std::span<const int64_t> output_sizes) {
  Expected expected;
  expected.sizes.assign(output_sizes.begin(), output_sizes.end());
  std::vector<int64_t> source(output_sizes.size());
  ForEachCoord(output_sizes, [&](std::span<const int64_t> c) {
    for (size_t i = 0; i < c.size(); ++i) {
      const int64_t start =
          attrs.offsets[i] + (attrs.window_strides[i] < 0 ? attrs.window_sizes[i] - 1 : 0);
      source[i] = start + attrs.window_strides[i] * c[i];
    }
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

std::optional<Expected> ReferenceStridedSlice(const StridedSliceAttrs& attrs,
                                              const OwnedTensor& input) {
  // Each output dimension is a list of input indices along one input dimension
  // (or a new axis); shrunk dimensions pin one index.
  struct OutDim {
    int input_dim;  // -1: new axis
    std::vector<int64_t> indices;
  };
  const std::vector<int64_t>& sizes = input.desc.sizes;
  const int rank = static_cast<int>(sizes.size());
  const size_t m = attrs.begin.size();
  auto bit = [&](const std::vector<int64_t>& mask, size_t i) {
    return i < mask.size() && mask[i] == 1;
  };
  int new_axes = 0, ellipses = 0;
  for (size_t i = 0; i < m; ++i) {
    new_axes += bit(attrs.new_axis_mask, i);
    ellipses += bit(attrs.ellipsis_mask, i);
  }
  const int consuming = static_cast<int>(m) - new_axes - ellipses;
  if (ellipses > 1 || consuming > rank) return std::nullopt;

  std::vector<int64_t> pinned(rank, -1);
  std::vector<OutDim> dims;
  int d = 0;
  for (size_t i = 0; i < m; ++i) {
    if (bit(attrs.ellipsis_mask, i)) {
      for (int k = 0; k < rank - consuming; ++k, ++d) {
        OutDim dim{d, {}};
        for (int64_t x = 0; x < sizes[d]; ++x) dim.indices.push_back(x);
        dims.push_back(dim);
      }
    } else if (bit(attrs.new_axis_mask, i)) {
      dims.push_back({-1, {0}});
    } else if (bit(attrs.shrink_axis_mask, i)) {
      int64_t index = attrs.begin[i] < 0 ? attrs.begin[i] + sizes[d] : attrs.begin[i];
      if (index < 0 || index >= sizes[d]) return std::nullopt;
      pinned[d++] = index;
    } else {
      const int64_t n = sizes[d];
      const int64_t s = attrs.stride.empty() ? 1 : attrs.stride[i];
      if (s == 0) return std::nullopt;
      OutDim dim{d, {}};
      if (n > 0) {
        int64_t b = attrs.begin[i], e = attrs.end[i];
        if (s > 0) {
          b = bit(attrs.begin_mask, i) ? 0 : std::clamp<int64_t>(b < 0 ? b + n : b, 0, n);
          e = bit(attrs.end_mask, i) ? n : std::clamp<int64_t>(e < 0 ? e + n : e, 0, n);
          for (int64_t x = b; x < e; x += s) dim.indices.push_back(x);
        } else {
          b = bit(attrs.begin_mask, i) ? n - 1 : std::clamp<int64_t>(b < 0 ? b + n : b, 0, n - 1);
          e = bit(attrs.end_mask, i) ? -1 : std::clamp<int64_t>(e < 0 ? e + n : e, -1, n);
          for (int64_t x = b; x > e; x += s) dim.indices.push_back(x);
        }
      }
      dims.push_back(dim);
      ++d;
    }
  }
  for (; d < rank; ++d) {
    OutDim dim{d, {}};
    for (int64_t x = 0; x < sizes[d]; ++x) dim.indices.push_back(x);
    dims.push_back(dim);
  }

  Expected expected;
  for (const OutDim& dim : dims) {
    expected.sizes.push_back(static_cast<int64_t>(dim.indices.size()));
  }
  std::vector<int64_t> source(rank);
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    for (int k = 0; k < rank; ++k) source[k] = pinned[k];
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k].input_dim >= 0) source[dims[k].input_dim] = dims[k].indices[c[k]];
    }
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

std::vector<Expected> ReferenceSplit(int64_t axis, const OwnedTensor& input,
                                     const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<Expected> outputs;
  int64_t start = 0;
  for (const std::vector<int64_t>& output_sizes : sizes) {
    Expected expected{output_sizes, {}};
    std::vector<int64_t> source;
    ForEachCoord(output_sizes, [&](std::span<const int64_t> c) {
      source.assign(c.begin(), c.end());
      source[axis] += start;
      expected.values.push_back(ElementBits(input.desc, input.bytes, source));
    });
    start += output_sizes[axis];
    outputs.push_back(std::move(expected));
  }
  return outputs;
}

namespace {

// The index at `c` of `indices`, negative ones counted from the end of an axis
// of `axis_size`.
int64_t IndexAt(const OwnedTensor& indices, std::span<const int64_t> c, int64_t axis_size) {
  const uint64_t bits = ElementBits(indices.desc, indices.bytes, c);
  const bool is_signed = indices.desc.dtype == DType::kInt32 || indices.desc.dtype == DType::kInt64;
  int64_t k;
  if (ElementSize(indices.desc.dtype) == 4) {
    k = is_signed ? static_cast<int32_t>(bits) : static_cast<int64_t>(static_cast<uint32_t>(bits));
  } else {
    k = static_cast<int64_t>(bits);
  }
  return k < 0 ? k + axis_size : k;
}

}  // namespace

Expected ReferenceScatterElements(int64_t axis, const OwnedTensor& input,
                                  const OwnedTensor& indices, const OwnedTensor& updates) {
  Expected expected{input.desc.sizes, {}};
  ForEachCoord(input.desc.sizes, [&](std::span<const int64_t> c) {
    expected.values.push_back(ElementBits(input.desc, input.bytes, c));
  });
  const std::vector<int64_t> packed = PackedStrides(input.desc.sizes);
  ForEachCoord(indices.desc.sizes, [&](std::span<const int64_t> c) {
    const int64_t k = IndexAt(indices, c, input.desc.sizes[axis]);
    int64_t offset = 0;
    for (size_t d = 0; d < c.size(); ++d) {
      offset += (static_cast<int64_t>(d) == axis ? k : c[d]) * packed[d];
    }
    expected.values[offset] = ElementBits(updates.desc, updates.bytes, c);
  });
  return expected;
}

Expected ReferenceTranspose(std::span<const int64_t> perm, const OwnedTensor& input) {
  Expected expected;
  for (int64_t axis : perm) expected.sizes.push_back(input.desc.sizes[static_cast<size_t>(axis)]);
  std::vector<int64_t> source(perm.size());
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    for (size_t i = 0; i < c.size(); ++i) source[static_cast<size_t>(perm[i])] = c[i];
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

Expected ReferenceReshape(std::span<const int64_t> output_sizes, const OwnedTensor& input) {
  Expected expected;
  expected.sizes.assign(output_sizes.begin(), output_sizes.end());
  const std::vector<int64_t>& sizes = input.desc.sizes;
  std::vector<int64_t> source(sizes.size());
  int64_t linear = 0;  // rowmajor(c, output_sizes), as ForEachCoord walks in that order
  ForEachCoord(expected.sizes, [&](std::span<const int64_t>) {
    int64_t rest = linear++;
    for (size_t i = sizes.size(); i-- > 0;) {
      source[i] = rest % sizes[i];
      rest /= sizes[i];
    }
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

Expected ReferenceExpand(std::span<const int64_t> output_sizes, const OwnedTensor& input) {
  Expected expected;
  expected.sizes.assign(output_sizes.begin(), output_sizes.end());
  const std::vector<int64_t>& sizes = input.desc.sizes;
  const size_t leading = output_sizes.size() - sizes.size();
  std::vector<int64_t> source(sizes.size());
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    for (size_t i = 0; i < sizes.size(); ++i) source[i] = sizes[i] == 1 ? 0 : c[leading + i];
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

Expected ReferenceTile(std::span<const int64_t> repeats, const OwnedTensor& input) {
  Expected expected;
  const std::vector<int64_t>& sizes = input.desc.sizes;
  for (size_t i = 0; i < sizes.size(); ++i) expected.sizes.push_back(sizes[i] * repeats[i]);
  std::vector<int64_t> source(sizes.size());
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    for (size_t i = 0; i < sizes.size(); ++i) source[i] = c[i] % sizes[i];
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

std::vector<int64_t> RandomIndices(int64_t count, int64_t axis_size, DType index_type,
                                   std::mt19937_64& rng) {
  const bool is_signed = index_type == DType::kInt32 || index_type == DType::kInt64;
  std::vector<int64_t> values;
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = static_cast<int64_t>(rng() % static_cast<uint64_t>(axis_size));
    if (is_signed && rng() % 2) k -= axis_size;
    values.push_back(k);
  }
  return values;
}

int64_t ElementCount(std::span<const int64_t> sizes) {
  int64_t count = 1;
  for (int64_t size : sizes) count *= size;
  return count;
}

Expected ReferenceGather(int64_t axis, const OwnedTensor& input, const OwnedTensor& indices) {
  const std::vector<int64_t>& sizes = input.desc.sizes;
  const size_t a = static_cast<size_t>(axis);
  const size_t q = indices.desc.sizes.size();
  Expected expected;
  expected.sizes.assign(sizes.begin(), sizes.begin() + axis);
  expected.sizes.insert(expected.sizes.end(), indices.desc.sizes.begin(), indices.desc.sizes.end());
  expected.sizes.insert(expected.sizes.end(), sizes.begin() + axis + 1, sizes.end());
  std::vector<int64_t> source(sizes.size());
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    // c = (a, b, e): the input's coordinates before the axis, the indices', after.
    for (size_t d = 0; d < a; ++d) source[d] = c[d];
    source[a] = IndexAt(indices, c.subspan(a, q), sizes[a]);
    for (size_t d = a + 1; d < sizes.size(); ++d) source[d] = c[d + q - 1];
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

Expected ReferenceGatherElements(int64_t axis, const OwnedTensor& input,
                                 const OwnedTensor& indices) {
  Expected expected{indices.desc.sizes, {}};
  std::vector<int64_t> source(indices.desc.sizes.size());
  ForEachCoord(indices.desc.sizes, [&](std::span<const int64_t> c) {
    source.assign(c.begin(), c.end());
    source[static_cast<size_t>(axis)] = IndexAt(indices, c, input.desc.sizes[axis]);
    expected.values.push_back(ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

Expected ReferenceJoin(int64_t axis, const std::vector<OwnedTensor>& inputs) {
  const size_t a = static_cast<size_t>(axis);
  Expected expected{inputs[0].desc.sizes, {}};
  expected.sizes[a] = 0;
  for (const OwnedTensor& input : inputs) expected.sizes[a] += input.desc.sizes[a];
  std::vector<int64_t> source;
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    source.assign(c.begin(), c.end());
    size_t k = 0;
    while (source[a] >= inputs[k].desc.sizes[a]) source[a] -= inputs[k++].desc.sizes[a];
    expected.values.push_back(ElementBits(inputs[k].desc, inputs[k].bytes, source));
  });
  return expected;
}

Expected ReferencePad(const PadAttrs& attrs, uint64_t value_bits, const OwnedTensor& input) {
  const std::vector<int64_t>& sizes = input.desc.sizes;
  Expected expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    expected.sizes.push_back(sizes[i] + attrs.start_padding[i] + attrs.end_padding[i]);
  }
  const std::string mode = attrs.mode.empty() ? "constant" : attrs.mode;
  std::vector<int64_t> source(sizes.size());
  ForEachCoord(expected.sizes, [&](std::span<const int64_t> c) {
    bool outside = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      const int64_t t = c[i] - attrs.start_padding[i];
      if (t >= 0 && t < n) {
        source[i] = t;
      } else if (mode == "constant") {
        outside = true;
      } else if (mode == "edge") {
        source[i] = std::min(std::max(t, int64_t{0}), n - 1);
      } else {
        const int64_t p = mode == "reflect" ? 2 * n - 2 : 2 * n;
        const int64_t m = ((t % p) + p) % p;
        source[i] = m < n ? m : (mode == "reflect" ? p - m : p - 1 - m);
      }
    }
    expected.values.push_back(outside ? value_bits : ElementBits(input.desc, input.bytes, source));
  });
  return expected;
}

::testing::AssertionResult OutputMatches(const OwnedOutput& output, const Expected& expected) {
  const Layout& layout = output.layout;
  if (layout.sizes != expected.sizes) {
    return ::testing::AssertionFailure() << "sizes differ";
  }
  const int width = ElementSize(layout.dtype);
  if (static_cast<int64_t>(output.bytes.size()) != layout.buffer_bytes()) {
    return ::testing::AssertionFailure() << "buffer has " << output.bytes.size() << " bytes";
  }
  std::vector<bool> addressed(output.bytes.size(), false);
  size_t n = 0;
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  ForEachCoord(layout.sizes, [&](std::span<const int64_t> c) {
    int64_t offset = 0;
    for (size_t d = 0; d < c.size(); ++d) offset += c[d] * layout.strides[d];
    uint64_t bits = 0;
    std::memcpy(&bits, output.bytes.data() + offset * width, width);
    for (int b = 0; b < width; ++b) addressed[offset * width + b] = true;
    if (result && bits != expected.values[n]) {
      result = ::testing::AssertionFailure() << "element " << n << " has bits " << std::hex << bits
                                             << ", expected " << expected.values[n];
    }
    ++n;
  });
  if (!result) return result;
  if (n != expected.values.size()) {
    return ::testing::AssertionFailure()
           << "output has " << n << " elements, expected " << expected.values.size();
  }
  for (size_t i = 0; i < output.bytes.size(); ++i) {
    if (!addressed[i] && output.bytes[i] != std::byte{0}) {
      return ::testing::AssertionFailure() << "padding byte " << i << " is not zero";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tensorop::testing
