// Run and RunStream: the input is the bytes of one RunRequest as a client
// sends them. Answered inline (Run); a request whose answer is over the message
// limit is also taken as RunStream would (header + chunk parts).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorop::v1::RunRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;  // INVALID_ARGUMENT
  using tensorop::fuzz::Answer;
  absl::Status status = tensorop::fuzz::RunRequest(request, "Run", Answer::kInline);
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    tensorop::fuzz::RunRequest(request, "RunStream", Answer::kStreamed).IgnoreError();
  }
  return 0;
}
