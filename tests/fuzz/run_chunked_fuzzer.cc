// RunChunked: the input is a stream of RequestPart messages in frames
// (fuzz_support.h). The parts are taken in as server/native/run_chunked_reactor.cc's
// ChunkedReactor takes them (first a request, then chunks appended to named
// inputs, the uploaded bytes held to --max_request_bytes as they arrive), and
// the end of the input is the client's half-close: the assembled request runs
// and is answered in parts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_support.h"

namespace {

using tensorop::v1::RequestPart;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorop::v1::RunRequest request;
  bool have_request = false;
  int64_t bytes_in = 0;
  for (absl::string_view frame : tensorop::fuzz::SplitFrames(data, size)) {
    RequestPart part;
    if (!part.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) return 0;
    if (!have_request) {
      if (!part.has_request()) return 0;  // the first part must be a request
      request = std::move(*part.mutable_request());
      have_request = true;
      for (const auto& [name, tensor] : request.inputs()) {
        bytes_in += static_cast<int64_t>(tensor.data().size());
      }
      if (bytes_in > tensorop::fuzz::kMaxRequestBytes) return 0;  // RESOURCE_EXHAUSTED
      continue;
    }
    if (part.part_case() != RequestPart::kChunk) return 0;  // a second request, or nothing
    auto input = request.mutable_inputs()->find(part.chunk().input());
    if (input == request.mutable_inputs()->end()) return 0;  // not an input
    bytes_in += static_cast<int64_t>(part.chunk().data().size());
    if (bytes_in > tensorop::fuzz::kMaxRequestBytes) return 0;
    input->second.mutable_data()->append(part.chunk().data());
  }
  if (!have_request) return 0;  // the stream ended before a request part
  tensorop::fuzz::RunRequest(request, "RunChunked", tensorop::fuzz::Answer::kStreamed)
      .IgnoreError();
  return 0;
}
