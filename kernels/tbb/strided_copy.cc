#include "kernels/tbb/strided_copy.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kernels/tbb/blocks.h"

namespace tensorop::tbb_backend {
namespace {

// dst[i] = src[i * kStep] for a step known at compile time, so the compiler
// vectorises the gather (reversal, every other element).
template <typename Word, int64_t kStep>
void GatherRun(const std::byte* src, std::byte* dst, int64_t count) {
  constexpr int64_t kWidth = sizeof(Word);
  for (int64_t i = 0; i < count; ++i) {
    Word value;
    std::memcpy(&value, src + i * kStep * kWidth, kWidth);
    std::memcpy(dst + i * kWidth, &value, kWidth);
  }
}

// dst[i] = src[-i]: bytes backwards. Baseline x86-64 (SSE2) has no byte
// shuffle, so GCC leaves GatherRun<uint8_t, -1> scalar (about 1 GB/s here);
// eight bytes at a time through a byte swap run at memcpy's speed.
void ReverseBytes(const std::byte* src, std::byte* dst, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t word;
    std::memcpy(&word, src - i - 7, sizeof(word));
    word = __builtin_bswap64(word);
    std::memcpy(dst + i, &word, sizeof(word));
  }
  for (; i < count; ++i) dst[i] = src[-i];
}

// One run of the innermost dimension. Dispatch is on the element's width only:
// the bits are moved, never interpreted.
template <typename Word>
void CopyRun(const std::byte* src, std::byte* dst, int64_t count, int64_t src_stride,
             int64_t dst_stride) {
  constexpr int64_t kWidth = sizeof(Word);
  if (dst_stride == kWidth) {
    switch (src_stride) {
      case kWidth:
        std::memcpy(dst, src, count * kWidth);
        return;
      case -kWidth:
        if constexpr (kWidth == 1) {
          ReverseBytes(src, dst, count);
        } else {
          GatherRun<Word, -1>(src, dst, count);
        }
        return;
      case 2 * kWidth:
        GatherRun<Word, 2>(src, dst, count);
        return;
      case 0:
        GatherRun<Word, 0>(src, dst, count);
        return;  // broadcast
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * dst_stride, src + i * src_stride, kWidth);
  }
}

// Copies the elements [begin, end) of the row-major walk over copy.sizes.
template <typename Word>
void CopyElements(const StridedCopy& copy, const std::byte* src, std::byte* dst, int64_t begin,
                  int64_t end) {
  const size_t rank = copy.sizes.size();
  if (rank == 0) {  // a single element
    std::memcpy(dst + copy.dst_offset, src + copy.src_offset, sizeof(Word));
    return;
  }
  const int64_t inner = copy.sizes[rank - 1];
  // Coordinates of `begin` and the offsets they address.
  // Inline storage: a 1 KiB request must not pay for a heap allocation.
  absl::InlinedVector<int64_t, 16> coords(rank);
  int64_t remainder = begin;
  for (size_t d = rank; d-- > 0;) {
    coords[d] = remainder % copy.sizes[d];
    remainder /= copy.sizes[d];
  }
  int64_t src_offset = copy.src_offset, dst_offset = copy.dst_offset;
  for (size_t d = 0; d < rank; ++d) {
    src_offset += coords[d] * copy.src_strides[d];
    dst_offset += coords[d] * copy.dst_strides[d];
  }
  while (begin < end) {
    const int64_t count = std::min(inner - coords[rank - 1], end - begin);
    CopyRun<Word>(src + src_offset, dst + dst_offset, count, copy.src_strides[rank - 1],
                  copy.dst_strides[rank - 1]);
    begin += count;
    coords[rank - 1] += count;
    src_offset += count * copy.src_strides[rank - 1];
    dst_offset += count * copy.dst_strides[rank - 1];
    // Carry into the outer dimensions, rewinding each one that wraps.
    for (size_t d = rank - 1; d > 0 && coords[d] == copy.sizes[d]; --d) {
      src_offset += copy.src_strides[d - 1] - coords[d] * copy.src_strides[d];
      dst_offset += copy.dst_strides[d - 1] - coords[d] * copy.dst_strides[d];
      coords[d] = 0;
      ++coords[d - 1];
    }
  }
}

template <typename Word>
absl::Status Run(const StridedCopy& copy, const std::byte* src, std::byte* dst,
                 const StopCheck& stop) {
  const int64_t bytes = copy.element_count * copy.element_size;
  return ForEachBlock(
      copy.element_count, kBlockBytes / copy.element_size, bytes, stop,
      [&](int64_t begin, int64_t end) { CopyElements<Word>(copy, src, dst, begin, end); });
}

}  // namespace

absl::Status RunStridedCopy(const StridedCopy& copy, const std::byte* src, std::byte* dst,
                            const StopCheck& stop) {
  switch (copy.element_size) {
    case 1:
      return Run<uint8_t>(copy, src, dst, stop);
    case 2:
      return Run<uint16_t>(copy, src, dst, stop);
    case 4:
      return Run<uint32_t>(copy, src, dst, stop);
    case 8:
      return Run<uint64_t>(copy, src, dst, stop);
  }
  return absl::InternalError("strided copy: element size is not 1, 2, 4 or 8");
}

}  // namespace tensorop::tbb_backend
