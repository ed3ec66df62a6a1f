// The names of the public Backend values on command lines: tensord's
// --backend and tensorctl's --backend accept the same words. A helper over the
// generated enum, so the client (which links only the proto layer) and the
// server share it.
#ifndef TENSOROP_PROTO_BACKEND_NAME_H_
#define TENSOROP_PROTO_BACKEND_NAME_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop {

// The accepted words, for usage messages.
inline constexpr absl::string_view kBackendNames = "auto, cpu or opencl";

// "auto", "cpu" or "opencl" (exactly: lower case, no index); nullopt otherwise.
std::optional<v1::Backend> ParseBackendName(absl::string_view name);

}  // namespace tensorop

#endif  // TENSOROP_PROTO_BACKEND_NAME_H_
