#include "kernels/tbb/strided_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

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

// A transpose's rows: each reads down a column of its source, one element a
// cache line, and the row after it reads the elements beside those. Copied a
// tile of rows at a time, each line read is used by every row of the tile
// while it is still cached (an untiled transpose reads every line once per
// element it holds).
inline constexpr int64_t kTileRows = 16;
inline constexpr int64_t kTileColumns = 16;

template <typename Word>
bool ReadsDownColumns(const StridedCopy& copy) {
  const size_t rank = copy.sizes.size();
  constexpr int64_t kWidth = sizeof(Word);
  return rank >= 2 && copy.dst_strides[rank - 1] == kWidth &&
         copy.src_strides[rank - 2] == kWidth &&
         (copy.src_strides[rank - 1] >= 64 || copy.src_strides[rank - 1] <= -64);
}

// `rows` whole rows of `columns` elements: row r, column c comes from
// src[r * kWidth + c * src_column] and goes to dst[r * dst_row + c * kWidth].
#if defined(__SSE2__)
// Four rows by four columns of 4-byte elements, through registers: four
// 16-byte loads (each column's four rows are side by side in the source), a
// 4x4 transpose, four 16-byte stores. Shuffles move bits, never read them.
inline void CopyFourByFour(const std::byte* src, std::byte* dst, int64_t src_column,
                           int64_t dst_row) {
  __m128 c0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  __m128 c1 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + src_column)));
  __m128 c2 =
      _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * src_column)));
  __m128 c3 =
      _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * src_column)));
  _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_castps_si128(c0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + dst_row), _mm_castps_si128(c1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * dst_row), _mm_castps_si128(c2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 3 * dst_row), _mm_castps_si128(c3));
}
#endif

// `rows` whole rows of `columns` elements: row r, column c comes from
// src[r * kWidth + c * src_column] and goes to dst[r * dst_row + c * kWidth].
template <typename Word>
void CopyTiledRows(const std::byte* src, std::byte* dst, int64_t rows, int64_t columns,
                   int64_t src_column, int64_t dst_row) {
  constexpr int64_t kWidth = sizeof(Word);
  for (int64_t c0 = 0; c0 < columns; c0 += kTileColumns) {
    const int64_t count = std::min(kTileColumns, columns - c0);
    int64_t r = 0;
#if defined(__SSE2__)
    if constexpr (kWidth == 4) {
      if (count % 4 == 0) {
        for (; r + 4 <= rows; r += 4) {
          for (int64_t c = c0; c < c0 + count; c += 4) {
            CopyFourByFour(src + r * kWidth + c * src_column, dst + r * dst_row + c * kWidth,
                           src_column, dst_row);
          }
        }
      }
    }
#endif
    for (; r < rows; ++r) {
      const std::byte* from = src + r * kWidth + c0 * src_column;
      std::byte* to = dst + r * dst_row + c0 * kWidth;
      for (int64_t c = 0; c < count; ++c) {
        std::memcpy(to + c * kWidth, from + c * src_column, kWidth);
      }
    }
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
  // Carries dimension `d` and those outside it, rewinding each one that wraps.
  const auto carry = [&](size_t d) {
    for (; d > 0 && coords[d] == copy.sizes[d]; --d) {
      src_offset += copy.src_strides[d - 1] - coords[d] * copy.src_strides[d];
      dst_offset += copy.dst_strides[d - 1] - coords[d] * copy.dst_strides[d];
      coords[d] = 0;
      ++coords[d - 1];
    }
  };
  const bool tiled = ReadsDownColumns<Word>(copy);
  while (begin < end) {
    if (tiled && coords[rank - 1] == 0) {
      const int64_t rows =
          std::min({kTileRows, (end - begin) / inner, copy.sizes[rank - 2] - coords[rank - 2]});
      if (rows >= 2) {
        CopyTiledRows<Word>(src + src_offset, dst + dst_offset, rows, inner,
                            copy.src_strides[rank - 1], copy.dst_strides[rank - 2]);
        begin += rows * inner;
        coords[rank - 2] += rows;
        src_offset += rows * copy.src_strides[rank - 2];
        dst_offset += rows * copy.dst_strides[rank - 2];
        carry(rank - 2);
        continue;
      }
    }
    const int64_t count = std::min(inner - coords[rank - 1], end - begin);
    CopyRun<Word>(src + src_offset, dst + dst_offset, count, copy.src_strides[rank - 1],
                  copy.dst_strides[rank - 1]);
    begin += count;
    coords[rank - 1] += count;
    src_offset += count * copy.src_strides[rank - 1];
    dst_offset += count * copy.dst_strides[rank - 1];
    carry(rank - 1);
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
