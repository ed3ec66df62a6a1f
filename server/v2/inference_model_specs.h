// The models' tensors, shared by the request conversion
// (inference_requests.cc) and the registry and answers (inference_models.cc).
#ifndef TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_
#define TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/operator_info.h"
#include "google/protobuf/descriptor.h"

namespace tensorop::server {

// One tensor of a model: its name, whether a request must carry it, and
// whether it is data (any datatype) rather than an INT64 parameter. A
// parameter is the operator attribute of its name (null: split's "split",
// the outputs' sizes along the axis); a scalar attribute takes shape [1].
struct TensorSpec {
  absl::string_view name;
  bool required = true;
  bool data = false;
  bool scalar = false;
  // A text attribute (pad's mode and value): one BYTES element, shape [1].
  bool text = false;
  const google::protobuf::FieldDescriptor* attribute = nullptr;
};

// The model of one operator, made from core's row (kOperators) and the
// operator's attributes message: its inputs, then one parameter per attribute.
struct ModelSpec {
  const OperatorInfo* op;
  absl::string_view name;  // op->name
  std::vector<TensorSpec> inputs = {};
  const google::protobuf::FieldDescriptor* field;  // RunRequest's `op` field
};

// The input of split's model that gives each output's size along the axis
// (ONNX Split's name for it).
inline constexpr absl::string_view kSplitSizesInput = "split";
// The input of index values, by the ONNX name every operator that takes one
// gives it: an integer datatype only.
inline constexpr absl::string_view kIndicesInput = "indices";

// The model named `name`, or null.
const ModelSpec* FindModel(absl::string_view name);
// `model`'s input named `name`, or null.
const TensorSpec* FindInput(const ModelSpec& model, absl::string_view name);
// `model`'s input names, comma-separated, for messages.
std::string InputNames(const ModelSpec& model);
// The output names of `model` when its run gives `count` outputs: "output",
// or, where the caller gives the outputs (split), "output_0", "output_1", ...
std::vector<std::string> OutputNames(const ModelSpec& model, int count);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_INFERENCE_MODEL_SPECS_H_
