// Results against conformance cases: exact comparison, and results rendered as
// the JSON lines of `tensorctl run`.
#ifndef TENSOROP_CLIENT_CASE_COMPARE_H_
#define TENSOROP_CLIENT_CASE_COMPARE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/case_format.h"
#include "client/host_tensor.h"

namespace tensorop::client {

// Compares what a request returned with what the case expects, exactly: an
// expected error by its code; else the number of outputs and for each its dtype,
// sizes, strides (only where the case asked for output strides), and the bytes of
// every logical element read through the returned strides (so -0.0 and NaN
// payloads count). Returns nullopt on a match, else what differs.
std::optional<std::string> FindMismatch(const Case& c, const absl::StatusOr<Result>& got);

// {"dtype":...,"sizes":[...],"strides":[...],"data":[...]} with the logical
// values packed row-major and the strides the tensor has (packed ones when it has
// none). INVALID_ARGUMENT when the layout reaches past the data. A kept output
// (tensor.handle) has "handle":HandleToJson(...) in place of "data".
absl::StatusOr<std::string> TensorToJson(const HostTensor& tensor);

// {"id":...,"replica":...,"dtype":...,"sizes":[...],"strides":[...],
// "backend":...,"device_index":N,"byte_size":N,"expires_unix_ms":N,
// "last_use_unix_ms":N}, on one line.
std::string HandleToJson(const v1::TensorHandle& handle);

// `tensorctl run`'s line for one case:
// {"name":...,"backend":...,"outputs":[...]} or
// {"name":...,"error":{"code":"INVALID_ARGUMENT","message":...}}.
std::string RunLineJson(absl::string_view name, const absl::StatusOr<Result>& result);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CASE_COMPARE_H_
