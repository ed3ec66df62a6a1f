#include "proto/backend_name.h"

namespace tensorop {

std::optional<v1::Backend> ParseBackendName(absl::string_view name) {
  if (name == "auto") return v1::AUTO;
  if (name == "cpu") return v1::CPU;
  if (name == "opencl") return v1::OPENCL;
  return std::nullopt;
}

}  // namespace tensorop
