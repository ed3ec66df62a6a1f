// One index of an index walk (ScatterWalk, GatherWalk), read from its bytes.
#ifndef TENSOROP_KERNELS_TBB_LOAD_INDEX_H_
#define TENSOROP_KERNELS_TBB_LOAD_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tensorop::tbb_backend {

// The index at `at` as a position along an axis of `axis_size`: a negative one
// counts from the end. Validation checked every index in range.
template <typename Index>
int64_t LoadIndex(const std::byte* at, int64_t axis_size) {
  Index value;
  std::memcpy(&value, at, sizeof value);
  const int64_t index = static_cast<int64_t>(value);
  return index < 0 ? index + axis_size : index;
}

}  // namespace tensorop::tbb_backend

#endif  // TENSOROP_KERNELS_TBB_LOAD_INDEX_H_
