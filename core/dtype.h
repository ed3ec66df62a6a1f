// Element types and their sizes. Data-movement kernels only ever see the size.
#ifndef TENSOROP_CORE_DTYPE_H_
#define TENSOROP_CORE_DTYPE_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace tensorop {

// The values match tensorop.v1.DType so conversion is a range check.
enum class DType : uint8_t {
  kFloat64 = 1,
  kFloat32 = 2,
  kFloat16 = 3,
  kInt64 = 4,
  kInt32 = 5,
  kInt16 = 6,
  kInt8 = 7,
  kUint64 = 8,
  kUint32 = 9,
  kUint16 = 10,
  kUint8 = 11,
  kBfloat16 = 12,  // the upper half of a float32
  kBool = 13,      // one byte, 0 or 1; copied as it is, never checked
};

inline constexpr DType kAllDTypes[] = {
    DType::kFloat64, DType::kFloat32,  DType::kFloat16, DType::kInt64,  DType::kInt32,
    DType::kInt16,   DType::kInt8,     DType::kUint64,  DType::kUint32, DType::kUint16,
    DType::kUint8,   DType::kBfloat16, DType::kBool};

// One dtype of each element size, 1, 2, 4 and 8 bytes: the kernels see only the
// size, so these cover every dtype (the kernel test matrices run them).
inline constexpr DType kOneDTypePerSize[] = {DType::kBool, DType::kBfloat16, DType::kFloat32,
                                             DType::kInt64};

// Bytes per element: 1, 2, 4 or 8.
int ElementSize(DType dtype);

// Lower-case names as in the conformance format: "float32", "uint8", ...
absl::string_view DTypeName(DType dtype);
std::optional<DType> DTypeFromName(absl::string_view name);

// The enum value for a wire integer, or nullopt when it names no dtype.
std::optional<DType> DTypeFromInt(int64_t value);

bool IsFloat(DType dtype);
bool IsSigned(DType dtype);

}  // namespace tensorop

#endif  // TENSOROP_CORE_DTYPE_H_
