// A tensor's JSON `data` in the v2 REST API (the Open Inference Protocol's
// JSON tensors), both ways, per dtype: a request's values, flat or nested, as
// little-endian bytes checked against the dtype's range (BOOL true/false, FP16
// and BF16 numbers rounded to nearest-even), and an answer's bytes as a flat
// array. inference_http_json.cc reads and writes the bodies around them.
#ifndef TENSOROP_SERVER_V2_JSON_TENSOR_DATA_H_
#define TENSOROP_SERVER_V2_JSON_TENSOR_DATA_H_

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace tensorop::server {

// The values that are no arrays in `data`, however nested (the parse bounded
// the depth): what `data` holds, before its bytes are made.
int64_t JsonLeafCount(const nlohmann::json& data);

// Appends every value of `data` (row-major) to `out` as `dtype`, little-endian;
// a float takes the strings "NaN", "Infinity" and "-Infinity" too.
// INVALID_ARGUMENT names `what`, the value's index and the value
// (`slice: input "offsets" data[1] = "x" is not an integer (INT64)`).
absl::Status AppendJsonData(const nlohmann::json& data, DType dtype, absl::string_view what,
                            std::string& out);

// `bytes` as a flat JSON array of `dtype` values.
nlohmann::json DataJson(absl::string_view bytes, DType dtype);
// The same array as JSON text, a float's NaN and infinities written as
// Triton writes them: NaN, Infinity and -Infinity (JSON has no number for
// them; nlohmann would write null). AppendJsonData reads those back.
std::string DataJsonText(absl::string_view bytes, DType dtype);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_JSON_TENSOR_DATA_H_
