#include "client/case_compare.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/element_codec.h"
#include "client/exact_json.h"
#include "client/status_macros.h"

namespace tensorop::client {
namespace {

std::string ErrorLine(absl::string_view name, const absl::Status& status) {
  return absl::StrCat("{\"name\":", JsonString(name),
                      ",\"error\":{\"code\":", JsonString(absl::StatusCodeToString(status.code())),
                      ",\"message\":", JsonString(status.message()), "}}");
}

// Coordinates of the `index`-th element in row-major order.
std::vector<int64_t> Coordinates(absl::Span<const int64_t> sizes, int64_t index) {
  std::vector<int64_t> coordinates(sizes.size());
  for (size_t i = sizes.size(); i > 0; --i) {
    coordinates[i - 1] = index % sizes[i - 1];
    index /= sizes[i - 1];
  }
  return coordinates;
}

// One element for a message; with its bits when the text alone would not show
// the difference (NaN payloads).
std::string ElementForMessage(v1::DType dtype, const char* bytes, bool with_bits) {
  std::string text = ElementToJson(dtype, bytes);
  if (with_bits) {
    const int size = ElementSize(dtype);
    absl::StrAppend(&text, " (bits 0x",
                    absl::StrFormat("%0*x", 2 * size, ReadLittleEndian(bytes, size)), ")");
  }
  return text;
}

// What differs between one expected output and the returned one, or "".
std::string CompareTensor(const HostTensor& expected, const v1::OutputDesc* requested,
                          const HostTensor& got) {
  if (got.dtype != expected.dtype) {
    return absl::StrCat("dtype is ", DTypeName(got.dtype), " (", static_cast<int>(got.dtype),
                        "), expected ", DTypeName(expected.dtype));
  }
  if (got.sizes != expected.sizes) {
    return absl::StrCat("sizes are ", FormatDims(got.sizes), ", expected ",
                        FormatDims(expected.sizes));
  }
  if (requested != nullptr && !requested->strides().empty() &&
      !std::equal(got.strides.begin(), got.strides.end(), requested->strides().begin(),
                  requested->strides().end())) {
    return absl::StrCat("strides are ", FormatDims(got.strides), ", expected ",
                        FormatDims(requested->strides()));
  }
  if (absl::StatusOr<int64_t> checked = CheckLayout(got); !checked.ok()) {
    return std::string(checked.status().message());
  }
  const int size = ElementSize(got.dtype);
  int64_t index = 0;
  int64_t differing = 0;
  int64_t first = -1;
  int64_t first_offset = 0;
  ForEachElementOffset(got.sizes, EffectiveStrides(got), [&](int64_t offset) {
    if (std::memcmp(got.data.data() + offset * size, expected.data.data() + index * size, size) !=
        0) {
      if (differing++ == 0) {
        first = index;
        first_offset = offset;
      }
    }
    ++index;
  });
  if (differing == 0) return "";
  const char* got_bytes = got.data.data() + first_offset * size;
  const char* expected_bytes = expected.data.data() + first * size;
  const bool with_bits =
      ElementToJson(got.dtype, got_bytes) == ElementToJson(got.dtype, expected_bytes);
  return absl::StrCat("element ", FormatDims(Coordinates(got.sizes, first)), " is ",
                      ElementForMessage(got.dtype, got_bytes, with_bits), ", expected ",
                      ElementForMessage(got.dtype, expected_bytes, with_bits), " (", differing,
                      " of ", index, " elements differ)");
}

}  // namespace

std::optional<std::string> FindMismatch(const Case& c, const absl::StatusOr<Result>& got) {
  const std::string expected_code = absl::StatusCodeToString(c.expected_error);
  if (c.expected_error != absl::StatusCode::kOk) {
    if (got.ok()) {
      return absl::StrCat("expected ", expected_code, ", got ", got->outputs.size(),
                          " outputs from ", got->backend);
    }
    if (got.status().code() != c.expected_error) {
      return absl::StrCat("expected ", expected_code, ", got ", got.status().ToString());
    }
    return std::nullopt;
  }
  if (!got.ok()) return absl::StrCat("expected outputs, got ", got.status().ToString());
  if (got->outputs.size() != c.expected_outputs.size()) {
    return absl::StrCat("expected ", c.expected_outputs.size(), " outputs, got ",
                        got->outputs.size());
  }
  std::string differences;
  for (size_t i = 0; i < got->outputs.size(); ++i) {
    const v1::OutputDesc* requested = static_cast<int>(i) < c.request.outputs_size()
                                          ? &c.request.outputs(static_cast<int>(i))
                                          : nullptr;
    const std::string difference = CompareTensor(c.expected_outputs[i], requested, got->outputs[i]);
    if (!difference.empty()) {
      absl::StrAppend(&differences, differences.empty() ? "" : "; ", "outputs[", i,
                      "]: ", difference);
    }
  }
  if (differences.empty()) return std::nullopt;
  return differences;
}

std::string HandleToJson(const v1::TensorHandle& handle) {
  return absl::StrCat(
      "{\"id\":", JsonString(handle.id()), ",\"replica\":", JsonString(handle.replica()),
      ",\"dtype\":", JsonString(DTypeName(handle.dtype())),
      ",\"sizes\":", FormatDims(handle.sizes()), ",\"strides\":", FormatDims(handle.strides()),
      ",\"backend\":", JsonString(handle.backend()), ",\"device_index\":", handle.device_index(),
      ",\"byte_size\":", handle.byte_size(), ",\"expires_unix_ms\":", handle.expires_unix_ms(),
      ",\"last_use_unix_ms\":", handle.last_use_unix_ms(), "}");
}

absl::StatusOr<std::string> TensorToJson(const HostTensor& tensor) {
  if (tensor.handle.has_value()) {
    return absl::StrCat("{\"dtype\":\"", DTypeName(tensor.dtype),
                        "\",\"sizes\":", FormatDims(tensor.sizes),
                        ",\"strides\":", FormatDims(EffectiveStrides(tensor)),
                        ",\"handle\":", HandleToJson(*tensor.handle), "}");
  }
  ASSIGN_OR_RETURN(const int64_t elements, CheckLayout(tensor));
  const std::vector<int64_t> strides = EffectiveStrides(tensor);
  const int size = ElementSize(tensor.dtype);
  std::string json = absl::StrCat("{\"dtype\":\"", DTypeName(tensor.dtype),
                                  "\",\"sizes\":", FormatDims(tensor.sizes),
                                  ",\"strides\":", FormatDims(strides), ",\"data\":[");
  // A guess at the text's size, capped: a broadcast output of 2^32 elements from
  // a few bytes must not reserve gigabytes up front.
  json.reserve(json.size() + static_cast<size_t>(std::min<int64_t>(elements, 1 << 24)) * 4 + 2);
  bool first = true;
  ForEachElementOffset(tensor.sizes, strides, [&](int64_t offset) {
    if (!first) json += ',';
    first = false;
    json += ElementToJson(tensor.dtype, tensor.data.data() + offset * size);
  });
  json += "]}";
  return json;
}

std::string RunLineJson(absl::string_view name, const absl::StatusOr<Result>& result) {
  if (!result.ok()) return ErrorLine(name, result.status());
  std::string line = absl::StrCat("{\"name\":", JsonString(name),
                                  ",\"backend\":", JsonString(result->backend), ",\"outputs\":[");
  for (size_t i = 0; i < result->outputs.size(); ++i) {
    absl::StatusOr<std::string> tensor = TensorToJson(result->outputs[i]);
    if (!tensor.ok()) {
      return ErrorLine(
          name, absl::InternalError(absl::StrCat("output ", i, ": ", tensor.status().message())));
    }
    absl::StrAppend(&line, i == 0 ? "" : ",", *tensor);
  }
  line += "]}";
  return line;
}

}  // namespace tensorop::client
