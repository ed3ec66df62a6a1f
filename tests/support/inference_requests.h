// Building v2 (inference.ModelInferRequest) requests in tests.
#ifndef TENSOROP_TESTS_SUPPORT_INFERENCE_REQUESTS_H_
#define TENSOROP_TESTS_SUPPORT_INFERENCE_REQUESTS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "inference/grpc_service.pb.h"

namespace tensorop::testing {

// `values` as little-endian bytes (the host's order; tensorop runs on
// little-endian hosts).
template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Adds input `name` with its bytes in raw_input_contents.
inline void AddRaw(inference::ModelInferRequest& request, const std::string& name,
                   const std::string& datatype, std::vector<int64_t> shape, std::string bytes) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  input->mutable_shape()->Assign(shape.begin(), shape.end());
  request.add_raw_input_contents(std::move(bytes));
}

}  // namespace tensorop::testing

#endif  // TENSOROP_TESTS_SUPPORT_INFERENCE_REQUESTS_H_
