// One element of a dtype between JSON values and little-endian bytes, exactly:
// floats round to nearest-even from their decimal text, integers are range
// checked, and the rendering reads back to the same bits.
#ifndef TENSOROP_CLIENT_ELEMENT_CODEC_H_
#define TENSOROP_CLIENT_ELEMENT_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tensorop/v1/tensorop.pb.h"

namespace tensorop::client {

// Appends one element of `dtype`, encoded from JSON, to `out`:
// - floats: JSON numbers rounded to nearest-even from their exact decimal value,
//   or "nan" (the canonical quiet NaN), "inf", "-inf";
// - integers: JSON integers, integral JSON floats below 2^53, or decimal strings
//   (needed for 64-bit values beyond 2^53); out of range is an error.
absl::Status AppendElement(v1::DType dtype, const nlohmann::json& value, std::string* out);

// A JSON integer, integral float below 2^53 or decimal string, as an int64.
absl::StatusOr<int64_t> Int64FromJson(const nlohmann::json& value);

// One element as JSON text: integers as numbers, except 64-bit values beyond
// +-2^53 as decimal strings; floats as the shortest text that reads back to the
// same value at their own precision (float16 via its exact float value), always
// with a "." or exponent so they stay floats, and "nan", "inf", "-inf" as strings.
std::string ElementToJson(v1::DType dtype, const char* bytes);

// The `size` little-endian bytes at `bytes` as an unsigned integer.
uint64_t ReadLittleEndian(const char* bytes, int size);

}  // namespace tensorop::client

#endif  // TENSOROP_CLIENT_ELEMENT_CODEC_H_
