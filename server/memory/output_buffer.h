// Output buffers: what a kernel writes an output into, freed back to the
// buffer pool it came from or to malloc; and a buffer shared by the parts of
// a streamed output.
#ifndef TENSOROP_SERVER_MEMORY_OUTPUT_BUFFER_H_
#define TENSOROP_SERVER_MEMORY_OUTPUT_BUFFER_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "server/memory/memory_budget.h"

namespace tensorop::server {

class BufferPool;

// Frees an output buffer: its share of the memory budget given back first
// (`reservation`, when the buffer holds its own), then the bytes back to the
// pool they came from (`pool`, with its `capacity`), else with free().
struct BufferDeleter {
  BufferPool* pool = nullptr;
  size_t capacity = 0;
  MemoryBudget::Reservation reservation;
  void operator()(std::byte* bytes);
};
using OutputBuffer = std::unique_ptr<std::byte[], BufferDeleter>;

// A buffer of `bytes` (at least one byte) holding whatever it held: malloc's
// when small, else whole huge pages, a previous call's resident ones when
// `pool` (null: none) kept one (`kept`, when given, tells). Null when out of
// memory.
OutputBuffer AllocateBuffer(size_t bytes, BufferPool* pool, bool* kept = nullptr);

// A buffer for `layout`'s buffer_bytes() (at least one byte). Only a layout
// with padding (bytes no element covers) is zeroed; every other byte is
// written by the kernel, which covers each element of an output exactly once,
// so a large one may come from `pool` (null: none) holding a previous call's
// bytes. RESOURCE_EXHAUSTED when there is no memory for it.
absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool);

// Accounted output buffers hold their share of the budget themselves, in a
// Sibling of the call's reservation, and give it back when they are freed,
// whoever frees them last: the call, a later step, gRPC done with a slice.
//
// AllocateOutput, its bytes reserved first for `what`, in the call of
// `call` (a reservation of it): RESOURCE_EXHAUSTED naming --max_memory_bytes
// when they do not fit.
absl::StatusOr<OutputBuffer> AllocateOutput(const Layout& layout, BufferPool* pool,
                                            const MemoryBudget::Reservation& call,
                                            absl::string_view what);
// AllocateOutput, its bytes taken over from `admitted`, which reserved them
// with the call's other outputs when the call was admitted.
absl::StatusOr<OutputBuffer> AllocateAdmittedOutput(const Layout& layout, BufferPool* pool,
                                                    MemoryBudget::Reservation& admitted);

// Whether `layout`'s elements cover every byte of its buffer.
bool CoversBuffer(const Layout& layout);

// A buffer shared by the slices of a streamed output: freed when the last
// slice (and the holder) let go.
using SharedOutput = std::shared_ptr<std::byte>;
SharedOutput Share(OutputBuffer buffer);
// `buffer`'s reservation taken out of its call's ledger, its bytes still
// reserved until the buffer is freed: for slices of it handed to gRPC, which
// may free them after the call ended. A buffer without one: nothing.
void LeaveCall(const SharedOutput& buffer);
void LeaveCall(OutputBuffer& buffer);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_MEMORY_OUTPUT_BUFFER_H_
