// Conformance cases (docs/operators.md, "Conformance cases") read into requests and their
// expectations. The JSON reading is client/exact_json.h, the element values
// client/element_codec.h, the comparison with results client/case_compare.h.
#ifndef TENSOROP_CLIENT_CASE_FORMAT_H_
#define TENSOROP_CLIENT_CASE_FORMAT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/host_tensor.h"
#include "nlohmann/json.hpp"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

// A step after a case's first (the case's optional "then", tensorop's own
// extension of the format: tests/conformance/README.md): an operator whose
// "input" is output `from` of the step before it, its other inputs given.
struct LaterStep {
  v1::RunRequest request;  // without "input": the runner fills it in
  int from = 0;
};

// One case, ready to send.
struct Case {
  std::string name;
  // Op, attrs, inputs and outputs as the case gives them; id = name, backend AUTO.
  // Inputs are sent as written, even with the wrong number of values: rejecting
  // those is the server's job, and some cases test exactly that.
  v1::RunRequest request;
  // kOk when the case expects outputs, else the error code it expects.
  absl::StatusCode expected_error = absl::StatusCode::kOk;
  // The steps after `request`, in order; the expectation is the last one's.
  std::vector<LaterStep> then;
  // The expected outputs: logical values packed row-major (no strides), exactly
  // product(sizes) of them.
  std::vector<HostTensor> expected_outputs;
};

// One entry of a case file: the case, or why it cannot be run, so one malformed
// case does not hide the others. `name` is the case's name, or "#<index in the
// file>" when it has no readable one; `file` the file it came from (LoadCases;
// empty from ParseCases).
struct LoadedCase {
  std::string name;
  absl::StatusOr<Case> parsed;
  std::string file;
};

// A tensor object {"dtype", "sizes", "strides"?, "data"} with its values encoded
// as little-endian bytes of the dtype by AppendElement (client/element_codec.h),
// so float16 and float32 values written exactly are encoded exactly. The number
// of values is not checked here (see Case::request).
absl::StatusOr<HostTensor> TensorFromJson(const nlohmann::json& tensor);

// One case object. Errors name the field: "inputs.input.data[3]: 70000 is out of
// range for int16".
absl::StatusOr<Case> CaseFromJson(const nlohmann::json& json);

// The cases of one file's text: a case object or an array of them. An error here
// means the text as a whole is unusable (not JSON, not an object or array).
absl::StatusOr<std::vector<LoadedCase>> ParseCases(absl::string_view text);

// The cases of a file, or of every *.json file in a directory (in name order).
absl::StatusOr<std::vector<LoadedCase>> LoadCases(const std::string& path);

// "INVALID_ARGUMENT" -> kInvalidArgument; the gRPC code names.
std::optional<absl::StatusCode> StatusCodeFromName(absl::string_view name);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CASE_FORMAT_H_
