// The models' tensors, shared by the request conversion
// (inference_requests.cc) and the registry and answers (inference_models.cc).
#ifndef TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_
#define TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tensorop::server {

// One tensor of a model: its name, whether a request must carry it, and
// whether it is data (any datatype) rather than an INT64 parameter.
struct TensorSpec {
  absl::string_view name;
  bool required;
  bool data;
};

struct ModelSpec {
  absl::string_view name;
  std::vector<TensorSpec> inputs;
};

// The model named `name`, or null.
const ModelSpec* FindModel(absl::string_view name);
// `model`'s input named `name`, or null.
const TensorSpec* FindInput(const ModelSpec& model, absl::string_view name);
// `model`'s input names, comma-separated, for messages.
std::string InputNames(const ModelSpec& model);
// The output names of `model` for `request` (split: one per entry of `split`).
std::vector<std::string> OutputNames(absl::string_view model, int split_count);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_
