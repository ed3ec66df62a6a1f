// RunBidi: the input is a stream of RunRequest messages in frames
// (fuzz_support.h: 4-byte little-endian length, then the bytes). Each request
// is answered on its own; a message that does not parse ends the stream, as in
// the server.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (absl::string_view frame : tensorop::fuzz::SplitFrames(data, size)) {
    tensorop::v1::RunRequest request;
    if (!request.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) break;
    tensorop::fuzz::RunRequest(request, "RunBidi", tensorop::fuzz::Answer::kInline).IgnoreError();
  }
  return 0;
}
