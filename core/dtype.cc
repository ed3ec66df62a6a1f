#include "core/dtype.h"

namespace tensorop {

int ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUint64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUint32:
      return 4;
    case DType::kFloat16:
    case DType::kBfloat16:
    case DType::kInt16:
    case DType::kUint16:
      return 2;
    case DType::kInt8:
    case DType::kUint8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return "float64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kUint64:
      return "uint64";
    case DType::kUint32:
      return "uint32";
    case DType::kUint16:
      return "uint16";
    case DType::kUint8:
      return "uint8";
    case DType::kBfloat16:
      return "bfloat16";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

std::optional<DType> DTypeFromName(absl::string_view name) {
  for (DType dtype : kAllDTypes) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromInt(int64_t value) {
  if (value < static_cast<int64_t>(DType::kFloat64) || value > static_cast<int64_t>(DType::kBool)) {
    return std::nullopt;
  }
  return static_cast<DType>(value);
}

bool IsFloat(DType dtype) {
  return dtype == DType::kFloat64 || dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBfloat16;
}

bool IsSigned(DType dtype) {
  return IsFloat(dtype) || dtype == DType::kInt64 || dtype == DType::kInt32 ||
         dtype == DType::kInt16 || dtype == DType::kInt8;
}

}  // namespace tensorop
