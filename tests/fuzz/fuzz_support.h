// What the request fuzz targets share: a RunRequest taken the way tensord takes
// it (request log record, placement, then the pipeline's own steps of a call:
// admit with its plan, reserve, bind the outputs, execute on the CPU backend
// through the real Scheduler), without gRPC transport, under limits that keep
// one input below ~64 MiB of allocations.
#ifndef TENSOROP_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define TENSOROP_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/limits.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::fuzz {

// --max_request_bytes for the fuzzers: inputs plus output buffers of one
// request. With the parsed input itself (at most -max_len bytes) this bounds
// what one run allocates.
inline constexpr int64_t kMaxRequestBytes = int64_t{48} << 20;
// --max_message_bytes: a Run or RunBidi answer must fit.
inline constexpr int64_t kMaxMessageBytes = int64_t{16} << 20;
// --chunk_bytes for the streamed answers (small, so outputs span many parts).
inline constexpr int64_t kChunkBytes = int64_t{64} << 10;
// Elements a plan may copy or scatter before the harness declines to execute
// it. The server bounds such work with the call's deadline; here an input of a
// few bytes (a stride-0 tensor of 2^32 elements) must not take minutes.
inline constexpr int64_t kMaxWorkElements = int64_t{1} << 24;
// Messages of one RunBidi or RunChunked input (RunBidi's window is 64).
inline constexpr size_t kMaxFrames = 64;

Limits FuzzLimits();

// How the answer travels: inline in one message (Run, RunBidi: bounded by
// kMaxMessageBytes) or as header + chunk parts (RunStream, RunChunked).
enum class Answer { kInline, kStreamed };

// Takes `request` as tensord would for `method` ("Run", ...). Aborts (a crash
// for libFuzzer) when a plan would read or write outside its buffers or the
// answer disagrees with the plan; returns the status the client would see.
absl::Status RunRequest(const v1::RunRequest& request, absl::string_view method, Answer answer);

// The fuzzers' stream format: frames of a 4-byte little-endian length and that
// many bytes; a length past the end takes what is left. At most kMaxFrames.
std::vector<absl::string_view> SplitFrames(const uint8_t* data, size_t size);

// The inverse, for seed generation and tests.
std::string JoinFrames(const std::vector<std::string>& frames);

}  // namespace tensorop::fuzz

#endif  // TENSOROP_TESTS_FUZZ_FUZZ_SUPPORT_H_
