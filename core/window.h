// An output that is a strided window on an input, in elements: what validation
// of slice, strided_slice and split finds and what planning turns into bytes.
// Its own unit so core/validate/ does not include core/plan/.
#ifndef TENSOROP_CORE_WINDOW_H_
#define TENSOROP_CORE_WINDOW_H_

#include <cstdint>
#include <vector>

namespace tensorop {

// output[c] = input[base + dot(c, strides)] for c over the output's sizes;
// counted in elements. Validation guarantees every address is in the input.
struct InputWindow {
  int64_t base = 0;
  std::vector<int64_t> strides;
};

}  // namespace tensorop

#endif  // TENSOROP_CORE_WINDOW_H_
