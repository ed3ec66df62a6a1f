// JSON read from a client within bounds: nlohmann's DOM parse with arrays
// and objects nested at most kMaxJsonDepth deep and every value's heap bytes
// reserved (the memory budget) before they pile up; and a user's value quoted
// into an error message without re-serializing it whole.
#ifndef TENSOROP_SERVER_V2_BOUNDED_JSON_H_
#define TENSOROP_SERVER_V2_BOUNDED_JSON_H_

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensorop::server {

// Every JSON body is refused (INVALID_ARGUMENT naming this limit) when its
// arrays and objects nest deeper: no protocol body nests more than a few.
inline constexpr int kMaxJsonDepth = 64;
// Called with more bytes to reserve (the memory budget) before the parse
// holds them: as nlohmann values grow, in 1 MiB steps, and before an input's
// raw bytes are made. An error stops the parse with it. Null: nothing reserved.
using JsonReserve = std::function<absl::Status(int64_t bytes)>;

// `text` parsed within those bounds: INVALID_ARGUMENT naming `what` for text
// that is no JSON or nests past kMaxJsonDepth, `reserve`'s refusal when the
// values do not fit. The bare literals NaN, Infinity and -Infinity, which JSON
// lacks and Triton's JSON (rapidjson's NaN and Inf flags) reads and writes,
// are read as the strings "NaN", "Infinity" and "-Infinity" (a tensor's float
// data takes those: json_tensor_data.h).
absl::StatusOr<nlohmann::json> ParseBoundedJson(absl::string_view text, absl::string_view what,
                                                const JsonReserve& reserve);
// Whether `status` is ParseBoundedJson's refusal of a body nested too deep.
bool NestsTooDeep(const absl::Status& status);

// `json` as compact text (invalid UTF-8 replaced).
std::string DumpJson(const nlohmann::json& json);
// A user's value as an error message quotes it: scalars as written, strings
// cut at 64 characters, arrays and objects by kind only. Never the whole
// value: re-serializing what a client sent is unbounded work and text.
std::string QuoteJson(const nlohmann::json& v);

}  // namespace tensorop::server

#endif  // TENSOROP_SERVER_V2_BOUNDED_JSON_H_
