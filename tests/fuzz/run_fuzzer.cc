// Run and RunStream: the input is the bytes of one RunRequest as a client
// sends them. Answered inline (Run); a request whose answer is over the message
// limit is also taken as RunStream would (header + chunk parts). The same
// bytes, cut into slices, go through RequestDataView (how Run takes large
// inputs out of a request, and how ModelInfer takes its raw_input_contents),
// which must agree with protobuf's parse.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "inference/grpc_service.pb.h"
#include "server/wire/chunk_part.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// Whatever RequestDataView takes apart, protobuf parses (or refuses) alike.
void CheckDataView(const uint8_t* data, size_t size, const tensorop::v1::RunRequest* parsed) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < size; at += 7) {
    slices.emplace_back(data + at, std::min<size_t>(7, size - at));
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());
  std::optional<tensorop::server::RequestDataView> view =
      tensorop::server::RequestDataView::Of(bytes);
  if (!view.has_value()) return;
  tensorop::v1::RunRequest rest;
  const bool rest_ok = rest.ParseFromString(view->rest());
  if (rest_ok != (parsed != nullptr)) __builtin_trap();
  if (!rest_ok) return;
  for (size_t i = 0; i < view->inputs().size(); ++i) {
    const tensorop::server::RequestDataView::InputData& input = view->inputs()[i];
    std::string bytes_of_input(static_cast<size_t>(input.bytes), '\0');
    view->MoveDataTo(i, reinterpret_cast<std::byte*>(bytes_of_input.data()));
    if (!bytes_of_input.empty()) (*rest.mutable_inputs())[input.input].set_data(bytes_of_input);
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(rest, *parsed)) __builtin_trap();
}

// The same bytes as a ModelInferRequest: whatever RequestDataView::OfRepeatedBytes
// takes out of raw_input_contents (how ModelInfer leaves a large input where
// it was received), put back in its place, gives protobuf's parse.
void CheckRepeatedBytesView(const uint8_t* data, size_t size) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < size; at += 5) {
    slices.emplace_back(data + at, std::min<size_t>(5, size - at));
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());
  std::optional<tensorop::server::RequestDataView> view =
      tensorop::server::RequestDataView::OfRepeatedBytes(
          bytes, inference::ModelInferRequest::kRawInputContentsFieldNumber, 2);
  if (!view.has_value()) return;
  inference::ModelInferRequest parsed;
  const bool parsed_ok = parsed.ParseFromArray(data, static_cast<int>(size));
  inference::ModelInferRequest rest;
  const bool rest_ok = rest.ParseFromString(view->rest());
  if (rest_ok != parsed_ok) __builtin_trap();
  if (!rest_ok) return;
  if (static_cast<int>(view->inputs().size()) != rest.raw_input_contents_size()) __builtin_trap();
  for (size_t i = 0; i < view->inputs().size(); ++i) {
    const int64_t held = view->inputs()[i].bytes;
    if (held == 0) continue;
    std::string& entry = *rest.mutable_raw_input_contents(static_cast<int>(i));
    if (!entry.empty()) __builtin_trap();
    entry.resize(static_cast<size_t>(held));
    view->MoveDataTo(i, reinterpret_cast<std::byte*>(entry.data()));
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(rest, parsed)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorop::v1::RunRequest request;
  const bool parsed = request.ParseFromArray(data, static_cast<int>(size));
  CheckDataView(data, size, parsed ? &request : nullptr);
  CheckRepeatedBytesView(data, size);
  if (!parsed) return 0;  // INVALID_ARGUMENT
  using tensorop::fuzz::Answer;
  absl::Status status = tensorop::fuzz::RunRequest(request, "Run", Answer::kInline);
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    tensorop::fuzz::RunRequest(request, "RunStream", Answer::kStreamed).IgnoreError();
  }
  return 0;
}
