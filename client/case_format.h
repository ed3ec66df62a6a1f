// Conformance cases (shared/conformance/FORMAT.md): reading them into requests,
// comparing results with them bit for bit, and rendering results as JSON.
#ifndef TENSOROP_CLIENT_CASE_FORMAT_H_
#define TENSOROP_CLIENT_CASE_FORMAT_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/host_tensor.h"
#include "nlohmann/json.hpp"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

// One case, ready to send.
struct Case {
  std::string name;
  // Op, attrs, inputs and outputs as the case gives them; id = name, backend AUTO.
  // Inputs are sent as written, even with the wrong number of values: rejecting
  // those is the server's job, and some cases test exactly that.
  v1::RunRequest request;
  // kOk when the case expects outputs, else the error code it expects.
  absl::StatusCode expected_error = absl::StatusCode::kOk;
  // The expected outputs: logical values packed row-major (no strides), exactly
  // product(sizes) of them.
  std::vector<HostTensor> expected_outputs;
};

// One entry of a case file: the case, or why it cannot be run, so one malformed
// case does not hide the others. `name` is the case's name, or "#<index in the
// file>" when it has no readable one.
struct LoadedCase {
  std::string name;
  absl::StatusOr<Case> parsed;
};

// Parses JSON text. Unlike nlohmann::json::parse it keeps the decimal text of a
// number whose nearest double lies exactly halfway between two float32 or float16
// values, so that such numbers round once, from the text, to the narrow type
// (see TensorFromJson). Those numbers are held as JSON binary values, which JSON
// text itself never produces.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text);

// A tensor object {"dtype", "sizes", "strides"?, "data"} with its values encoded
// as little-endian bytes of the dtype:
// - floats: JSON numbers rounded to nearest-even from their exact decimal value
//   (so float16 and float32 values written exactly are encoded exactly), or
//   "nan" (the canonical quiet NaN), "inf", "-inf";
// - integers: JSON integers, integral JSON floats below 2^53, or decimal strings
//   (needed for 64-bit values beyond 2^53); out of range is an error.
// The number of values is not checked here (see Case::request).
absl::StatusOr<HostTensor> TensorFromJson(const nlohmann::json& tensor);

// One case object. Errors name the field: "inputs.input.data[3]: 70000 is out of
// range for int16".
absl::StatusOr<Case> CaseFromJson(const nlohmann::json& json);

// The cases of one file's text: a case object or an array of them. An error here
// means the text as a whole is unusable (not JSON, not an object or array).
absl::StatusOr<std::vector<LoadedCase>> ParseCases(absl::string_view text);

// The cases of a file, or of every *.json file in a directory (in name order).
absl::StatusOr<std::vector<LoadedCase>> LoadCases(const std::string& path);

// Compares what a request returned with what the case expects, exactly: an
// expected error by its code; else the number of outputs and for each its dtype,
// sizes, strides (only where the case asked for output strides), and the bytes of
// every logical element read through the returned strides (so -0.0 and NaN
// payloads count). Returns nullopt on a match, else what differs.
std::optional<std::string> FindMismatch(const Case& c, const absl::StatusOr<Result>& got);

// One element as JSON text: integers as numbers, except 64-bit values beyond
// +-2^53 as decimal strings; floats as the shortest text that reads back to the
// same value at their own precision (float16 via its exact float value), always
// with a "." or exponent so they stay floats, and "nan", "inf", "-inf" as strings.
std::string ElementToJson(v1::DType dtype, const char* bytes);

// {"dtype":...,"sizes":[...],"strides":[...],"data":[...]} with the logical
// values packed row-major and the strides the tensor has (packed ones when it has
// none). INVALID_ARGUMENT when the layout reaches past the data.
absl::StatusOr<std::string> TensorToJson(const HostTensor& tensor);

// `tensorctl run`'s line for one case:
// {"name":...,"backend":...,"outputs":[...]} or
// {"name":...,"error":{"code":"INVALID_ARGUMENT","message":...}}.
std::string RunLineJson(absl::string_view name, const absl::StatusOr<Result>& result);

// "INVALID_ARGUMENT" -> kInvalidArgument; the gRPC code names.
std::optional<absl::StatusCode> StatusCodeFromName(absl::string_view name);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_CASE_FORMAT_H_
