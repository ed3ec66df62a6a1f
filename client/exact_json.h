// JSON text read with exact decimals, for the conformance case format: a number
// whose nearest double is a rounding tie for float32, float16 or bfloat16 keeps
// its text,
// so it can round once, from the text, to the narrow type.
#ifndef TENSOROP_CLIENT_EXACT_JSON_H_
#define TENSOROP_CLIENT_EXACT_JSON_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tensorop::client {

// Parses JSON text. Unlike nlohmann::json::parse it keeps the decimal text of a
// number whose nearest double lies exactly halfway between two float32, float16
// or bfloat16 values (see TensorFromJson). Those numbers are held as JSON binary values, which
// JSON text itself never produces.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text);

// Whether `value` is a JSON float: a double, or decimal text kept by ParseJson.
bool IsFloatNumber(const nlohmann::json& value);
// The decimal text ParseJson kept for a float value (a binary value).
std::string DecimalText(const nlohmann::json& value);
// The nearest double to a float JSON number.
double NearestDouble(const nlohmann::json& value);

// A JSON value for messages, cut to about 40 characters.
std::string DescribeJson(const nlohmann::json& value);
// `text` as a JSON string literal, quotes and escapes included.
std::string JsonString(absl::string_view text);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_EXACT_JSON_H_
