// Windows of windows: a chain of slices, strided slices and splits read as one
// window on the buffer under the first of them, so that only the last window
// is ever copied (DirectML's view of a slice as a change of sizes, strides and
// offset, not of bytes).
#ifndef TENSOROP_CORE_PLAN_COMPOSE_WINDOWS_H_
#define TENSOROP_CORE_PLAN_COMPOSE_WINDOWS_H_

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/window.h"

namespace tensorop {

// Whether `layout` is one ComposeWindows reads through: packed row-major
// (PackedStrides) with at least one element.
bool ComposableMiddle(const Layout& layout);

// Whether the window `outer` (onto `output_sizes`) on a tensor laid out as
// `middle` (ComposableMiddle) moves through `middle`'s coordinates evenly: each
// output dimension one fixed step of coordinates, never carried into the next
// dimension (every slice, split, transpose and expand window; a reshape's
// window where it only splits dimensions, or adds or drops 1s). Only then is
// it a window on whatever `middle` is a window on.
bool ComposesOver(const Layout& middle, const InputWindow& outer,
                  std::span<const int64_t> output_sizes);

// The window `outer` (ComposesOver `middle`) reads on a tensor laid out as `middle`
// (ComposableMiddle), which is the window `inner` on a source buffer, as one
// window on that source: element d of the outer output (`output_sizes`) is
// source[base + dot(d, strides)]. Strides of any sign, zero included, carry
// through; a size-1 dimension's stride is 0. Every address involved is an
// element of the buffers, so nothing can overflow.
InputWindow ComposeWindows(const InputWindow& inner, const Layout& middle, const InputWindow& outer,
                           std::span<const int64_t> output_sizes);

}  // namespace tensorop

#endif  // TENSOROP_CORE_PLAN_COMPOSE_WINDOWS_H_
